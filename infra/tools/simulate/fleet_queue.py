"""The manager's side of a fleet simulation: a job as the manager's Kueue holds it, and the
classic preemption its ClusterQueues allow (used by infra.tools.simulate.fleet)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from infra.tools.simulate.fleet_read import FleetJob, ManagerQuota


@dataclass
class Entry:
    job: FleetJob
    index: int
    priority: int
    queue: str
    slots: int
    reserved: bool = False
    # When the manager last reserved its quota ("most recently admitted" preempted first).
    reserved_at: float = 0.0
    # Its queue timestamp on the manager (Ordering.GetQueueOrderTimestamp, pkg/workload/workload.go):
    # its creation (the submit time), or when the manager last evicted it by the admission check
    # (IsEvictedByAdmissionCheck: a winner's copy evicted on its worker). Evicted by the
    # manager's preemption it is its creation again (PrioritySortingWithinCohort is on).
    queued_at: float = 0.0
    # Preempted by the manager, its quota held until its job is inactive (FleetSimulation._preempt).
    preempting: bool = False
    nominated: int = 0
    # Dispatches so far: a round event of an earlier one is stale.
    dispatches: int = 0
    winner: str | None = None
    done: bool = False
    reason: str = ""


def classic_targets(
    entry: Entry, quota: ManagerQuota, usage_now: Mapping[tuple[str, str], int], reserved: Sequence[Entry], available: int
) -> list[Entry]:
    """Kueue's classic preemption on the manager (kubernetes-sigs/kueue@v0.19.2
    pkg/scheduler/preemption/preemption.go classicalPreemptions, classical/ candidate_generator.go
    and hierarchical_preemption.go), for a head that does not fit, with the manager's policies
    (components.kubernetes.queues.PREEMPTION; borrowWithinCohort Never, which
    fleet_read.read_manager_quota requires). It is tried only for a request within the queue's
    nominal quota (flavorassigner.go fitsResourceQuota: `rQuota.Nominal >= val ||
    mayReclaimInHierarchy || canPreemptWhileBorrowing`, the latter two implying it here).
    Candidates: workloads its ClusterQueue's withinClusterQueue allows in its own queue, and
    those reclaimWithinCohort allows in queues of its cohort above their nominal quota;
    already evicted first, then other queues, lowest priority, most recently reserved
    (common/ordering.go CandidatesOrdering). Other queues' candidates may be taken only
    without borrowing unless the request fits the queue's own unused nominal quota
    (hierarchical advantage; otherwise ReclaimWithoutBorrowing). The attempts, in order:
    with borrowing alone when every candidate is in its own queue or the queue is at or over
    its nominal quota; without then with borrowing when it has no hierarchical advantage;
    with then without otherwise. Each removes valid candidates until the head fits (without
    borrowing: within its nominal quota too), then adds back, in reverse, those it can do
    without (fillBackWorkloads). Empty: none."""
    m, q = entry.job.gpu_model, entry.queue
    nominal = quota.nominal[m]
    if entry.slots > nominal.get(q, 0):
        return []
    usage = {queue: usage_now.get((m, queue), 0) for queue in quota.cohorts}
    cohort = quota.cohorts[q]
    hierarchical = usage[q] + entry.slots <= nominal.get(q, 0)

    def policy(name: str, other: Entry) -> bool:
        return name == "Any" or (name == "LowerPriority" and other.priority < entry.priority)

    same = [e for e in reserved if e.queue == q and policy(quota.within[q], e)]
    others = [
        e
        for e in reserved
        if e.queue != q
        and cohort is not None
        and quota.cohorts[e.queue] == cohort
        and usage[e.queue] > nominal.get(e.queue, 0)
        and policy(quota.reclaim[q], e)
    ]
    candidates = sorted(same + others, key=lambda e: (not e.preempting, e.queue == q, e.priority, -e.reserved_at, -e.index))
    if not others or usage[q] >= nominal.get(q, 0):
        attempts = (True,)
    elif not hierarchical:
        attempts = (False, True)
    else:
        attempts = (True, False)

    def fits(borrow: bool, free: int, use: Mapping[str, int]) -> bool:
        return entry.slots <= free and (borrow or use[q] + entry.slots <= nominal.get(q, 0))

    for borrow in attempts:
        use = dict(usage)
        free = available
        chosen: list[Entry] = []
        for candidate in candidates:
            if candidate.queue != q and ((borrow and not hierarchical) or use[candidate.queue] <= nominal.get(candidate.queue, 0)):
                continue
            chosen.append(candidate)
            use[candidate.queue] -= candidate.slots
            free += candidate.slots
            if fits(borrow, free, use):
                for back in reversed(chosen[:-1]):
                    use[back.queue] += back.slots
                    if fits(borrow, free - back.slots, use):
                        free -= back.slots
                        chosen.remove(back)
                    else:
                        use[back.queue] -= back.slots
                return chosen
    return []

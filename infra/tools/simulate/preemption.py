"""Kueue's classic preemption on one flavor, over a pool's live quota state: who may preempt,
whom, and the smallest set of targets that makes room (the engine's module doc says how).

Pure functions of the state they are given: a search for targets takes usage out and puts it
back, and leaves the pool as it found it.
"""

from __future__ import annotations

from infra.tools.simulate.model import QueueModel
from infra.tools.simulate.state import Job, PoolState


def reach(pool: PoolState, q: int, queue: QueueModel, members: list[int]) -> int:
    """The largest job of the queue that could be admitted now: one that fits, or one that
    may preempt (at most the nominal quota, when there are candidates)."""
    most = pool.available(q)
    if most < pool.nominal[q] and may_preempt(pool, q, queue, members):
        return pool.nominal[q]
    return most


def may_preempt(pool: PoolState, q: int, queue: QueueModel, members: list[int]) -> bool:
    """Whether the queue has any preemption candidate at all on this flavor; `members` are the
    other queues of its cohort."""
    if queue.within_cluster_queue != "Never" and pool.admitted[q]:
        return True
    if queue.reclaim_within_cohort == "Never":
        return False
    usage, nominal, admitted = pool.usage, pool.nominal, pool.admitted
    for other in members:
        if usage[other] > nominal[other] and admitted[other]:
            return True
    return False


def has_candidates(pool: PoolState, job: Job, queue: QueueModel, members: list[int]) -> bool:
    """Whether some admitted job is one the policies let `job` preempt, from the priorities
    alone: a quick test before the search for targets."""
    q = job.queue
    within = queue.within_cluster_queue
    if within != "Never" and pool.priorities[q]:
        lowest = min(pool.priorities[q])
        if lowest < job.priority or (within == "LowerOrNewerEqualPriority" and lowest == job.priority):
            return True
    reclaim = queue.reclaim_within_cohort
    if reclaim == "Never":
        return False
    for other in members:
        if pool.usage[other] > pool.nominal[other] and pool.priorities[other]:
            if reclaim == "Any" or min(pool.priorities[other]) < job.priority:
                return True
    return False


def allows(policy: str, job: Job, candidate: Job) -> bool:
    """Kueue's SatisfiesPreemptionPolicy (pkg/scheduler/preemption/common/preemption_policy.go)."""
    if policy == "LowerPriority":
        return candidate.priority < job.priority
    if policy == "LowerOrNewerEqualPriority":
        return candidate.priority < job.priority or (
            candidate.priority == job.priority and job.order_ts < candidate.order_ts
        )
    return policy == "Any"


def targets(pool: PoolState, job: Job, queue: QueueModel) -> list[Job]:
    """Classic preemption (pkg/scheduler/preemption/preemption.go, classicalPreemptions, and
    classical/candidate_generator.go), with borrowWithinCohort Never."""
    q, need = job.queue, job.slots
    # Candidate order: other queues first, then lower priority, then admitted most recently.
    order = lambda c: (c.queue == q, c.priority, -c.admission)  # noqa: E731
    same = []
    if queue.within_cluster_queue != "Never":
        same = sorted((c for c in pool.admitted[q].values() if allows(queue.within_cluster_queue, job, c)), key=order)
    # The preemptor fits in its own nominal quota: a reclaim it may make while borrowing nothing.
    advantage = pool.usage[q] + need <= pool.nominal[q]
    others = []
    if pool.cohort[q] >= 0 and queue.reclaim_within_cohort != "Never":
        for other, admitted in enumerate(pool.admitted):
            if other != q and pool.cohort[other] == pool.cohort[q] and pool.usage[other] > pool.nominal[other]:
                others += [c for c in admitted.values() if allows(queue.reclaim_within_cohort, job, c)]
        others.sort(key=order)
    candidates = others + same
    if not others or pool.usage[q] >= pool.nominal[q]:
        attempts = [True]
    elif not advantage:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for borrowing in attempts:
        chosen: list[Job] = []
        for candidate in candidates:
            c = candidate.queue
            if c != q and ((borrowing and not advantage) or pool.usage[c] <= pool.nominal[c]):
                continue
            pool.remove_usage(c, candidate.slots)
            chosen.append(candidate)
            if _fits(pool, job, borrowing):
                chosen = fill_back(pool, job, borrowing, chosen)
                for target in chosen:
                    pool.add_usage(target.queue, target.slots)
                return chosen
        for target in chosen:
            pool.add_usage(target.queue, target.slots)
    return []


def _fits(pool: PoolState, job: Job, borrowing: bool) -> bool:
    if not borrowing and pool.usage[job.queue] + job.slots > pool.nominal[job.queue]:
        return False
    return job.slots <= pool.available(job.queue)


def fill_back(pool: PoolState, job: Job, borrowing: bool, chosen: list[Job]) -> list[Job]:
    """Add back, in reverse order, every target the preemptor can do without."""
    for i in range(len(chosen) - 2, -1, -1):
        target = chosen[i]
        pool.add_usage(target.queue, target.slots)
        if _fits(pool, job, borrowing):
            chosen[i] = chosen[-1]
            chosen.pop()
        else:
            pool.remove_usage(target.queue, target.slots)
    return chosen

"""Kueue 0.19.2's fair sharing over the pools' live quota state: each ClusterQueue's dominant
resource share, the order in which a scheduling cycle admits the heads of a cohort's queues by
that share, and the preemptions its strategies allow.

Sources (kubernetes-sigs/kueue@v0.19.2):
- the share: pkg/cache/scheduler/fair_sharing.go (dominantResourceShare, calculateLendable,
  CompareDRS). For a queue of a cohort: per resource, what it uses above its nominal quota,
  summed over the flavors, times 1000, over what the cohort can lend of that resource over all
  flavors (its SubtreeQuota); the largest such ratio over the resources, divided by the queue's
  fairSharing.weight. Kueue accounts only nvidia.com/gpu here (quotaCheckStrategy
  IgnoreUndeclared), so the share is the GPU slots a queue borrows over all pools, per mille of
  what the cohort lends over all pools: one team's borrowing on one pool weighs on its share on
  every other. A queue with weight 0 that borrows ranks above every queue that does not; a
  queue outside a cohort has share 0.
- admission order: pkg/scheduler/fair_sharing_iterator.go. Each pop of a cycle recomputes the
  shares as they stand, each with the queue's head added, and takes the lowest by, in order:
  not borrowing on the head's flavor after admission (FairSharingPrioritizeNonBorrowing, beta and
  on in 0.19), the share, the priority (PrioritySortingWithinCohort, on), the queue timestamp.
  With one level of cohorts the tournament is that one comparison.
- preemption: pkg/scheduler/preemption/preemption.go (fairPreemptions, runFirstFsStrategy,
  runSecondFsStrategy) and pkg/scheduler/preemption/fairsharing (ordering.go, strategy.go,
  target.go). Candidates are as classic preemption finds them (the queue's own lower tiers; jobs
  of cohort queues borrowing on the flavor that reclaimWithinCohort allows), in the same order.
  With the preemptor's request added, the queue with the highest share among those borrowing
  that still have candidates (the preemptor's own queue counts, borrowing or not) gives its next
  candidate: taken at once from the preemptor's own queue, or from any queue while the preemptor
  stays within its nominal quota on the flavor (FairSharingPreemptWithinNominal, beta and on);
  otherwise taken when the first strategy holds (LessThanOrEqualToFinalShare: the preemptor's
  share after admission at most the target queue's share after the removal;
  LessThanInitialShare: below the target queue's share before it) and set aside for the second
  strategy when not. The second strategy (LessThanInitialShare) takes at most one of the set
  aside candidates per queue, highest share first. The targets found are then minimised by
  adding back those the preemptor can do without (as in classic preemption).
- a preemptor may borrow in fair sharing: a job up to everything its queue may hold can preempt
  when reclaimWithinCohort is not Never (pkg/scheduler/flavorassigner, canPreemptWhileBorrowing).

Pure functions of the state they are given: a search takes usage out and puts it back.
"""

from __future__ import annotations

from typing import Callable, Sequence

from infra.tools.simulate import preemption
from infra.tools.simulate.model import LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, QueueModel
from infra.tools.simulate.state import Job, PoolState

# A share as CompareDRS orders them: (borrows with weight 0, the share; the unweighted ratio where
# the weight is 0). Tuples compare as Kueue compares shares.
Share = tuple[bool, float]
NO_SHARE: Share = (False, 0.0)
# NegativeDRS: below every share, the start of a search for the highest.
BELOW_ANY: Share = (False, -1.0)


class Shares:
    """Every queue's dominant resource share over all pools, read from their live usage."""

    def __init__(self, pools: Sequence[PoolState], queues: Sequence[QueueModel]) -> None:
        self.pools = list(pools)
        self.weights = [q.fair_weight for q in queues]
        self.cohort = list(pools[0].cohort) if pools else [-1] * len(queues)
        cohorts = len(pools[0].cohort_quota) if pools else 0
        # What each cohort lends over all pools (the root's SubtreeQuota, summed over flavors):
        # fixed by the quotas.
        self.lendable = [sum(p.cohort_quota[k] for p in pools) for k in range(cohorts)]
        self.defined = [[p for p in pools if p.defined[q]] for q in range(len(queues))]

    def of(self, q: int, pool: PoolState | None = None, extra: int = 0) -> tuple[Share, bool]:
        """(the queue's share, whether it borrows anywhere), with `extra` slots added on `pool`."""
        k = self.cohort[q]
        if k < 0:
            return NO_SHARE, False
        borrowed = 0
        for p in self.defined[q]:
            over = p.usage[q] - p.nominal[q] + (extra if p is pool else 0)
            if over > 0:
                borrowed += over
        if borrowed == 0:
            return NO_SHARE, False
        lendable = self.lendable[k]
        ratio = borrowed * 1000.0 / lendable if lendable > 0 else 0.0
        if ratio == 0:
            return NO_SHARE, True
        weight = self.weights[q]
        return ((True, ratio) if weight == 0 else (False, ratio / weight)), True

    def head_key(self, pool: PoolState, job: Job) -> tuple[bool, Share, int, float, int]:
        """The fair-sharing iterator's order of a queue's head (lowest first)."""
        q = job.queue
        share, _ = self.of(q, pool, job.slots)
        borrowing_on = self.cohort[q] >= 0 and pool.usage[q] + job.slots > pool.nominal[q]
        return (borrowing_on, share, -job.priority, job.order_ts, job.index)


def _order(q: int) -> Callable[[Job], tuple[bool, bool, int, int]]:
    """Kueue's candidate order (pkg/scheduler/preemption/common/ordering.go, CandidatesOrdering):
    those already marked for preemption first, then other queues, then lower priority, then
    admitted most recently."""
    return lambda c: (c.evicting is None, c.queue == q, c.priority, -c.admission)


def _next_target(shares: Shares, q: int, members: list[int], left: dict[int, list[Job]], pruned: set[int]) -> int | None:
    """The queue whose next candidate comes next (fairsharing/ordering.go, nextTarget), or None."""
    if shares.cohort[q] < 0:
        return q if q not in pruned and left.get(q) else None
    best, best_share = None, BELOW_ANY
    order = _order(q)
    for cq in sorted([q, *members]):
        if cq in pruned:
            continue
        share, borrowing = shares.of(cq)
        if (not borrowing and cq != q) or not left.get(cq):
            pruned.add(cq)
        elif best is not None and share == best_share:
            if order(left[cq][0]) < order(left[best][0]):
                best = cq
        elif share > best_share:
            best, best_share = cq, share
    return best


def _group(candidates: list[Job]) -> dict[int, list[Job]]:
    out: dict[int, list[Job]] = {}
    for c in candidates:
        out.setdefault(c.queue, []).append(c)
    return out


def targets(
    shares: Shares, pool: PoolState, job: Job, queue: QueueModel, members: list[int], strategies: tuple[str, ...]
) -> list[Job]:
    """Fair-sharing preemption (see the module doc): the jobs to evict so that `job` fits, or []."""
    q, need = job.queue, job.slots
    candidates: list[Job] = []
    within = queue.within_cluster_queue
    if within != "Never":
        candidates += [c for c in pool.admitted[q].values() if preemption.allows(within, job, c)]
    reclaim = queue.reclaim_within_cohort
    if pool.cohort[q] >= 0 and reclaim != "Never":
        for other in members:
            if pool.usage[other] > pool.nominal[other]:
                candidates += [c for c in pool.admitted[other].values() if preemption.allows(reclaim, job, c)]
    if not candidates:
        return []
    candidates.sort(key=_order(q))
    chosen: list[Job] = []

    def take(candidate: Job) -> bool:
        pool.remove_usage(candidate.queue, candidate.slots)
        chosen.append(candidate)
        # Fits with the preemptor's own request taken out again (workloadFitsForFairSharing).
        pool.remove_usage(q, need)
        fits = need <= pool.available(q)
        pool.add_usage(q, need)
        return fits

    # The shares include the incoming request.
    pool.add_usage(q, need)
    within_nominal = pool.usage[q] <= pool.nominal[q]
    left, pruned, retry = _group(candidates), set[int](), list[Job]()
    fits = False
    while not fits and (target := _next_target(shares, q, members, left, pruned)) is not None:
        line = left[target]
        if target == q or within_nominal:
            fits = take(line.pop(0))
            continue
        preemptor_new, _ = shares.of(q)
        target_old, _ = shares.of(target)
        if preemptor_new[0] and not target_old[0]:
            # fsStrategyUnsatisfiable: a borrowing zero-weight preemptor passes neither strategy.
            retry += line
            line.clear()
            continue
        while line:
            candidate = line.pop(0)
            if strategies[0] == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
                pool.remove_usage(target, candidate.slots)
                target_new, _ = shares.of(target)
                pool.add_usage(target, candidate.slots)
                passed = preemptor_new <= target_new
            else:
                passed = preemptor_new < target_old
            if passed:
                fits = take(candidate)
                break
            retry.append(candidate)
    if not fits and len(strategies) > 1:
        # Rule S2-b (LessThanInitialShare) on the candidates the first strategy refused.
        left, pruned = _group(retry), set[int]()
        while not fits and (target := _next_target(shares, q, members, left, pruned)) is not None:
            preemptor_new, _ = shares.of(q)
            target_old, _ = shares.of(target)
            candidate = left[target].pop(0)
            if preemptor_new < target_old:
                fits = take(candidate)
            pruned.add(target)
    pool.remove_usage(q, need)
    if fits:
        chosen = preemption.fill_back(pool, job, True, chosen)
    for target_job in chosen:
        pool.add_usage(target_job.queue, target_job.slots)
    return chosen if fits else []

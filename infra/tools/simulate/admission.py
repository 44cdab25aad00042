"""Kueue's scheduling cycle on one flavor: heads taken in queue or fair-sharing order, admitted,
preempted for, or set aside (the engine's module doc says what each step follows upstream).

A part of the Simulation (infra.tools.simulate.engine): it reads the queues' settings and the
pools' quota, and asks the engine to admit and evict jobs and to schedule events on its clock.
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from typing import Any, Iterator

from infra.tools.simulate import fair_sharing, preemption
from infra.tools.simulate.model import PREEMPTION_S, StackModel
from infra.tools.simulate.state import EVICTED, PENDING, RETRY, Job, PoolState


class Admission(ABC):
    """Kueue's admission cycle, over the state the Simulation holds."""

    model: StackModel
    strict: list[bool]
    # The configuration's fair-sharing strategies, or None for classic preemption.
    fair: tuple[str, ...] | None
    shares: fair_sharing.Shares | None
    borrow_preempt: list[bool]
    reserving: list[bool]
    wide_reach: list[bool]
    cohort_members: list[list[int]]
    preemptors: dict[tuple[int, int], Job]

    @abstractmethod
    def _push(self, time: float, kind: int, obj: Any, token: int = 0) -> None:
        """Schedule an event on the simulation's clock."""

    @abstractmethod
    def _admit(self, pool: PoolState, job: Job, now: float) -> None:
        """Kueue admits the job: its quota is reserved and it waits for nodes."""

    @abstractmethod
    def _evict(self, pool: PoolState, job: Job, now: float) -> None:
        """Preempted by Kueue: back to the queue."""

    def _admission(self, pool: PoolState, now: float) -> None:
        """Scheduling cycles on one flavor until no head can be admitted (see the engine's module doc).

        Jobs wait in classes of one queue and one size, each a heap in queue order, so a pass
        looks only at the classes that can change: after quota is released, those its queue could
        admit (up to its available quota) or preempt for (up to its nominal quota, when it has
        candidates); after arrivals, only theirs. A class whose head can be neither admitted nor
        preempted for is set aside for the rest of the pass, as Kueue's BestEffortFIFO sets an
        inadmissible head aside until quota is released; under StrictFIFO the queue stops there.
        Under fair sharing the heads of a cycle are taken in the fair-sharing iterator's order.
        """
        everything = pool.quota_freed
        arrivals = pool.arrivals
        pool.quota_freed = False
        pool.arrivals = []
        if pool.pending_count == 0:
            return
        strict, borrow_preempt, reserving = self.strict, self.borrow_preempt, self.reserving
        pending, nominal, usage = pool.pending, pool.nominal, pool.usage
        # After a release, the first cycle's pruning (below) happens here, on the copy.
        pruned = everything
        if everything:
            active = [
                list(sizes) if strict[q] or not sizes else sizes[: bisect.bisect_right(sizes, self._reach(pool, q))]
                for q, sizes in enumerate(pool.sizes)
            ]
        else:
            # An arrival behind the head of its class can do no better than the head, which
            # an earlier pass has already set aside.
            heads_of_class = [
                job for job in arrivals if job.state == PENDING and pending[job.queue][job.slots][0][3] is job
            ]
            if not heads_of_class and not any(strict):
                return
            active = [list(sizes) if strict[q] else [] for q, sizes in enumerate(pool.sizes)]
            for job in heads_of_class:
                if job.slots not in active[job.queue]:
                    bisect.insort(active[job.queue], job.slots)
        # A head waiting for its preemptions leads its queue in this pass, once.
        for (p, q), waiting in list(self.preemptors.items()):
            if waiting.state != PENDING:
                del self.preemptors[p, q]
            elif p == pool.index and active[q] and waiting.slots not in active[q]:
                bisect.insort(active[q], waiting.slots)
        while True:
            heads = []
            for q, sizes in enumerate(active):
                if not sizes:
                    continue
                if not (pruned or strict[q]):
                    # Larger jobs can neither fit nor preempt now: set their classes aside at once.
                    cut = bisect.bisect_right(sizes, self._reach(pool, q))
                    if cut < len(sizes):
                        del sizes[cut:]
                best = None
                for size in sizes:
                    top = pending[q][size][0]
                    if best is None or top < best:
                        best = top
                if best is not None:
                    heads.append(best)
            pruned = False
            if not heads:
                return
            if self.fair is not None:
                order = self._fair_order(pool, heads)
            else:
                order = heads
                if len(heads) > 1:
                    # Fits within nominal quota first, then priority, then queue timestamp.
                    heads.sort(key=lambda h: (usage[h[3].queue] + h[3].slots > nominal[h[3].queue], h))
            # Quota reserved by heads that could not preempt or that preempted (fair sharing),
            # held to the end of the cycle.
            held: list[tuple[int, int]] = []
            # Jobs marked for preemption in this cycle (fair sharing).
            marked: set[int] = set()
            for head in order:
                job = head[3]
                q, size = job.queue, job.slots
                if size <= pool.available(q):
                    self._admit(pool, job, now)
                elif (
                    (size <= nominal[q] or borrow_preempt[q])
                    and preemption.has_candidates(pool, job, self.model.queues[q], self.cohort_members[q])
                    and (targets := self._targets(pool, job))
                ):
                    if self.fair is not None:
                        self._issue_preemptions(pool, job, targets, marked, held, now)
                        # The queue's head until admitted: nothing behind it in this pass.
                        active[q] = []
                        continue
                    if self._waits(pool, targets, now):
                        if strict[q]:
                            active[q] = []
                        else:
                            active[q].remove(size)
                        continue
                    for target in targets:
                        self._evict(pool, target, now)
                    self._admit(pool, job, now)
                    job.won_at = now
                else:
                    if reserving[q] and (size <= nominal[q] or borrow_preempt[q]):
                        self._reserve(pool, job, held)
                    if strict[q]:
                        active[q] = []
                    else:
                        active[q].remove(size)
                    continue
                if size not in pending[q]:
                    active[q].remove(size)
            if held:
                for q, amount in reversed(held):
                    pool.remove_usage(q, amount)

    def _fair_order(self, pool: PoolState, heads: list[tuple[int, float, int, Job]]) -> Iterator[tuple[int, float, int, Job]]:
        """The heads in the fair-sharing iterator's order, each chosen on the shares as the
        cycle has left them (see infra.tools.simulate.fair_sharing)."""
        shares = self.shares
        assert shares is not None, "fair order only under fair sharing"
        left = list(heads)
        while left:
            best = min(left, key=lambda h: shares.head_key(pool, h[3]))
            left.remove(best)
            yield best

    def _targets(self, pool: PoolState, job: Job) -> list[Job]:
        q = job.queue
        if self.fair is None:
            return preemption.targets(pool, job, self.model.queues[q])
        assert self.shares is not None
        return fair_sharing.targets(self.shares, pool, job, self.model.queues[q], self.cohort_members[q], self.fair)

    def _issue_preemptions(
        self, pool: PoolState, job: Job, targets: list[Job], marked: set[int], held: list[tuple[int, int]], now: float
    ) -> None:
        """Kueue's two steps of a preemption, under fair sharing (kubernetes-sigs/kueue@v0.19.2
        pkg/scheduler/scheduler.go, schedule: a head in Preempt mode gets
        issuePreemptions and no admission): the targets are marked for eviction and keep their
        quota until the eviction completes, PREEMPTION_S later; the preemptor stays pending and
        its request is held for the rest of the cycle (cq.AddUsage). A later cycle, in the usual
        fair order, hands out the freed quota, to the preemptor or to anyone ahead of it (the
        evicted jobs themselves, within nominal quota, may win it back:
        pkg/scheduler/fair_sharing_iterator.go; only the alpha gate PrioritizePreemptorWorkloads,
        off, would favour the preemptor). A head whose targets overlap those marked earlier in
        the cycle is skipped, as Kueue skips overlapping preemptions. Targets already being
        evicted (an earlier cycle's) come first in the search (common/ordering.go) and cost
        nothing new."""
        if any(t.index in marked for t in targets):
            return
        for target in targets:
            if target.evicting is None:
                target.evicting = now
                marked.add(target.index)
                self._push(now + PREEMPTION_S, EVICTED, target)
        pool.add_usage(job.queue, job.slots)
        held.append((job.queue, job.slots))
        self.preemptors[pool.index, job.queue] = job

    @staticmethod
    def _reserve(pool: PoolState, job: Job, held: list[tuple[int, int]]) -> None:
        """Kueue's reservation for a head that needs a preemption and has no target, in a queue
        that cannot always reclaim (reclaimWithinCohort not Any: kueue@v0.19.2
        pkg/scheduler/scheduler.go reserveCapacityForUnreclaimablePreempt and
        quotaResourcesToReserve, pkg/scheduler/preemption/policy.go CanAlwaysReclaim): for the
        rest of the scheduling cycle the queue holds what the head would use (up to its borrowing
        limit when the head would borrow, its unused nominal quota otherwise), so that heads
        considered after it in the cycle, of other queues of the cohort, cannot take that quota.
        The head itself stays pending, set aside as any head that cannot be admitted."""
        q, size = job.queue, job.slots
        usage, nominal = pool.usage[q], pool.nominal[q]
        if pool.cohort[q] >= 0 and usage + size > nominal:
            limit = pool.borrow_limit[q]
            amount = size if limit is None else min(size, nominal + limit - usage)
        else:
            amount = max(0, min(size, nominal - usage))
        if amount > 0:
            pool.add_usage(q, amount)
            held.append((q, amount))

    def _waits(self, pool: PoolState, targets: list[Job], now: float) -> bool:
        """Whether a preemption must wait (a target won its own preemption at `now`: see the engine's
        module doc); then another admission pass follows after PREEMPTION_S."""
        if not any(target.won_at == now for target in targets):
            return False
        if not pool.retry_pending:
            pool.retry_pending = True
            self._push(now + PREEMPTION_S, RETRY, pool)
        return True


    def _reach(self, pool: PoolState, q: int) -> int:
        if not self.wide_reach[q]:
            return preemption.reach(pool, q, self.model.queues[q], self.cohort_members[q])
        # Under fair sharing a preemptor may borrow; a queue that reserves must see its heads
        # that need a preemption even without candidates (see _reserve).
        limit = pool.potential(q) if self.borrow_preempt[q] else pool.nominal[q]
        most = pool.available(q)
        if most < limit and (
            self.reserving[q] or preemption.may_preempt(pool, q, self.model.queues[q], self.cohort_members[q])
        ):
            return limit
        return most

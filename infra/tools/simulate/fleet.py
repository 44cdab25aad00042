"""`gpu-platform simulate` on a fleet manager stack: one trace replayed against every worker with
MultiKueue's dispatch, and against each worker alone.

How a job moves (kubernetes-sigs/kueue@v0.19.2):

- The manager's Kueue reserves quota first: the team's ClusterQueue on the manager, one flavor per
  GPU model, its nominal quota and the cohort's (what the manager stack declares: the workers' sum
  or `fleet.quotas`). The Incremental dispatcher nominates nothing before that
  (pkg/controller/workloaddispatcher/incrementaldispatcher.go, Reconcile: `!HasQuotaReservation`
  skips the workload). Modelled here as Kueue's classic cycles over BestEffortFIFO queues
  (priority, then queue timestamp), heads within nominal quota before borrowing ones, borrowing
  what the cohort has free, preempting as its ClusterQueues say (FleetSimulation._admission,
  fleet_queue.classic_targets). A reservation it preempts keeps its quota until its job is inactive,
  model.PREEMPTION_S later, as the single-cluster engine models an eviction (_preempt).
- Then the dispatcher nominates, per round, the next `stepSize` clusters of the MultiKueueConfig
  not yet nominated, in the config's order (getNextNominatedWorkers; the gate
  MultiKueueIncrementalDispatcherRespectConfigOrder keeps the order, stepSize from
  `multiKueue.incrementalDispatcherConfig`, DefaultStepSize 3), and the next round once
  `incrementalDispatcherRoundTimeout` (5 minutes) has passed without admission. Nominated clusters
  stay nominated. The all-at-once dispatcher nominates every cluster in one round.
- A nominated worker receives a copy of the workload (workload.go, nominateAndSynchronizeWorkers):
  it queues there, with its creation time as its queue timestamp, and is simulated by the
  single-cluster engine (infra.tools.simulate.engine) exactly as on that stack alone.
- The first worker whose copy is admitted wins (workload.go step 6, bestMatchByCondition on
  WorkloadAdmitted, earliest first; syncAdmittingRemoteState sets status.clusterName) and the copies
  on the others are deleted, running or not (RemoveRemoteObjects). Admissions at one instant are
  taken in dispatch order: a modelling choice. Upstream the earliest LastTransitionTime wins, at
  the condition's one-second resolution, and ties go by Go's map order, which is random.
- The manager's quota is held until the job finishes on its worker. A winner's copy evicted on
  its worker (preempted, or waitForPodsReady's timeout) makes the manager evict its own workload
  (workload.go step 4: the remote Evicted condition sets the check to Retry; the manager evicts
  with reason AdmissionCheck): the manager's quota is released, the copy deleted (even if its
  worker admitted it again meanwhile), and the job queues on the manager again from the
  eviction's time (pkg/workload/workload.go GetQueueOrderTimestamp), to be dispatched from the
  first worker (docs/fleet.md, "Quota is not capacity").

Not modelled: unreachable workers
(workerLostTimeout); API latency between clusters (a copy queues on its worker the instant it is
nominated).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from typing import Any, Mapping, Sequence

from infra.tools.simulate import engine
from infra.tools.simulate.fleet_queue import Entry, classic_targets
from infra.tools.simulate.fleet_read import ROUND_S, Dispatch, FleetJob, ManagerQuota
from infra.tools.simulate.model import PREEMPTION_S, StackModel
from infra.tools.simulate.state import (
    ADMITTED,
    BACKOFF,
    EVICTED,
    PENDING,
    REJECTED,
    RUN_CAP,
    RUNNING,
    STALL_CYCLES,
    Job,
    Result,
)
from infra.tools.simulate.trace import TraceJob

# The reason on a worker's copy that MultiKueue deleted (not one its Kueue could never admit).
REMOVED = "removed:"


# --- the co-simulation --------------------------------------------------------------------------


class _Worker(engine.Simulation):
    """A worker's engine, driven by the fleet's clock: copies arrive when nominated, and the fleet
    hears of every admission and finish."""

    def __init__(self, name: str, stack_model: StackModel, copies: Sequence[TraceJob], seed: int, horizon: float | None, fleet: FleetSimulation) -> None:
        super().__init__(stack_model, copies, seed, horizon)
        self.name = name
        self.fleet = fleet
        self.by_id = {job.spec.id: job for job in self.jobs}
        self.submitted: set[str] = set()

    def start(self) -> None:
        for pool in self.pools:
            for _ in range(pool.model.min_nodes):
                self._ready(pool, self._add_node(pool, 0.0), 0.0)

    def next_time(self) -> float:
        return self.heap[0][0] if self.heap else math.inf

    def handle_due(self, now: float) -> None:
        while self.heap and self.heap[0][0] == now:
            _, kind, _, obj, token = heapq.heappop(self.heap)
            self._handle(kind, obj, token, now)

    def dispatch(self, job_id: str, now: float, again: bool) -> None:
        """MultiKueue creates the copy: it queues from now. A dispatch after an eviction is no
        progress of the run (the engine's stall detection)."""
        job = self.by_id[job_id]
        job.order_ts = now
        self.submitted.add(job_id)
        before = self.last_progress
        self._submit(job, now)
        if again:
            self.last_progress = before

    def withdraw(self, job_id: str, now: float, why: str) -> None:
        """MultiKueue deletes this copy, whatever its state: it removes every remote workload but
        the admitting one, running or not (workload.go step 6b, RemoveRemoteObjects), and every
        remote once the manager's workload holds no quota (step 2). An admitted or running copy
        stops here and releases its quota on this worker."""
        job = self.by_id.get(job_id)
        if job is None or job_id not in self.submitted:
            return
        pool = self.pools[job.pool]
        if job.state == BACKOFF:
            # Requeue backoff after a waitForPodsReady eviction: its REQUEUE event is dropped.
            job.token += 1
            pool.queued_slots -= job.slots
        elif job.state == PENDING:
            queued = pool.pending[job.queue][job.slots]
            queued[:] = [entry for entry in queued if entry[3] is not job]
            heapq.heapify(queued)
            if not queued:
                del pool.pending[job.queue][job.slots]
                pool.sizes[job.queue].remove(job.slots)
            pool.pending_count -= 1
            pool.queued_slots -= job.slots
        elif job.state in (ADMITTED, RUNNING):
            self._vacate(pool, job, now)
            job.token += 1
        else:
            return
        # A deactivation pending on it (deactivate) ends with the copy: its EVICTED event is dropped.
        job.evicting = None
        job.state, job.reason = REJECTED, f"{REMOVED} {why}"
        self.dirty.add(job.pool)

    def deactivate(self, job_id: str, now: float) -> None:
        """The manager preempted the job this worker admitted: MultiKueue marks the copy for
        deactivation (workload.go step 6b: SetDeactivationTarget, WorkloadEvictedOnManagerCluster)
        and this worker's Kueue evicts it as it evicts a preempted workload, model.PREEMPTION_S
        later (the engine's EVICTED event); the fleet hears of it then (FleetSimulation.evicted)."""
        job = self.by_id[job_id]
        if job.evicting is None:
            job.evicting = now
            self._push(now + PREEMPTION_S, EVICTED, job)

    def _admit(self, pool: Any, job: Job, now: float) -> None:
        super()._admit(pool, job, now)
        self.fleet.admitted(self, job.spec.id, now)

    def _finish(self, job: Job, now: float) -> None:
        super()._finish(job, now)
        self.fleet.finished(job.spec.id, now)

    def _evict(self, pool: Any, job: Job, now: float) -> None:
        super()._evict(pool, job, now)
        self.fleet.evicted(self, job.spec.id)

    def _pods_ready_timeout(self, job: Job, now: float) -> None:
        super()._pods_ready_timeout(job, now)
        self.fleet.evicted(self, job.spec.id)


class FleetSimulation:
    def __init__(
        self,
        workers: Mapping[str, StackModel],
        quota: ManagerQuota,
        dispatch: Dispatch,
        jobs: Sequence[FleetJob],
        seed: int,
        horizon_s: float | None,
    ) -> None:
        self.quota = quota
        self.dispatch = dispatch
        self.horizon = horizon_s
        first = workers[dispatch.order[0]]
        self.kueue = first.kueue
        self.entries = [
            Entry(j, i, first.tiers[j.spec.tier].priority, quota.teams[j.spec.team], j.spec.nodes * j.spec.gpus_per_node)
            for i, j in enumerate(jobs)
        ]
        self.by_id = {e.job.spec.id: e for e in self.entries}
        self.workers = [
            _Worker(w, workers[w], [dataclasses.replace(j.spec, pool=j.pools[w]) for j in jobs if w in j.pools], seed, horizon_s, self)
            for w in dispatch.order
        ]
        self.usage: dict[tuple[str, str], int] = {}
        # Per GPU model: the entries holding manager quota, by index.
        self.reserved: dict[str, dict[int, Entry]] = {}
        self.pending: list[Entry] = []
        # ClusterQueue -> the entry that issued preemptions there, its head until admitted or
        # unschedulable (pkg/cache/queue/cluster_queue.go preemptorWorkload: sticky under
        # BestEffortFIFO, Kueue#6929).
        self.sticky: dict[str, Entry] = {}
        self.rounds: list[tuple[float, int, int]] = []
        # Preempted reservations no worker admitted: when their quota is released (index, dispatch).
        self.releases: list[tuple[float, int, int]] = []
        # Winners' copies evicted on their worker, for the manager to take back after the
        # worker's pass (an eviction can happen within its admission pass).
        self.evictions: list[tuple[_Worker, Entry]] = []
        self.manager_dirty = False
        self.unsettled = len(self.entries)
        self.last_progress = 0.0

    # --- the manager's Kueue and dispatcher ---------------------------------------------------

    def _available(self, entry: Entry) -> int:
        model_name, queue = entry.job.gpu_model, entry.queue
        cohort = self.quota.cohorts[queue]
        members = [queue] if cohort is None else [q for q, c in self.quota.cohorts.items() if c == cohort]
        used = sum(self.usage.get((model_name, q), 0) for q in members)
        return self.quota.potential(model_name, queue) - used

    def _borrows(self, entry: Entry) -> bool:
        m, q = entry.job.gpu_model, entry.queue
        return self.usage.get((m, q), 0) + entry.slots > self.quota.nominal[m].get(q, 0)

    def _admission(self, now: float) -> None:
        """Kueue's scheduling cycles at this instant, classic mode (pkg/scheduler/scheduler.go):
        each cycle takes the head of every ClusterQueue (BestEffortFIFO: priority, then queue
        timestamp) and tries them in the classicalIterator's order: those that fit within their
        nominal quota before those that borrow, then priority, then queue timestamp. A head that
        does not fit and finds no preemption targets is set aside (inadmissible) until the
        manager's quota changes; one that issued preemptions stays its queue's head
        (RequeueReasonPendingPreemption), its request held in every cycle it heads (here, the
        rest of the pass), and waits for the targets' quota, its queue's head in later passes
        too (self.sticky) until it is admitted or finds no targets, so that workloads set aside
        meanwhile do not take the freed quota back from it. One whose targets overlap those of an earlier head in the cycle
        issues none, as Kueue skips overlapping preemptions, and waits too: it is its queue's
        head again next cycle, where those targets are being evicted and cost nothing new."""
        self.manager_dirty = False
        aside: set[int] = set()
        waiting: set[str] = set()
        # Waiting heads' requests: Kueue holds them in each cycle they head (cq.AddUsage), so for
        # the rest of this pass.
        held: list[tuple[str, str, int]] = []
        while True:
            heads: dict[str, Entry] = {}
            for entry in sorted(self.pending, key=lambda e: (self.sticky.get(e.queue) is not e, -e.priority, e.queued_at, e.index)):
                if entry.index not in aside and entry.queue not in waiting:
                    heads.setdefault(entry.queue, entry)
            if not heads:
                break
            order = sorted(heads.values(), key=lambda e: (self._borrows(e), -e.priority, e.queued_at, e.index))
            marked: set[int] = set()
            for entry in order:
                key = (entry.job.gpu_model, entry.queue)
                if entry.slots <= self._available(entry):
                    self._reserve(entry, now)
                    continue
                targets = self._targets(entry)
                if not targets:
                    aside.add(entry.index)
                    if self.sticky.get(entry.queue) is entry:
                        del self.sticky[entry.queue]
                    continue
                self.sticky[entry.queue] = entry
                if not any(t.index in marked for t in targets):
                    for target in targets:
                        if not target.preempting:
                            self._preempt(target, now)
                            marked.add(target.index)
                waiting.add(entry.queue)
                self.usage[key] = self.usage.get(key, 0) + entry.slots
                held.append((*key, entry.slots))
        for model_name, queue, slots in held:
            self.usage[(model_name, queue)] -= slots

    def _reserve(self, entry: Entry, now: float) -> None:
        key = (entry.job.gpu_model, entry.queue)
        self.usage[key] = self.usage.get(key, 0) + entry.slots
        self.reserved.setdefault(entry.job.gpu_model, {})[entry.index] = entry
        self.pending.remove(entry)
        if self.sticky.get(entry.queue) is entry:
            del self.sticky[entry.queue]
        entry.reserved, entry.reserved_at = True, now
        entry.dispatches += 1
        entry.nominated = 0
        self._round(entry, now)

    def _release(self, entry: Entry) -> None:
        self.usage[(entry.job.gpu_model, entry.queue)] -= entry.slots
        del self.reserved[entry.job.gpu_model][entry.index]
        entry.reserved = False

    def _targets(self, entry: Entry) -> list[Entry]:
        m = entry.job.gpu_model
        return classic_targets(entry, self.quota, self.usage, list(self.reserved.get(m, {}).values()), self._available(entry))

    def _preempt(self, entry: Entry, now: float) -> None:
        """The manager evicts its workload (reason Preempted). Its quota is released only once its
        job is inactive (jobframework/reconciler.go: an evicted workload's quota reservation is
        cleared once the job is no longer active), model.PREEMPTION_S later as on a single
        cluster: for a winner, when its worker's Kueue has evicted the copy marked for
        deactivation (_Worker.deactivate, then _take_back); otherwise its copies are deleted now
        and the quota released then (FleetSimulation.releases)."""
        entry.preempting = True
        if entry.winner is not None:
            next(w for w in self.workers if w.name == entry.winner).deactivate(entry.job.spec.id, now)
            return
        for worker in self.workers:
            worker.withdraw(entry.job.spec.id, now, "preempted by the manager")
        heapq.heappush(self.releases, (now + PREEMPTION_S, entry.index, entry.dispatches))

    def _released(self, entry: Entry) -> None:
        """A preempted reservation's job is inactive: the quota is free and it queues again with
        its creation timestamp."""
        if entry.preempting and entry.reserved:
            entry.preempting = False
            self._release(entry)
            entry.queued_at = entry.job.spec.submit_s
            self.pending.append(entry)
            self.manager_dirty = True

    def _round(self, entry: Entry, now: float) -> None:
        order = self.dispatch.order
        step = order[entry.nominated : entry.nominated + self.dispatch.step]
        entry.nominated += len(step)
        for worker in self.workers:
            if worker.name in step and worker.name in entry.job.pools:
                worker.dispatch(entry.job.spec.id, now, entry.dispatches > 1)
        if entry.nominated < len(order):
            heapq.heappush(self.rounds, (now + ROUND_S, entry.index, entry.dispatches))

    def admitted(self, worker: _Worker, job_id: str, now: float) -> None:
        entry = self.by_id[job_id]
        if entry.winner is not None:
            return
        entry.winner = worker.name
        for other in self.workers:
            if other is not worker:
                other.withdraw(job_id, now, "admitted on another worker")

    def evicted(self, worker: _Worker, job_id: str) -> None:
        """The winner's copy was evicted on its worker: taken back after the worker's pass."""
        entry = self.by_id[job_id]
        if entry.winner == worker.name:
            entry.winner = None
            self.evictions.append((worker, entry))

    def _take_back(self, now: float) -> None:
        """MultiKueue sees the remote Evicted condition and sets the check to Retry (workload.go
        step 4, `acs.State == CheckStateReady`); the manager evicts its workload with reason
        AdmissionCheck, which releases its quota, and its copies are deleted (step 2). It queues
        again from the eviction (IsEvictedByAdmissionCheck) and is dispatched from the first
        worker. A copy admitted again on its worker meanwhile is taken back all the same: the
        remote stays Evicted until its job stops, so the manager retries. A reservation the
        manager preempted (the copy marked for deactivation, evicted) queues with its creation
        timestamp: the manager's own eviction, reason Preempted, came first (step 4 `IsEvicted`)."""
        for _, entry in self.evictions:
            if entry.done or not entry.reserved:
                continue
            entry.winner = None
            for worker in self.workers:
                worker.withdraw(entry.job.spec.id, now, "evicted, dispatched again by the manager")
            self._release(entry)
            entry.queued_at = entry.job.spec.submit_s if entry.preempting else now
            entry.preempting = False
            self.pending.append(entry)
            self.manager_dirty = True
        self.evictions = []

    def finished(self, job_id: str, now: float) -> None:
        entry = self.by_id[job_id]
        entry.done = True
        self._release(entry)
        self.unsettled -= 1
        self.last_progress = now
        self.manager_dirty = True

    def _arrive(self, entry: Entry, now: float) -> None:
        self.last_progress = now
        most = self.quota.potential(entry.job.gpu_model, entry.queue)
        if entry.slots > most:
            entry.reason = (
                f"needs {entry.slots} {entry.job.gpu_model} GPUs; the manager's ClusterQueue {entry.queue} may hold at most {most}"
            )
            self.unsettled -= 1
            return
        if not entry.job.pools:
            entry.reason = "no worker has a pool for it: " + "; ".join(f"{w}: {why}" for w, why in sorted(entry.job.why.items()))
            self.unsettled -= 1
            return
        entry.queued_at = now
        self.pending.append(entry)
        self.manager_dirty = True

    # --- the clock ----------------------------------------------------------------------------

    def run(self) -> tuple[float, list[Result]]:
        for worker in self.workers:
            worker.start()
        arrivals = sorted(self.entries, key=lambda e: (e.job.spec.submit_s, e.index))
        stall = STALL_CYCLES * (self.kueue.pods_ready_timeout_s + self.kueue.backoff_max_s)
        cap = math.inf
        if arrivals:
            cap = arrivals[-1].job.spec.submit_s + RUN_CAP * max(e.job.spec.duration_s for e in arrivals) + stall
        next_arrival, total, capped = 0, len(arrivals), False
        while True:
            upcoming = arrivals[next_arrival].job.spec.submit_s if next_arrival < total else math.inf
            now = min(
                [
                    upcoming,
                    self.rounds[0][0] if self.rounds else math.inf,
                    self.releases[0][0] if self.releases else math.inf,
                    *(w.next_time() for w in self.workers),
                ]
            )
            progress = max([self.last_progress, *(w.last_progress for w in self.workers)])
            if now == math.inf:
                break
            if self.horizon is not None:
                if now > self.horizon:
                    break
            elif self.unsettled == 0 or (next_arrival == total and not any(w.running for w in self.workers) and now > progress + stall):
                break
            elif now > cap:
                capped = True
                break
            for worker in self.workers:
                worker.handle_due(now)
            while self.rounds and self.rounds[0][0] == now:
                _, index, dispatch = heapq.heappop(self.rounds)
                entry = self.entries[index]
                if entry.winner is None and entry.reserved and not entry.preempting and entry.dispatches == dispatch:
                    self._round(entry, now)
            while self.releases and self.releases[0][0] == now:
                _, index, dispatch = heapq.heappop(self.releases)
                if self.entries[index].dispatches == dispatch:
                    self._released(self.entries[index])
            while next_arrival < total and arrivals[next_arrival].job.spec.submit_s == now:
                self._arrive(arrivals[next_arrival], now)
                next_arrival += 1
            while self.manager_dirty or self.evictions or any(w.dirty for w in self.workers):
                self._take_back(now)
                if self.manager_dirty:
                    self._admission(now)
                for worker in self.workers:
                    if worker.dirty:
                        worker._settle(now)
                    self._take_back(now)
        progress = max([self.last_progress, *(w.last_progress for w in self.workers)])
        end = self.horizon if self.horizon is not None else cap if capped else progress
        return end, [worker._result(end) for worker in self.workers]

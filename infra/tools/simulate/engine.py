"""The discrete-event simulation: Kueue admits, nodes come and go, jobs run, and are preempted or
interrupted, on one clock, against a StackModel.

What each part does, and the upstream behaviour it follows:

- Kueue (0.19, classic preemption; site/content/en/docs/concepts/cluster_queue.md and
  preemption.md, pkg/scheduler and pkg/cache/scheduler/resource_node.go). A job is a workload
  asking for nodes x GPU slots of one flavor (its pool), admitted whole or not at all. Each
  scheduling cycle takes the head of every ClusterQueue (highest priority, then oldest queue
  timestamp), admits first those that fit without borrowing, then by priority and timestamp. A
  workload fits when its slots are at most what its queue has available: unused nominal quota
  plus what the cohort can lend (the cohort's own quota and its queues' unused lendable quota),
  within the queue's borrowingLimit. BestEffortFIFO sets aside a head that cannot be admitted
  and looks at the next; StrictFIFO stops at it. Set-aside workloads are tried again when quota
  on their flavor is released. A workload that does not fit and asks no more than its queue's
  nominal quota may preempt: workloads of lower priority in its own queue (withinClusterQueue)
  and, in queues of the cohort that are borrowing, those the reclaimWithinCohort policy allows,
  other queues first, lowest priority first, most recently admitted first; the targets found
  are then minimised by adding back, in reverse order, those it can do without.
- waitForPodsReady (on in Kueue 0.19 by default): a workload admitted but not running within the
  timeout, or whose pods were lost and not back within the recovery timeout, is evicted and
  requeued after a backoff, behind the workloads queued meanwhile.
- Nodes: the cluster autoscaler adds nodes for the pods of admitted jobs that no node can take,
  up to the pool's maximum, ready after the pool's scale-up delay; pods below its expendable
  priority cutoff never cause a scale-up and never keep a node. A node without other pods is
  removed after the unneeded time, not within the delay after the cluster's last scale-up, never
  below the pool's minimum (cluster-autoscaler FAQ). A whole-GPU pool runs one job per node;
  shared and MIG pools place pods by GPU slots, each pod of a job on its own node, on the least
  or most allocated node as the cluster's scheduler profile prefers.
- Spot nodes are lost as a Poisson process; a job on a lost node stops, loses the work since its
  last checkpoint, and waits for nodes again with its admission kept (the JobSet restarts its
  pods; Kueue sees no eviction), up to the recovery timeout. A preempted job loses the same and
  goes back to its queue with its original timestamp.

Everything is deterministic for a seed: events at one instant are handled in a fixed order and
each pool draws its interruptions from its own generator seeded by (seed, pool).
"""

from __future__ import annotations

import bisect
import collections
import heapq
import math
import random
from dataclasses import dataclass, field
from typing import Any, Sequence

from infra.tools.simulate.model import StackModel, backoff_s, spot_rate_per_s
from infra.tools.simulate.trace import TraceJob

# Event kinds, in the order handled at one instant: a job that ends at the same time as its
# node is lost has finished. PODS_READY_TIMEOUT and UNPARK each stand for a whole line of
# deadlines (waitForPodsReady timeouts; scale-downs held by the delay after a scale-up), so a
# busy cluster does not carry one event per waiting job or idle node.
FINISH, NODE_READY, PODS_READY_TIMEOUT, REQUEUE, SCALE_DOWN, UNPARK, INTERRUPT = range(7)

# Job states.
PENDING, BACKOFF, ADMITTED, RUNNING, FINISHED, REJECTED = range(6)

# Without --horizon-s the run ends once every job has finished, or, when some never can (say
# opportunistic jobs on a pool that nothing else scales up), once nothing has been submitted,
# started or finished for two full waitForPodsReady requeue cycles; and at the latest RUN_CAP
# times the longest job's duration after the last submission, so that jobs that keep losing
# their work (frequent spot losses, no checkpoints) end unfinished instead of running forever.
STALL_CYCLES = 2
RUN_CAP = 10

# Status and end_reason names (jobs.csv, segments.csv).
STATUS_FINISHED, STATUS_REJECTED, STATUS_UNFINISHED = "finished", "rejected", "unfinished"
END_FINISHED, END_PREEMPTED, END_INTERRUPTED, END_HORIZON = "finished", "preempted", "interrupted", "horizon"


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch a job ran: `gpus` is the GPU slots its pods held."""

    job: str
    pool: str
    start: float
    end: float
    gpus: int
    end_reason: str


@dataclass(frozen=True, slots=True)
class Reservation:
    """A stretch a job held Kueue quota (admitted, running or waiting for nodes)."""

    job: str
    queue: str
    pool: str
    start: float
    end: float
    slots: int


@dataclass(slots=True)
class JobOutcome:
    id: str
    team: str
    tier: str
    pool: str
    submit: float
    first_start: float | None
    end: float | None
    preemptions: int
    interruptions: int
    lost_gpu_s: float
    status: str
    # Why a rejected job can never run.
    reason: str
    slots: int


@dataclass(slots=True)
class PoolOutcome:
    name: str
    node_seconds: float
    slots_per_node: int
    gpus_per_node: int
    usd_per_node_hour: float | None
    # (time, nodes up or booting, GPU slots of jobs waiting), at each change.
    series: list[tuple[float, int, int]] = field(default_factory=list)


@dataclass
class Result:
    stack: str
    seed: int
    horizon: float
    jobs: list[JobOutcome]
    segments: list[Segment]
    reservations: list[Reservation]
    pools: list[PoolOutcome]


class _Job:
    __slots__ = (
        "spec", "index", "pool", "queue", "slots", "per_node", "nodes", "priority", "pod_priority", "expendable",
        "state", "order_ts", "token", "admitted_at", "admission", "progress", "seg_start", "held", "first_start", "end",
        "preemptions", "interruptions", "lost", "requeues", "reason",
    )

    def __init__(self, spec: TraceJob, index: int, pool: int, queue: int, priority: int, pod_priority: int, expendable: bool) -> None:
        self.spec = spec
        self.index = index
        self.pool = pool
        self.queue = queue
        self.nodes = spec.nodes
        self.per_node = spec.gpus_per_node
        self.slots = spec.nodes * spec.gpus_per_node
        self.priority = priority
        self.pod_priority = pod_priority
        self.expendable = expendable
        self.state = PENDING
        self.order_ts = spec.submit_s
        self.token = 0
        self.admitted_at = 0.0
        # Order of the last admission: "admitted most recently" among equal times.
        self.admission = 0
        # Work saved in the last checkpoint: where the next run starts.
        self.progress = 0.0
        self.seg_start = 0.0
        self.held: list[_Node] = []
        self.first_start: float | None = None
        self.end: float | None = None
        self.preemptions = 0
        self.interruptions = 0
        self.lost = 0.0
        self.requeues = 0
        self.reason = ""

    def key(self) -> tuple[int, float, int, _Job]:
        """Kueue's queue order: priority, then the queue timestamp."""
        return (-self.priority, self.order_ts, self.index, self)


def _place_order(job: _Job) -> tuple[int, int]:
    """The scheduler's order of pending pods: priority, then (here) admission order."""
    return (-job.pod_priority, job.admission)


class _Node:
    __slots__ = ("id", "created", "ready", "alive", "free", "jobs", "busy", "token", "timer")

    def __init__(self, node_id: int, created: float, slots: int) -> None:
        self.id = node_id
        # Billed from here: the instance runs while it boots.
        self.created = created
        self.ready = False
        self.alive = True
        self.free = slots
        self.jobs: list[_Job] = []
        # Jobs on the node that keep it up (not expendable).
        self.busy = 0
        self.token = 0
        self.timer = False


class _Pool:
    """One pool (one Kueue flavor): its nodes, and every queue's quota, usage and jobs on it."""

    def __init__(self, index: int, model: StackModel, seed: int) -> None:
        self.model = model.pools[index]
        self.index = index
        queues = model.queues
        cohorts = sorted({q.cohort for q in queues if q.cohort})
        name = self.model.name
        self.defined = [name in q.nominal for q in queues]
        self.nominal = [q.nominal.get(name, 0) for q in queues]
        lending = [q.lending_limit.get(name) for q in queues]
        # Kueue's localQuota: the part of nominal quota a queue never lends.
        self.local = [max(0, n - lend) if lend is not None else 0 for n, lend in zip(self.nominal, lending)]
        self.borrow_limit = [q.borrowing_limit.get(name) for q in queues]
        self.cohort = [cohorts.index(q.cohort) if q.cohort else -1 for q in queues]
        self.cohort_quota = [model.cohorts[c].get(name, 0) for c in cohorts]
        for q, k in enumerate(self.cohort):
            if k >= 0 and self.defined[q]:
                self.cohort_quota[k] += self.nominal[q] - self.local[q]
        self.cohort_usage = [0] * len(cohorts)
        self.usage = [0] * len(queues)
        # Per queue: jobs waiting, in heaps by size (GPU slots), and the sizes that have any.
        self.pending: list[dict[int, list[tuple[int, float, int, _Job]]]] = [{} for _ in queues]
        self.sizes: list[list[int]] = [[] for _ in queues]
        self.pending_count = 0
        self.admitted: list[dict[int, _Job]] = [{} for _ in queues]
        # Per queue: how many admitted jobs hold each priority.
        self.priorities: list[dict[int, int]] = [{} for _ in queues]
        # Admitted jobs waiting for nodes, in the scheduler's order (pod priority, then admission),
        # and the nodes the non-expendable ones need: what the autoscaler scales up for.
        self.waiting: list[_Job] = []
        self.demand_nodes = 0
        self.arrivals: list[_Job] = []
        self.quota_freed = False
        self.nodes: list[_Node] = []
        self.free: list[_Node] = []
        self.provisioning = 0
        self.candidates: list[_Node] = []
        self.queued_slots = 0
        # (created, removed) of every node gone.
        self.lifetimes: list[tuple[float, float]] = []
        self.series: list[tuple[float, int, int]] = []
        self.rng = random.Random(f"{seed}:{name}")
        self.rate = spot_rate_per_s(self.model)

    # Kueue's quota arithmetic (resource_node.go: available, potentialAvailable, addUsage,
    # removeUsage), for one flavor and a one-level cohort.

    def available(self, q: int) -> int:
        # Conditional expressions rather than max(): this runs on every admission attempt.
        if not self.defined[q]:
            return 0
        usage, local, k = self.usage[q], self.local[q], self.cohort[q]
        if k < 0:
            free = self.nominal[q] - usage
            return free if free > 0 else 0
        parent = self.cohort_quota[k] - self.cohort_usage[k]
        limit = self.borrow_limit[q]
        if limit is not None:
            lent = usage - local if usage > local else 0
            parent = min(parent, self.nominal[q] - local - lent + limit)
        free = (local - usage if local > usage else 0) + parent
        return free if free > 0 else 0

    def potential(self, q: int) -> int:
        if not self.defined[q]:
            return 0
        if self.cohort[q] < 0:
            return self.nominal[q]
        most = self.local[q] + self.cohort_quota[self.cohort[q]]
        limit = self.borrow_limit[q]
        return most if limit is None else min(most, self.nominal[q] + limit)

    def add_usage(self, q: int, slots: int) -> None:
        spare = max(0, self.local[q] - self.usage[q])
        self.usage[q] += slots
        if self.cohort[q] >= 0 and slots > spare:
            self.cohort_usage[self.cohort[q]] += slots - spare

    def remove_usage(self, q: int, slots: int) -> None:
        stored = self.usage[q] - self.local[q]
        self.usage[q] -= slots
        if stored > 0 and self.cohort[q] >= 0:
            self.cohort_usage[self.cohort[q]] -= min(slots, stored)

    def alive_nodes(self) -> int:
        return len(self.nodes)


class Simulation:
    """One run of a trace against a model. `run()` once."""

    def __init__(self, model: StackModel, trace: Sequence[TraceJob], seed: int = 0, horizon_s: float | None = None) -> None:
        self.model = model
        self.seed = seed
        self.horizon = horizon_s
        self.pools = [_Pool(i, model, seed) for i in range(len(model.pools))]
        pool_index = {p.name: i for i, p in enumerate(model.pools)}
        queue_index = {q.name: i for i, q in enumerate(model.queues)}
        cutoff = model.autoscaler.expendable_below if model.autoscaler else None
        team_queue = {team: queue_index[queue] for team, queue in model.teams.items()}
        tiers = {
            name: (t.priority, t.pod_priority, cutoff is not None and t.pod_priority < cutoff) for name, t in model.tiers.items()
        }
        self.jobs = [
            _Job(spec, index, pool_index[spec.pool], team_queue[spec.team], *tiers[spec.tier])
            for index, spec in enumerate(trace)
        ]
        self.heap: list[tuple[float, int, int, Any, int]] = []
        self.seq = 0
        self.next_node = 0
        self.dirty: set[int] = set()
        self.segments: list[Segment] = []
        self.reservations: list[Reservation] = []
        self.running = 0
        self.unsettled = 0
        self.last_progress = 0.0
        self.last_scale_up = -math.inf
        queues = model.queues
        self.strict = [q.queueing_strategy == "StrictFIFO" for q in queues]
        # Per queue: the other queues of its cohort.
        self.cohort_members = [
            [i for i, other in enumerate(queues) if i != q and spec.cohort and other.cohort == spec.cohort]
            for q, spec in enumerate(queues)
        ]
        self.admissions = 0
        # waitForPodsReady deadlines by their length: (due, job, token), in due order.
        self.timeouts: dict[float, collections.deque[tuple[float, _Job, int]]] = {}
        # Scale-downs held by the delay after the last scale-up: (pool, node, token).
        self.parked: list[tuple[int, _Node, int]] = []
        self.unpark_pending = False

    # --- the clock --------------------------------------------------------------------------

    def _push(self, time: float, kind: int, obj: Any, token: int = 0) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time, kind, self.seq, obj, token))

    def run(self) -> Result:
        arrivals = sorted(self.jobs, key=lambda j: (j.spec.submit_s, j.index))
        for pool in self.pools:
            for _ in range(pool.model.min_nodes):
                self._ready(pool, self._add_node(pool, 0.0), 0.0)
        stall = STALL_CYCLES * (self.model.kueue.pods_ready_timeout_s + self.model.kueue.backoff_max_s)
        self.unsettled = len(self.jobs)
        next_arrival, total = 0, len(arrivals)
        heap, pop, handle, horizon = self.heap, heapq.heappop, self._handle, self.horizon
        cap = math.inf
        if arrivals:
            longest = max(job.spec.duration_s for job in arrivals)
            cap = arrivals[-1].spec.submit_s + RUN_CAP * longest + stall
        capped = False
        while True:
            upcoming = arrivals[next_arrival].spec.submit_s if next_arrival < total else math.inf
            now = min(upcoming, heap[0][0]) if heap else upcoming
            if now == math.inf:
                break
            if horizon is not None:
                if now > horizon:
                    break
            elif self.unsettled == 0 or (next_arrival == total and self.running == 0 and now > self.last_progress + stall):
                break
            elif now > cap:
                capped = True
                break
            while heap and heap[0][0] == now:
                _, kind, _, obj, token = pop(heap)
                handle(kind, obj, token, now)
            while next_arrival < total and arrivals[next_arrival].spec.submit_s == now:
                self._submit(arrivals[next_arrival], now)
                next_arrival += 1
            if self.dirty:
                self._settle(now)
        end = self.horizon if self.horizon is not None else cap if capped else self.last_progress
        return self._result(end)

    def _handle(self, kind: int, obj: Any, token: int, now: float) -> None:
        if kind == FINISH:
            if obj.token == token:
                self._finish(obj, now)
        elif kind == NODE_READY:
            if obj[1].alive:
                self._ready(self.pools[obj[0]], obj[1], now)
        elif kind == PODS_READY_TIMEOUT:
            self._timeouts_due(obj, now)
        elif kind == REQUEUE:
            if obj.token == token:
                self._enqueue(obj)
        elif kind == SCALE_DOWN:
            pool, node = obj
            if node.alive and node.token == token:
                self._scale_down(self.pools[pool], node, token, now)
        elif kind == UNPARK:
            self._unpark(now)
        elif kind == INTERRUPT:
            pool, node = obj
            if node.alive:
                self._remove_node(self.pools[pool], node, now)

    # --- jobs -------------------------------------------------------------------------------

    def _submit(self, job: _Job, now: float) -> None:
        self.last_progress = now
        pool = self.pools[job.pool]
        reason = self._never_fits(job, pool)
        if reason:
            job.state, job.reason = REJECTED, reason
            self.unsettled -= 1
            return
        self._enqueue(job)

    def _never_fits(self, job: _Job, pool: _Pool) -> str:
        m = pool.model
        queue = self.model.queues[job.queue].name
        if job.nodes > m.max_nodes:
            return f"needs {job.nodes} nodes; pool {m.name} has at most {m.max_nodes}"
        if job.per_node > m.max_pod_slots:
            shared = " (its GPUs are shared: a pod may ask for 1)" if m.max_pod_slots < m.slots_per_node else ""
            return f"asks {job.per_node} GPU slots per node; a pod on pool {m.name} may ask for {m.max_pod_slots}{shared}"
        if job.slots > pool.potential(job.queue):
            return (
                f"needs {job.slots} GPU slots; ClusterQueue {queue} may hold at most {pool.potential(job.queue)}"
                f" on pool {m.name} (nominal quota plus what its cohort can lend)"
            )
        return ""

    def _enqueue(self, job: _Job) -> None:
        """Into Kueue's queue (submitted, preempted, or back from a requeue backoff)."""
        pool = self.pools[job.pool]
        if job.state == BACKOFF:
            pool.queued_slots -= job.slots
        job.state = PENDING
        queued = pool.pending[job.queue].get(job.slots)
        if queued is None:
            queued = pool.pending[job.queue][job.slots] = []
            bisect.insort(pool.sizes[job.queue], job.slots)
        heapq.heappush(queued, job.key())
        pool.pending_count += 1
        pool.queued_slots += job.slots
        pool.arrivals.append(job)
        self.dirty.add(job.pool)

    def _admit(self, pool: _Pool, job: _Job, now: float) -> None:
        queued = pool.pending[job.queue][job.slots]
        heapq.heappop(queued)
        if not queued:
            del pool.pending[job.queue][job.slots]
            pool.sizes[job.queue].remove(job.slots)
        pool.pending_count -= 1
        pool.add_usage(job.queue, job.slots)
        pool.admitted[job.queue][job.index] = job
        priorities = pool.priorities[job.queue]
        priorities[job.priority] = priorities.get(job.priority, 0) + 1
        job.state, job.admitted_at = ADMITTED, now
        self.admissions += 1
        job.admission = self.admissions
        job.token += 1
        self._wait(pool, job)
        self._arm_timeout(job, now, self.model.kueue.pods_ready_timeout_s)

    def _release_quota(self, pool: _Pool, job: _Job, now: float) -> None:
        pool.remove_usage(job.queue, job.slots)
        del pool.admitted[job.queue][job.index]
        priorities = pool.priorities[job.queue]
        priorities[job.priority] -= 1
        if not priorities[job.priority]:
            del priorities[job.priority]
        pool.quota_freed = True
        self.reservations.append(
            Reservation(job.spec.id, self.model.queues[job.queue].name, pool.model.name, job.admitted_at, now, job.slots)
        )

    def _start(self, pool: _Pool, job: _Job, nodes: list[_Node], now: float) -> None:
        whole = pool.model.whole_nodes
        for node in nodes:
            node.free = 0 if whole else node.free - job.per_node
            node.jobs.append(job)
            if not job.expendable:
                node.busy += 1
                node.token += 1
                node.timer = False
        job.held = nodes
        if not job.expendable:
            pool.demand_nodes -= job.nodes
        job.state, job.seg_start = RUNNING, now
        job.token += 1
        if job.first_start is None:
            job.first_start = now
        pool.queued_slots -= job.slots
        self.running += 1
        self.last_progress = now
        self._push(now + job.spec.duration_s - job.progress, FINISH, job, job.token)

    def _stop(self, pool: _Pool, job: _Job, now: float, reason: str) -> None:
        """End the job's running stretch; work since its last checkpoint is lost unless it finished."""
        ran = now - job.seg_start
        if reason == END_FINISHED:
            job.progress = job.spec.duration_s
        else:
            every = job.spec.checkpoint_every_s
            saved = math.floor(ran / every) * every if every else 0.0
            job.progress += saved
            job.lost += (ran - saved) * job.slots
        self.segments.append(Segment(job.spec.id, pool.model.name, job.seg_start, now, job.slots, reason))
        whole = pool.model.whole_nodes
        for node in job.held:
            node.jobs.remove(job)
            node.free = pool.model.slots_per_node if whole else node.free + job.per_node
            if not job.expendable:
                node.busy -= 1
            if node.alive:
                if whole:
                    pool.free.append(node)
                if node.busy == 0:
                    pool.candidates.append(node)
        job.held = []
        self.running -= 1
        self.dirty.add(job.pool)

    def _finish(self, job: _Job, now: float) -> None:
        pool = self.pools[job.pool]
        self._stop(pool, job, now, END_FINISHED)
        self._release_quota(pool, job, now)
        job.state, job.end = FINISHED, now
        job.token += 1
        self.unsettled -= 1
        self.last_progress = now

    def _evict(self, pool: _Pool, job: _Job, now: float) -> None:
        """Preempted by Kueue: back to the queue with its creation timestamp."""
        if job.state == RUNNING:
            self._stop(pool, job, now, END_PREEMPTED)
        else:
            self._unwait(pool, job)
            pool.queued_slots -= job.slots
        self._release_quota(pool, job, now)
        job.preemptions += 1
        job.token += 1
        job.order_ts = job.spec.submit_s
        self._enqueue(job)

    def _interrupt(self, pool: _Pool, job: _Job, now: float) -> None:
        """The job lost a node: it waits for nodes again, admitted, up to the recovery timeout."""
        self._stop(pool, job, now, END_INTERRUPTED)
        job.interruptions += 1
        job.state = ADMITTED
        job.token += 1
        self._wait(pool, job)
        pool.queued_slots += job.slots
        self._arm_timeout(job, now, self.model.kueue.recovery_timeout_s)

    def _arm_timeout(self, job: _Job, now: float, after: float) -> None:
        """A waitForPodsReady deadline; deadlines of one length fall due in the order armed."""
        line = self.timeouts.setdefault(after, collections.deque())
        if not line:
            self._push(now + after, PODS_READY_TIMEOUT, after)
        line.append((now + after, job, job.token))

    def _timeouts_due(self, after: float, now: float) -> None:
        line = self.timeouts[after]
        while line and line[0][0] <= now:
            _, job, token = line.popleft()
            if job.token == token:
                self._pods_ready_timeout(job, now)
        # Jobs that started meanwhile need no event.
        while line and line[0][1].token != line[0][2]:
            line.popleft()
        if line:
            self._push(line[0][0], PODS_READY_TIMEOUT, after)

    def _pods_ready_timeout(self, job: _Job, now: float) -> None:
        pool = self.pools[job.pool]
        self._unwait(pool, job)
        self._release_quota(pool, job, now)
        job.requeues += 1
        job.state = BACKOFF
        job.token += 1
        if self.model.kueue.requeue_timestamp == "Eviction":
            job.order_ts = now
        self._push(now + backoff_s(self.model.kueue, job.requeues), REQUEUE, job, job.token)
        self.dirty.add(job.pool)

    # --- Kueue ------------------------------------------------------------------------------

    def _admission(self, pool: _Pool, now: float) -> None:
        """Scheduling cycles on one flavor until no head can be admitted (see the module doc).

        Jobs wait in classes of one queue and one size, each a heap in queue order, so a pass
        looks only at the classes that can change: after quota is released, those its queue could
        admit (up to its available quota) or preempt for (up to its nominal quota, when it has
        candidates); after arrivals, only theirs. A class whose head can be neither admitted nor
        preempted for is set aside for the rest of the pass, as Kueue's BestEffortFIFO sets an
        inadmissible head aside until quota is released; under StrictFIFO the queue stops there.
        """
        everything = pool.quota_freed
        arrivals = pool.arrivals
        pool.quota_freed = False
        pool.arrivals = []
        if pool.pending_count == 0:
            return
        strict = self.strict
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
            if len(heads) > 1:
                # Fits within nominal quota first, then priority, then queue timestamp.
                heads.sort(key=lambda h: (usage[h[3].queue] + h[3].slots > nominal[h[3].queue], h))
            for head in heads:
                job = head[3]
                q, size = job.queue, job.slots
                if size <= pool.available(q):
                    self._admit(pool, job, now)
                elif size <= nominal[q] and self._has_candidates(pool, job) and (
                    targets := self._preemption_targets(pool, job)
                ):
                    for target in targets:
                        self._evict(pool, target, now)
                    self._admit(pool, job, now)
                elif strict[q]:
                    active[q] = []
                    continue
                else:
                    active[q].remove(size)
                    continue
                if size not in pending[q]:
                    active[q].remove(size)

    def _reach(self, pool: _Pool, q: int) -> int:
        """The largest job of the queue that could be admitted now: one that fits, or one that
        may preempt (at most the nominal quota, when there are candidates)."""
        reach = pool.available(q)
        if reach < pool.nominal[q] and self._may_preempt(pool, q):
            return pool.nominal[q]
        return reach

    def _may_preempt(self, pool: _Pool, q: int) -> bool:
        """Whether the queue has any preemption candidate at all on this flavor."""
        spec = self.model.queues[q]
        if spec.within_cluster_queue != "Never" and pool.admitted[q]:
            return True
        if spec.reclaim_within_cohort == "Never":
            return False
        usage, nominal, admitted = pool.usage, pool.nominal, pool.admitted
        for other in self.cohort_members[q]:
            if usage[other] > nominal[other] and admitted[other]:
                return True
        return False

    def _has_candidates(self, pool: _Pool, job: _Job) -> bool:
        """Whether some admitted job is one the policies let `job` preempt, from the priorities
        alone: a quick test before the search for targets."""
        q = job.queue
        spec = self.model.queues[q]
        within = spec.within_cluster_queue
        if within != "Never" and pool.priorities[q]:
            lowest = min(pool.priorities[q])
            if lowest < job.priority or (within == "LowerOrNewerEqualPriority" and lowest == job.priority):
                return True
        reclaim = spec.reclaim_within_cohort
        if reclaim == "Never":
            return False
        for other in self.cohort_members[q]:
            if pool.usage[other] > pool.nominal[other] and pool.priorities[other]:
                if reclaim == "Any" or min(pool.priorities[other]) < job.priority:
                    return True
        return False

    def _allows(self, policy: str, job: _Job, candidate: _Job) -> bool:
        """Kueue's SatisfiesPreemptionPolicy (pkg/scheduler/preemption/common/preemption_policy.go)."""
        if policy == "LowerPriority":
            return candidate.priority < job.priority
        if policy == "LowerOrNewerEqualPriority":
            return candidate.priority < job.priority or (
                candidate.priority == job.priority and job.order_ts < candidate.order_ts
            )
        return policy == "Any"

    def _preemption_targets(self, pool: _Pool, job: _Job) -> list[_Job]:
        """Classic preemption (pkg/scheduler/preemption/preemption.go, classicalPreemptions, and
        classical/candidate_generator.go), with borrowWithinCohort Never."""
        q, need = job.queue, job.slots
        spec = self.model.queues[q]
        # Candidate order: other queues first, then lower priority, then admitted most recently.
        order = lambda c: (c.queue == q, c.priority, -c.admission)  # noqa: E731
        same = []
        if spec.within_cluster_queue != "Never":
            same = sorted((c for c in pool.admitted[q].values() if self._allows(spec.within_cluster_queue, job, c)), key=order)
        # The preemptor fits in its own nominal quota: a reclaim it may make while borrowing nothing.
        advantage = pool.usage[q] + need <= pool.nominal[q]
        others = []
        if pool.cohort[q] >= 0 and spec.reclaim_within_cohort != "Never":
            for other, admitted in enumerate(pool.admitted):
                if other != q and pool.cohort[other] == pool.cohort[q] and pool.usage[other] > pool.nominal[other]:
                    others += [c for c in admitted.values() if self._allows(spec.reclaim_within_cohort, job, c)]
            others.sort(key=order)
        candidates = others + same
        if not others or pool.usage[q] >= pool.nominal[q]:
            attempts = [True]
        elif not advantage:
            attempts = [False, True]
        else:
            attempts = [True, False]
        for borrowing in attempts:
            targets: list[_Job] = []
            for candidate in candidates:
                c = candidate.queue
                if c != q and ((borrowing and not advantage) or pool.usage[c] <= pool.nominal[c]):
                    continue
                pool.remove_usage(c, candidate.slots)
                targets.append(candidate)
                if self._fits(pool, job, borrowing):
                    targets = self._fill_back(pool, job, borrowing, targets)
                    for target in targets:
                        pool.add_usage(target.queue, target.slots)
                    return targets
            for target in targets:
                pool.add_usage(target.queue, target.slots)
        return []

    @staticmethod
    def _fits(pool: _Pool, job: _Job, borrowing: bool) -> bool:
        if not borrowing and pool.usage[job.queue] + job.slots > pool.nominal[job.queue]:
            return False
        return job.slots <= pool.available(job.queue)

    def _fill_back(self, pool: _Pool, job: _Job, borrowing: bool, targets: list[_Job]) -> list[_Job]:
        """Add back, in reverse order, every target the preemptor can do without."""
        for i in range(len(targets) - 2, -1, -1):
            target = targets[i]
            pool.add_usage(target.queue, target.slots)
            if self._fits(pool, job, borrowing):
                targets[i] = targets[-1]
                targets.pop()
            else:
                pool.remove_usage(target.queue, target.slots)
        return targets

    # --- nodes ------------------------------------------------------------------------------

    def _add_node(self, pool: _Pool, now: float) -> _Node:
        """A node that boots for the pool's scale-up delay; spot nodes draw their loss now."""
        node = _Node(self.next_node, now, pool.model.slots_per_node)
        self.next_node += 1
        pool.nodes.append(node)
        pool.provisioning += 1
        if pool.rate > 0:
            self._push(now + pool.rng.expovariate(pool.rate), INTERRUPT, (pool.index, node))
        return node

    def _boot(self, pool: _Pool, now: float) -> None:
        self._push(now + pool.model.scale_up_s, NODE_READY, (pool.index, self._add_node(pool, now)))

    def _ready(self, pool: _Pool, node: _Node, now: float) -> None:
        pool.provisioning -= 1
        node.ready = True
        if pool.model.whole_nodes:
            pool.free.append(node)
        pool.candidates.append(node)
        self.dirty.add(pool.index)

    def _remove_node(self, pool: _Pool, node: _Node, now: float) -> None:
        """Scaled down or lost: its jobs are interrupted; the group keeps its minimum size."""
        node.alive = False
        pool.nodes.remove(node)
        pool.lifetimes.append((node.created, now))
        if not node.ready:
            pool.provisioning -= 1
        if node in pool.free:
            pool.free.remove(node)
        for job in list(node.jobs):
            self._interrupt(pool, job, now)
        while pool.alive_nodes() < pool.model.min_nodes:
            self._boot(pool, now)
        self.dirty.add(pool.index)

    def _scale_down(self, pool: _Pool, node: _Node, token: int, now: float) -> None:
        if pool.alive_nodes() <= pool.model.min_nodes:
            node.timer = False
            return
        autoscaler = self.model.autoscaler
        assert autoscaler is not None, "only autoscaled pools arm scale-down timers"
        resume = self.last_scale_up + autoscaler.delay_after_add_s
        if now < resume:
            self.parked.append((pool.index, node, token))
            if not self.unpark_pending:
                self.unpark_pending = True
                self._push(resume, UNPARK, None)
            return
        self._remove_node(pool, node, now)

    def _unpark(self, now: float) -> None:
        """Scale-downs held by the delay after a scale-up, once it has passed (or wait again)."""
        autoscaler = self.model.autoscaler
        assert autoscaler is not None, "only autoscaled pools park scale-downs"
        resume = self.last_scale_up + autoscaler.delay_after_add_s
        if now < resume:
            self._push(resume, UNPARK, None)
            return
        self.unpark_pending = False
        parked, self.parked = self.parked, []
        for index, node, token in parked:
            if node.alive and node.token == token:
                self._scale_down(self.pools[index], node, token, now)

    @staticmethod
    def _wait(pool: _Pool, job: _Job) -> None:
        bisect.insort(pool.waiting, job, key=_place_order)
        if not job.expendable:
            pool.demand_nodes += job.nodes

    @staticmethod
    def _unwait(pool: _Pool, job: _Job) -> None:
        pool.waiting.remove(job)
        if not job.expendable:
            pool.demand_nodes -= job.nodes

    def _place(self, pool: _Pool, now: float) -> None:
        """The scheduler: admitted jobs by pod priority, then admission time, onto ready nodes."""
        if not pool.waiting:
            return
        whole = pool.model.whole_nodes
        if whole and not pool.free:
            return
        most = self.model.autoscaler is not None and self.model.autoscaler.pack_most_allocated
        still: list[_Job] = []
        for job in pool.waiting:
            if whole:
                if len(pool.free) >= job.nodes:
                    self._start(pool, job, [pool.free.pop() for _ in range(job.nodes)], now)
                    continue
            else:
                fits = [n for n in pool.nodes if n.ready and n.free >= job.per_node]
                if len(fits) >= job.nodes:
                    fits.sort(key=lambda n: (n.free if most else -n.free, n.id))
                    self._start(pool, job, fits[: job.nodes], now)
                    continue
            still.append(job)
        pool.waiting = still

    def _scale_up(self, pool: _Pool, now: float) -> None:
        """The cluster autoscaler: nodes for the pods no node (up or booting) can take."""
        m = pool.model
        room = m.max_nodes - pool.alive_nodes()
        if not m.autoscaled or room <= 0 or not pool.waiting:
            return
        if m.whole_nodes:
            add = pool.demand_nodes - len(pool.free) - pool.provisioning
        else:
            demand = [j for j in pool.waiting if not j.expendable]
            spare = [n.free for n in pool.nodes if n.ready] + [m.slots_per_node] * pool.provisioning
            add = 0
            for job in demand:
                placed = 0
                for i, free in enumerate(spare):
                    if placed == job.nodes:
                        break
                    if free >= job.per_node:
                        spare[i] -= job.per_node
                        placed += 1
                for _ in range(job.nodes - placed):
                    spare.append(m.slots_per_node - job.per_node)
                    add += 1
        for _ in range(min(add, room)):
            self._boot(pool, now)
            self.last_scale_up = now

    def _arm_scale_down(self, pool: _Pool, now: float) -> None:
        autoscaler = self.model.autoscaler
        candidates, pool.candidates = pool.candidates, []
        if autoscaler is None or not pool.model.autoscaled:
            return
        for node in candidates:
            if node.alive and node.ready and node.busy == 0 and not node.timer:
                node.timer = True
                self._push(now + autoscaler.unneeded_s, SCALE_DOWN, (pool.index, node), node.token)

    def _settle(self, now: float) -> None:
        dirty = self.dirty
        while dirty:
            index = min(dirty)
            dirty.discard(index)
            pool = self.pools[index]
            while pool.arrivals or pool.quota_freed:
                self._admission(pool, now)
            if pool.waiting:
                self._place(pool, now)
                self._scale_up(pool, now)
            if pool.candidates:
                self._arm_scale_down(pool, now)
            last = pool.series[-1] if pool.series else None
            nodes = len(pool.nodes)
            if last is None or last[1] != nodes or last[2] != pool.queued_slots:
                pool.series.append((now, nodes, pool.queued_slots))

    # --- the result -------------------------------------------------------------------------

    def _result(self, end: float) -> Result:
        for job in self.jobs:
            if job.state == RUNNING:
                self.segments.append(
                    Segment(job.spec.id, self.model.pools[job.pool].name, job.seg_start, end, job.slots, END_HORIZON)
                )
            if job.state in (RUNNING, ADMITTED):
                self.reservations.append(
                    Reservation(job.spec.id, self.model.queues[job.queue].name, self.model.pools[job.pool].name, job.admitted_at, end, job.slots)
                )
        outcomes = [
            JobOutcome(
                id=job.spec.id,
                team=job.spec.team,
                tier=job.spec.tier,
                pool=job.spec.pool,
                submit=job.spec.submit_s,
                first_start=job.first_start,
                end=job.end,
                preemptions=job.preemptions,
                interruptions=job.interruptions,
                lost_gpu_s=job.lost,
                status=STATUS_FINISHED if job.state == FINISHED else STATUS_REJECTED if job.state == REJECTED else STATUS_UNFINISHED,
                reason=job.reason,
                slots=job.slots,
            )
            for job in self.jobs
        ]
        pools = []
        for pool in self.pools:
            lives = [*pool.lifetimes, *((node.created, end) for node in pool.nodes)]
            seconds = sum(max(0.0, min(gone, end) - created) for created, gone in lives)
            series = [s for s in pool.series if s[0] <= end]
            pools.append(
                PoolOutcome(
                    name=pool.model.name,
                    node_seconds=seconds,
                    slots_per_node=pool.model.slots_per_node,
                    gpus_per_node=pool.model.gpus_per_node,
                    usd_per_node_hour=pool.model.usd_per_node_hour,
                    series=series,
                )
            )
        return Result(self.model.stack, self.seed, end, outcomes, self.segments, self.reservations, pools)


def simulate(model: StackModel, trace: Sequence[TraceJob], seed: int = 0, horizon_s: float | None = None) -> Result:
    return Simulation(model, trace, seed, horizon_s).run()

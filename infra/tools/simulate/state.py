"""What one simulation run holds: its records (what the report reads) and the live state of jobs,
nodes and each pool's Kueue quota (what the engine changes)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from infra.tools.simulate.model import StackModel, spot_rate_per_s
from infra.tools.simulate.trace import TraceJob

# Event kinds, in the order events of one instant are handled, so that a job that finishes as its
# node is lost has finished. PODS_READY_TIMEOUT and UNPARK each stand for a whole line of
# deadlines (waitForPodsReady timeouts; scale-downs held by the delay after a scale-up), so a
# busy cluster does not carry one event per waiting job or idle node. EVICTED (fair sharing: a
# preempted job's eviction completes) comes last, after whatever else happened to it at that time.
FINISH, NODE_READY, PODS_READY_TIMEOUT, REQUEUE, SCALE_DOWN, UNPARK, INTERRUPT, RETRY, EVICTED = range(9)

# Job states.
PENDING, BACKOFF, ADMITTED, RUNNING, FINISHED, REJECTED = range(6)

# Without --horizon-s the run ends once every job has finished, or, when some never can (say
# opportunistic jobs on a pool that nothing else scales up), once nothing has been submitted,
# started or finished for two full waitForPodsReady requeue cycles; and at the latest RUN_CAP
# times the longest job's duration after the last submission, so that jobs that keep losing
# their work (frequent spot losses, no checkpoints) end unfinished instead of running forever.
STALL_CYCLES = 2
RUN_CAP = 10

# The most times one job may be admitted in a run. Every admission after the first follows a
# preemption, a waitForPodsReady timeout or a lost node, each of which takes simulated time, so a
# job only gets near this in a preemption cycle that never settles (two queues reclaiming from
# each other) or in a defect of the model: the run stops with BoundExceeded, naming the pool and
# the job, instead of growing without end.
MAX_ADMISSIONS_PER_JOB = 20_000


class BoundExceeded(Exception):
    """A run went past MAX_ADMISSIONS_PER_JOB: its figures would mean nothing."""

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


class Job:
    __slots__ = (
        "spec", "index", "pool", "queue", "slots", "per_node", "nodes", "priority", "pod_priority", "expendable",
        "state", "order_ts", "token", "admitted_at", "admission", "progress", "seg_start", "held", "first_start", "end",
        "preemptions", "interruptions", "lost", "requeues", "reason", "won_at",
        "evicting",
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
        self.held: list[Node] = []
        self.first_start: float | None = None
        self.end: float | None = None
        self.preemptions = 0
        self.interruptions = 0
        self.lost = 0.0
        self.requeues = 0
        self.reason = ""
        # When the job was last admitted by preempting others (engine: such a job is no target
        # at that same instant).
        self.won_at = -1.0
        # Under fair sharing, when Kueue marked the job for preemption (it keeps its quota until
        # its eviction completes, model.PREEMPTION_S later), or None.
        self.evicting: float | None = None

    def key(self) -> tuple[int, float, int, Job]:
        """Kueue's queue order: priority, then the queue timestamp."""
        return (-self.priority, self.order_ts, self.index, self)


def place_order(job: Job) -> tuple[int, int]:
    """The scheduler's order of pending pods: priority, then (here) admission order."""
    return (-job.pod_priority, job.admission)


class Node:
    __slots__ = ("id", "created", "ready", "alive", "free", "jobs", "busy", "token", "timer")

    def __init__(self, node_id: int, created: float, slots: int) -> None:
        self.id = node_id
        # Billed from here: the instance runs while it boots.
        self.created = created
        self.ready = False
        self.alive = True
        self.free = slots
        self.jobs: list[Job] = []
        # Jobs on the node that keep it up (not expendable).
        self.busy = 0
        self.token = 0
        self.timer = False


class PoolState:
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
        self.pending: list[dict[int, list[tuple[int, float, int, Job]]]] = [{} for _ in queues]
        self.sizes: list[list[int]] = [[] for _ in queues]
        self.pending_count = 0
        self.admitted: list[dict[int, Job]] = [{} for _ in queues]
        # Per queue: how many admitted jobs hold each priority.
        self.priorities: list[dict[int, int]] = [{} for _ in queues]
        # Admitted jobs waiting for nodes, in the scheduler's order (pod priority, then admission),
        # and the nodes the non-expendable ones need: what the autoscaler scales up for.
        self.waiting: list[Job] = []
        self.demand_nodes = 0
        self.arrivals: list[Job] = []
        self.quota_freed = False
        # An admission pass is due after a preemption that had to wait (engine RETRY).
        self.retry_pending = False
        self.nodes: list[Node] = []
        self.free: list[Node] = []
        self.provisioning = 0
        self.candidates: list[Node] = []
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

    def rejection(self, job: Job, queue: str) -> str:
        """Why the job can never be admitted on this pool (empty if it can)."""
        m = self.model
        if job.nodes > m.max_nodes:
            return f"needs {job.nodes} nodes; pool {m.name} has at most {m.max_nodes}"
        if job.per_node > m.max_pod_slots:
            shared = " (its GPUs are shared: a pod may ask for 1)" if m.max_pod_slots < m.slots_per_node else ""
            return f"asks {job.per_node} GPU slots per node; a pod on pool {m.name} may ask for {m.max_pod_slots}{shared}"
        if job.slots > self.potential(job.queue):
            return (
                f"needs {job.slots} GPU slots; ClusterQueue {queue} may hold at most {self.potential(job.queue)}"
                f" on pool {m.name} (nominal quota plus what its cohort can lend)"
            )
        return ""


def check_admissions(job: Job, pool: PoolState, now: float, bound: int) -> None:
    """Raise BoundExceeded before the job's admission past `bound` (MAX_ADMISSIONS_PER_JOB)."""
    if job.preemptions + job.requeues >= bound:
        raise BoundExceeded(
            f"pool {pool.model.name}: job {job.spec.id} reached the bound of {bound:,} admissions per job at"
            f" t={now:.0f}s ({job.preemptions:,} preemptions, {job.requeues:,} waitForPodsReady requeues);"
            " a run this unsettled is not simulated further (docs/capacity-planning.md)"
        )


def final_result(
    model: StackModel,
    seed: int,
    end: float,
    jobs: list[Job],
    segments: list[Segment],
    reservations: list[Reservation],
    pools: list[PoolState],
) -> Result:
    """The run's records at `end`: what still runs or holds quota is cut there."""
    for job in jobs:
        if job.state == RUNNING:
            segments.append(Segment(job.spec.id, model.pools[job.pool].name, job.seg_start, end, job.slots, END_HORIZON))
        if job.state in (RUNNING, ADMITTED):
            queue, pool = model.queues[job.queue].name, model.pools[job.pool].name
            reservations.append(Reservation(job.spec.id, queue, pool, job.admitted_at, end, job.slots))
    outcomes = [job_outcome(job) for job in jobs]
    return Result(model.stack, seed, end, outcomes, segments, reservations, [pool_outcome(pool, end) for pool in pools])


def job_outcome(job: Job) -> JobOutcome:
    """What jobs.csv reports of a job at the end of the run."""
    status = STATUS_FINISHED if job.state == FINISHED else STATUS_REJECTED if job.state == REJECTED else STATUS_UNFINISHED
    return JobOutcome(
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
        status=status,
        reason=job.reason,
        slots=job.slots,
    )


def pool_outcome(pool: PoolState, end: float) -> PoolOutcome:
    """A pool's node-seconds (every node billed from its creation) and its series, up to `end`."""
    lives = [*pool.lifetimes, *((node.created, end) for node in pool.nodes)]
    seconds = sum(max(0.0, min(gone, end) - created) for created, gone in lives)
    return PoolOutcome(
        name=pool.model.name,
        node_seconds=seconds,
        slots_per_node=pool.model.slots_per_node,
        gpus_per_node=pool.model.gpus_per_node,
        usd_per_node_hour=pool.model.usd_per_node_hour,
        series=[s for s in pool.series if s[0] <= end],
    )

"""`gpu-platform simulate` on a fleet manager stack: one trace replayed against every worker with
MultiKueue's dispatch, and against each worker alone.

How a job moves (kubernetes-sigs/kueue@v0.19.2):

- The manager's Kueue reserves quota first: the team's ClusterQueue on the manager, one flavor per
  GPU model, its nominal quota and the cohort's (what the manager stack declares: the workers' sum
  or `fleet.quotas`). The Incremental dispatcher nominates nothing before that
  (pkg/controller/workloaddispatcher/incrementaldispatcher.go, Reconcile: `!HasQuotaReservation`
  skips the workload). Modelled here as BestEffortFIFO in priority, then submission order,
  borrowing what the cohort has free; the manager preempts nothing (see below).
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
  on the others are deleted (syncToSingleCluster). At one instant, workers admit in dispatch order.
- The manager's quota is held until the job finishes on its worker. A winner's copy evicted on
  its worker (preempted, or waitForPodsReady's timeout) makes the manager evict its own workload
  (workload.go step 6: the remote Evicted condition sets the check to Retry): the manager's quota
  is released, the copy deleted, and the job queues on the manager again, to be dispatched from
  the first worker (docs/fleet.md, "Quota is not capacity").

Not modelled: the manager's own preemption (its queues admit by quota only); unreachable workers
(workerLostTimeout); API latency between clusters (a copy queues on its worker the instant it is
nominated).
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from components.checks.declared import get, items, mapping
from components.facts import catalog, multikueue
from components.fleet import job as fleet_job
from components.fleet.plan import cluster_name
from components.pools import GPU_MODEL_LABEL
from components.spec import PlatformSpec
from components.spec.fleet import worker_stack
from infra import output_folder
from infra.tools.simulate import build, engine, model, report, trace
from infra.tools.simulate.command import Options, UsageError, pool_figures
from infra.tools.simulate.model import ModelError, StackModel
from infra.tools.simulate.objects import Objects, name_of
from infra.tools.simulate.state import (
    BACKOFF,
    PENDING,
    REJECTED,
    RUN_CAP,
    STALL_CYCLES,
    STATUS_REJECTED,
    STATUS_UNFINISHED,
    Job,
    JobOutcome,
    Reservation,
    Result,
    job_outcome,
)
from infra.tools.simulate.trace import TraceJob

ALL_AT_ONCE_DISPATCHER = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
# incrementaldispatcher.go: incrementalDispatcherRoundTimeout and DefaultStepSize.
ROUND_S = multikueue.INCREMENTAL_ROUND_MINUTES * 60.0
DEFAULT_STEP_SIZE = 3
# The fleet's pool names: `<worker stack>.<pool>` (a file name too: pool-prod-aws.h100-train.png).
POOL_SEPARATOR = "."
ALONE_DIR = "alone"
# The reason on a worker's copy that MultiKueue deleted (not one its Kueue could never admit).
REMOVED = "removed:"


def pool_name(worker: str, pool: str) -> str:
    return f"{cluster_name(worker)}{POOL_SEPARATOR}{pool}"


# --- the manager ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dispatch:
    """The manager's MultiKueue settings, as its Kueue configuration and MultiKueueConfig declare."""

    order: tuple[str, ...]
    step: int
    dispatcher: str


@dataclass(frozen=True)
class ManagerQuota:
    """The manager's ClusterQueues, per GPU model: nominal GPUs per queue, and per cohort its own."""

    # team -> ClusterQueue
    teams: Mapping[str, str]
    # ClusterQueue -> cohort (or None)
    cohorts: Mapping[str, str | None]
    # GPU model -> ClusterQueue -> nominal GPUs
    nominal: Mapping[str, Mapping[str, int]]
    # GPU model -> cohort -> the cohort's own GPUs
    cohort_quota: Mapping[str, Mapping[str, int]]

    def potential(self, model_name: str, queue: str) -> int:
        cohort = self.cohorts[queue]
        nominal = self.nominal[model_name]
        if cohort is None:
            return nominal.get(queue, 0)
        members = sum(n for q, n in nominal.items() if self.cohorts[q] == cohort)
        return members + self.cohort_quota[model_name].get(cohort, 0)


def read_dispatch(resources: Sequence[Mapping[str, Any]], workers: Sequence[str]) -> Dispatch:
    """The MultiKueueConfig's clusters and the dispatcher of the manager's Kueue configuration."""
    objects = Objects(resources)
    configs = objects.kueue("MultiKueueConfig")
    if len(configs) != 1:
        raise ModelError(f"the manager declares {len(configs)} MultiKueueConfigs; the model reads exactly one")
    by_cluster = {cluster_name(w): w for w in workers}
    clusters = [str(c) for c in items(get(configs[0], "spec", "clusters"))]
    unknown = [c for c in clusters if c not in by_cluster]
    if unknown:
        raise ModelError(f"MultiKueueConfig {name_of(configs[0])}: clusters {unknown} are no worker of the stack")
    release = objects.release("kueue")
    text = get(release, "managerConfig", "controllerManagerConfigYaml") if release is not None else None
    config = yaml.safe_load(text) if isinstance(text, str) else {}
    config = mapping(get(config, "multiKueue")) if isinstance(config, dict) else {}
    dispatcher = str(config.get("dispatcherName") or ALL_AT_ONCE_DISPATCHER)
    if dispatcher == multikueue.INCREMENTAL_DISPATCHER:
        step = int(mapping(config.get("incrementalDispatcherConfig")).get("stepSize") or DEFAULT_STEP_SIZE)
    elif dispatcher == ALL_AT_ONCE_DISPATCHER:
        step = len(clusters)
    else:
        raise ModelError(f"Kueue configuration: multiKueue.dispatcherName {dispatcher!r}: an external dispatcher is not modelled")
    return Dispatch(tuple(by_cluster[c] for c in clusters), max(1, step), dispatcher)


def read_manager_quota(resources: Sequence[Mapping[str, Any]]) -> ManagerQuota:
    """The manager's quota per GPU model: its flavors select nodes by the GPU model label."""
    objects = Objects(resources)
    flavor_model = {
        name_of(f): str(mapping(get(f, "spec", "nodeLabels")).get(GPU_MODEL_LABEL, name_of(f)))
        for f in objects.kueue("ResourceFlavor")
    }
    models = sorted(set(flavor_model.values()))
    nominal: dict[str, dict[str, int]] = {m: {} for m in models}
    cohorts: dict[str, str | None] = {}
    for cq in objects.kueue("ClusterQueue"):
        name = name_of(cq)
        cohort = get(cq, "spec", "cohortName")
        cohorts[name] = str(cohort) if cohort else None
        for flavor, quota in _gpu_quotas(get(cq, "spec"), f"manager ClusterQueue {name}").items():
            nominal[flavor_model[flavor]][name] = quota
    cohort_quota: dict[str, dict[str, int]] = {m: {} for m in models}
    for cohort in objects.kueue("Cohort"):
        for flavor, quota in _gpu_quotas(get(cohort, "spec"), f"manager Cohort {name_of(cohort)}").items():
            cohort_quota[flavor_model[flavor]][name_of(cohort)] = quota
    teams = {
        str(get(lq, "metadata", "namespace")): str(get(lq, "spec", "clusterQueue"))
        for lq in objects.kueue("LocalQueue")
        if name_of(lq) == str(get(lq, "metadata", "namespace"))
    }
    return ManagerQuota(dict(sorted(teams.items())), cohorts, nominal, cohort_quota)


def _gpu_quotas(spec: Any, owner: str) -> dict[str, int]:
    """flavor -> nominal nvidia.com/gpu; borrowing and lending limits are not modelled on the manager
    (the manager stack declares none: components.fleet.plan)."""
    out: dict[str, int] = {}
    for group in items(get(spec, "resourceGroups")):
        for flavor in items(get(group, "flavors")):
            for quota in items(get(flavor, "resources")):
                if get(quota, "name") != "nvidia.com/gpu":
                    continue
                if get(quota, "borrowingLimit") is not None or get(quota, "lendingLimit") is not None:
                    raise ModelError(f"{owner}: borrowing and lending limits on the manager are not modelled")
                out[str(get(flavor, "name"))] = int(get(quota, "nominalQuota") or 0)
    return out


# --- the trace on the fleet ---------------------------------------------------------------------


@dataclass(frozen=True)
class FleetJob:
    """A trace job on the fleet: its GPU model, and per worker the pool it would run on there."""

    spec: TraceJob
    gpu_model: str
    pools: Mapping[str, str]
    # Why each worker without a pool for it has none.
    why: Mapping[str, str]


def gpu_model_names(workers: Mapping[str, StackModel]) -> dict[str, str]:
    """What the trace's `pool` column may name on a fleet: a GPU model, or a worker's pool (read as
    its GPU model). A pool name two workers give different models is not offered."""
    names: dict[str, str] = {}
    clash: set[str] = set()
    for worker in workers.values():
        for pool in worker.pools:
            names[pool.gpu_model] = pool.gpu_model
    for worker in workers.values():
        for pool in worker.pools:
            if names.get(pool.name, pool.gpu_model) != pool.gpu_model:
                clash.add(pool.name)
            names.setdefault(pool.name, pool.gpu_model)
    return {n: m for n, m in names.items() if n not in clash}


def fleet_jobs(jobs: Sequence[TraceJob], names: Mapping[str, str], specs: Mapping[str, PlatformSpec]) -> list[FleetJob]:
    """Each job's pool per worker, chosen as `gpu-platform job` on the fleet chooses it
    (components.fleet.job.eligible: an unshared pool of the model that holds its shape)."""
    cache: dict[tuple[str, int, int, str], tuple[dict[str, str], dict[str, str]]] = {}
    out = []
    for job in jobs:
        gpu_model = names[job.pool]
        key = (gpu_model, job.nodes, job.gpus_per_node, job.team)
        if key not in cache:
            request = fleet_job.FleetJobRequest(gpu_model=gpu_model, nodes=job.nodes, gpus_per_node=job.gpus_per_node, team=job.team, tier=job.tier)
            chosen, why = fleet_job.eligible(specs, request)
            cache[key] = ({w: p.name for w, p in chosen.items()}, why)
        pools, why = cache[key]
        out.append(FleetJob(job, gpu_model, pools, why))
    return out


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

    def withdraw(self, job_id: str) -> None:
        """Another worker admitted the job: MultiKueue deletes this copy (it is still queued)."""
        job = self.by_id.get(job_id)
        if job is None or job_id not in self.submitted:
            return
        pool = self.pools[job.pool]
        if job.state == BACKOFF:
            # Requeue backoff after a waitForPodsReady eviction: its REQUEUE event is dropped.
            job.token += 1
            pool.queued_slots -= job.slots
            job.state, job.reason = REJECTED, f"{REMOVED} evicted, dispatched again by the manager"
            self.dirty.add(job.pool)
            return
        if job.state != PENDING:
            return
        queued = pool.pending[job.queue][job.slots]
        queued[:] = [entry for entry in queued if entry[3] is not job]
        heapq.heapify(queued)
        if not queued:
            del pool.pending[job.queue][job.slots]
            pool.sizes[job.queue].remove(job.slots)
        pool.pending_count -= 1
        pool.queued_slots -= job.slots
        job.state, job.reason = REJECTED, f"{REMOVED} admitted on another worker"
        self.dirty.add(job.pool)

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


@dataclass
class _Entry:
    job: FleetJob
    index: int
    priority: int
    queue: str
    slots: int
    reserved: bool = False
    nominated: int = 0
    # Dispatches so far: a round event of an earlier one is stale.
    dispatches: int = 0
    winner: str | None = None
    done: bool = False
    reason: str = ""


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
            _Entry(j, i, first.tiers[j.spec.tier].priority, quota.teams[j.spec.team], j.spec.nodes * j.spec.gpus_per_node)
            for i, j in enumerate(jobs)
        ]
        self.by_id = {e.job.spec.id: e for e in self.entries}
        self.workers = [
            _Worker(w, workers[w], [dataclasses.replace(j.spec, pool=j.pools[w]) for j in jobs if w in j.pools], seed, horizon_s, self)
            for w in dispatch.order
        ]
        self.usage: dict[tuple[str, str], int] = {}
        self.pending: list[_Entry] = []
        self.rounds: list[tuple[float, int, int]] = []
        # Winners' copies evicted on their worker, for the manager to take back after the
        # worker's pass (an eviction can happen within its admission pass).
        self.evictions: list[tuple[_Worker, _Entry]] = []
        self.manager_dirty = False
        self.unsettled = len(self.entries)
        self.last_progress = 0.0

    # --- the manager's Kueue and dispatcher ---------------------------------------------------

    def _available(self, entry: _Entry) -> int:
        model_name, queue = entry.job.gpu_model, entry.queue
        cohort = self.quota.cohorts[queue]
        members = [queue] if cohort is None else [q for q, c in self.quota.cohorts.items() if c == cohort]
        used = sum(self.usage.get((model_name, q), 0) for q in members)
        return self.quota.potential(model_name, queue) - used

    def _admission(self, now: float) -> None:
        self.manager_dirty = False
        self.pending.sort(key=lambda e: (-e.priority, e.job.spec.submit_s, e.index))
        waiting = []
        for entry in self.pending:
            if entry.slots <= self._available(entry):
                key = (entry.job.gpu_model, entry.queue)
                self.usage[key] = self.usage.get(key, 0) + entry.slots
                entry.reserved = True
                entry.dispatches += 1
                entry.nominated = 0
                self._round(entry, now)
            else:
                waiting.append(entry)
        self.pending = waiting

    def _round(self, entry: _Entry, now: float) -> None:
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
                other.withdraw(job_id)

    def evicted(self, worker: _Worker, job_id: str) -> None:
        """The winner's copy was evicted on its worker: MultiKueue sees the remote Evicted
        condition, sets the check to Retry, and the manager evicts its own workload, which
        releases its quota and clears its cluster; it is requeued and dispatched again from the
        first worker (workload.go step 6; pkg/workload evict)."""
        entry = self.by_id[job_id]
        if entry.winner == worker.name:
            entry.winner = None
            self.evictions.append((worker, entry))

    def _take_back(self) -> None:
        for worker, entry in self.evictions:
            if entry.winner is not None or entry.done:
                continue
            worker.withdraw(entry.job.spec.id)
            key = (entry.job.gpu_model, entry.queue)
            self.usage[key] -= entry.slots
            entry.reserved = False
            self.pending.append(entry)
            self.manager_dirty = True
        self.evictions = []

    def finished(self, job_id: str, now: float) -> None:
        entry = self.by_id[job_id]
        entry.done = True
        key = (entry.job.gpu_model, entry.queue)
        self.usage[key] -= entry.slots
        self.unsettled -= 1
        self.last_progress = now
        self.manager_dirty = True

    def _arrive(self, entry: _Entry, now: float) -> None:
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
            now = min([upcoming, self.rounds[0][0] if self.rounds else math.inf, *(w.next_time() for w in self.workers)])
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
                if entry.winner is None and entry.reserved and entry.dispatches == dispatch:
                    self._round(entry, now)
            while next_arrival < total and arrivals[next_arrival].job.spec.submit_s == now:
                self._arrive(arrivals[next_arrival], now)
                next_arrival += 1
            while self.manager_dirty or self.evictions or any(w.dirty for w in self.workers):
                self._take_back()
                if self.manager_dirty:
                    self._admission(now)
                for worker in self.workers:
                    if worker.dirty:
                        worker._settle(now)
                    self._take_back()
        progress = max([self.last_progress, *(w.last_progress for w in self.workers)])
        end = self.horizon if self.horizon is not None else cap if capped else progress
        return end, [worker._result(end) for worker in self.workers]


# --- results -----------------------------------------------------------------------------------


def fleet_result(
    stack: str, seed: int, end: float, entries: Sequence[_Entry], workers: Mapping[str, StackModel], order: Sequence[str], results: Sequence[Result]
) -> Result:
    """One Result over the workers: each job's outcome on the worker that admitted it. A job no
    worker admitted is reported on the first pool in dispatch order that it had (else the first
    of its GPU model): jobs.csv names a pool for every job."""
    outcomes = {w: {j.id: j for j in r.jobs} for w, r in zip(order, results)}
    home = [
        next(
            (pool_name(w, e.job.pools[w]) for w in order if w in e.job.pools),
            next(pool_name(w, p.name) for w in order for p in workers[w].pools if p.gpu_model == e.job.gpu_model),
        )
        for e in entries
    ]
    jobs: list[JobOutcome] = []
    for entry in entries:
        spec = entry.job.spec
        if entry.winner is not None:
            outcome = dataclasses.replace(outcomes[entry.winner][spec.id], pool=pool_name(entry.winner, entry.job.pools[entry.winner]))
        else:
            copies = [outcomes[w][spec.id] for w in order if spec.id in outcomes[w]]
            never = entry.reason or (
                "; ".join(f"{w}: {c.reason}" for w, c in zip(order, copies)) if copies and all(c.status == STATUS_REJECTED and not c.reason.startswith(REMOVED) for c in copies) else ""
            )
            outcome = job_outcome(Job(spec, entry.index, 0, 0, 0, 0, False))
            outcome.pool = home[entry.index]
            outcome.status, outcome.reason = (STATUS_REJECTED, never) if never else (STATUS_UNFINISHED, "")
        jobs.append(outcome)
    segments = [dataclasses.replace(s, pool=pool_name(w, s.pool)) for w, r in zip(order, results) for s in r.segments]
    reservations: list[Reservation] = [
        dataclasses.replace(x, pool=pool_name(w, x.pool)) for w, r in zip(order, results) for x in r.reservations
    ]
    pools = [dataclasses.replace(p, name=pool_name(w, p.name)) for w, r in zip(order, results) for p in r.pools]
    return Result(stack, seed, end, jobs, segments, reservations, pools)


def fleet_model(stack: str, workers: Mapping[str, StackModel], dispatch: Dispatch, quota: ManagerQuota) -> StackModel:
    """What report.write reads of a model, over the workers: their pools under fleet names, the
    tiers (one value each across the fleet: components.fleet.plan.priority_tiers), the parameters."""
    first = workers[dispatch.order[0]]
    return StackModel(
        stack=stack,
        cloud="fleet",
        pools=tuple(dataclasses.replace(p, name=pool_name(w, p.name)) for w in dispatch.order for p in workers[w].pools),
        queues=(),
        cohorts={},
        teams=quota.teams,
        tiers=first.tiers,
        autoscaler=None,
        kueue=first.kueue,
        parameters={
            "dispatch": {
                "dispatcher": dispatch.dispatcher,
                "order": [cluster_name(w) for w in dispatch.order],
                "step_size": dispatch.step,
                "round_s": ROUND_S,
                "not_modelled": [
                    "preemption on the manager",
                    "unreachable workers",
                    "latency between clusters",
                ],
            },
            "manager_quota": {m: dict(q) for m, q in quota.nominal.items()},
            "workers": {cluster_name(w): workers[w].parameters for w in dispatch.order},
        },
    )


def _team_cost(result: Result, stack_model: StackModel) -> dict[str, float]:
    """The list price of the GPU-hours each team's jobs ran (idle and booting nodes are in the
    run's total, not in a team's)."""
    price = {
        p.name: (p.usd_per_node_hour or 0.0) / p.slots_per_node for p in stack_model.pools
    }
    team = {j.id: j.team for j in result.jobs}
    cost: dict[str, float] = {}
    for s in result.segments:
        cost[team[s.job]] = cost.get(team[s.job], 0.0) + s.gpus * (s.end - s.start) / 3600 * price[s.pool]
    return cost


def comparison_row(result: Result, stack_model: StackModel, excluded: Mapping[str, int]) -> dict[str, Any]:
    """Per team and in all: jobs, started, rejected (jobs excluded from the run count as rejected),
    wait p50 and p95 over the started jobs, the GPU-hours' cost; and the run's total cost."""
    figures = report.summary(result, stack_model)
    costs = _team_cost(result, stack_model)
    teams = {}
    for name in sorted(set(figures["teams"]) | set(excluded)):
        team = figures["teams"].get(name, {"jobs": 0, "rejected": 0, "not_started": 0, "wait_s": {"p50": None, "p95": None}})
        teams[name] = {
            "jobs": team["jobs"] + excluded.get(name, 0),
            "started": team["jobs"] - team["rejected"] - team["not_started"],
            "rejected": team["rejected"] + excluded.get(name, 0),
            "wait_p50_s": team["wait_s"]["p50"],
            "wait_p95_s": team["wait_s"]["p95"],
            "gpu_cost_usd": round(costs.get(name, 0.0), 2),
        }
    total = figures["totals"]
    return {
        "teams": teams,
        "all": {
            "jobs": total["jobs"] + sum(excluded.values()),
            "started": total["jobs"] - total["rejected"] - total["not_started"],
            "rejected": total["rejected"] + sum(excluded.values()),
            "wait_p50_s": total["wait_s"]["p50"],
            "wait_p95_s": total["wait_s"]["p95"],
            "gpu_cost_usd": round(sum(costs.values()), 2),
            "cost_usd": total["cost_usd"],
        },
    }


def comparison_table(comparison: Mapping[str, Mapping[str, Any]]) -> str:
    header = ["team", "run", "jobs", "started", "rejected", "wait p50", "p95", "GPU cost"]
    lines = [header]
    runs = list(comparison)
    teams = sorted({t for run in comparison.values() for t in run["teams"]})
    for team in [*teams, "all"]:
        for run in runs:
            row = comparison[run]["all"] if team == "all" else comparison[run]["teams"].get(team)
            if row is None:
                continue
            lines.append(
                [team, run, str(row["jobs"]), str(row["started"]), str(row["rejected"]),
                 report.duration(row["wait_p50_s"]), report.duration(row["wait_p95_s"]), report.usd(row["gpu_cost_usd"], "$")]
            )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))).rstrip() for line in lines)


# --- the command ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    workers: dict[str, StackModel]
    quota: ManagerQuota
    dispatch: Dispatch
    jobs: list[FleetJob]


def prepare(stack: str, synthesis: Any, options: Options) -> Prepared:
    """The workers' models (with the command line's figures, pools named `<worker>.<pool>`), the
    manager's quota and dispatch, and the trace checked against the fleet. `synthesis` is an
    infra.offline.FleetSynthesis."""
    problems: list[str] = []
    if options.horizon_s is not None and not (math.isfinite(options.horizon_s) and 0 < options.horizon_s <= trace.MAX_TRACE_S):
        problems.append(f"--horizon-s: expected a number of seconds > 0, at most {trace.MAX_TRACE_S}, got {options.horizon_s:g}")
    workers_synth = synthesis.workers
    plain = {w: build.stack_model(worker_stack(w), r.resources, r.outputs) for w, (_, r) in workers_synth.items()}
    names = [pool_name(w, p.name) for w, m in plain.items() for p in m.pools]
    spot = pool_figures(options.spot_rates, "--spot-rate", names, problems)
    scale = pool_figures(options.scale_up_s, "--scale-up-s", names, problems)
    workers: dict[str, StackModel] = {}
    for w, (_, r) in workers_synth.items():
        mine = {p.name: pool_name(w, p.name) for p in plain[w].pools}
        overrides = model.Overrides(
            spot_rates={p: spot[n] for p, n in mine.items() if n in spot},
            scale_up_s={p: scale[n] for p, n in mine.items() if n in scale},
        )
        workers[w] = build.stack_model(worker_stack(w), r.resources, r.outputs, overrides)
    quota = read_manager_quota(synthesis.synthesis.resources)
    dispatch = read_dispatch(synthesis.synthesis.resources, list(workers_synth))
    offered = gpu_model_names(workers)
    first = workers[dispatch.order[0]]
    stack_names = trace.StackNames(teams=quota.teams, tiers=first.tiers, pools=offered)
    jobs: list[TraceJob] = []
    try:
        jobs = trace.read(options.trace, stack_names)
    except trace.TraceError as exc:
        problems += exc.problems
    if problems:
        raise UsageError(problems)
    specs = {w: spec for w, (spec, _) in workers_synth.items()}
    return Prepared(workers, quota, dispatch, fleet_jobs(jobs, offered, specs))


def simulate(stack: str, prepared: Prepared, seed: int, horizon_s: float | None) -> tuple[Result, dict[str, Result]]:
    """The fleet's run, and each worker's alone (the jobs it has a pool for)."""
    sim = FleetSimulation(prepared.workers, prepared.quota, prepared.dispatch, prepared.jobs, seed, horizon_s)
    end, results = sim.run()
    fleet = fleet_result(stack, seed, end, sim.entries, prepared.workers, prepared.dispatch.order, results)
    alone = {
        w: engine.simulate(
            prepared.workers[w], [dataclasses.replace(j.spec, pool=j.pools[w]) for j in prepared.jobs if w in j.pools], seed, horizon_s
        )
        for w in prepared.dispatch.order
    }
    return fleet, alone


def excluded(jobs: Sequence[FleetJob], worker: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for job in jobs:
        if worker not in job.pools:
            out[job.spec.team] = out.get(job.spec.team, 0) + 1
    return out


def run(stack: str, synthesis: Any, options: Options) -> str:
    """Simulate the fleet and each worker alone, write the outputs, return what the command prints."""
    started = time.perf_counter()
    prepared = prepare(stack, synthesis, options)
    fleet, alone = simulate(stack, prepared, options.seed, options.horizon_s)
    stack_model = fleet_model(stack, prepared.workers, prepared.dispatch, prepared.quota)
    comparison = {"fleet": comparison_row(fleet, stack_model, {})}
    for w, result in alone.items():
        comparison[cluster_name(w)] = comparison_row(result, prepared.workers[w], excluded(prepared.jobs, w))
    with output_folder.staged(options.out_dir) as staging:
        figures = report.write(fleet, stack_model, staging)
        for w, result in alone.items():
            report.write_tables(result, prepared.workers[w], staging / ALONE_DIR / cluster_name(w))
        document = {"excluded_jobs_count_as": "rejected", "runs": comparison}
        (staging / "comparison.json").write_text(json.dumps(document, indent=2) + "\n")
        with (staging / "report.md").open("a") as handle:
            handle.write(comparison_markdown(prepared, comparison))
    elapsed = time.perf_counter() - started
    order = ", ".join(cluster_name(w) for w in prepared.dispatch.order)
    lines = [
        f"{stack}: {len(prepared.jobs)} jobs over {order} (dispatch step {prepared.dispatch.step}, {ROUND_S / 60:g} min rounds),"
        f" seed {options.seed}, horizon {report.duration(fleet.horizon)} -> {options.out_dir} ({elapsed:.1f}s)",
        "",
        report.table(report.team_tier_rows(fleet, stack_model)),
        "",
    ]
    for name, pool in figures["pools"].items():
        lines.append(
            f"pool {name}: {pool['node_hours']:,.1f} node-hours, GPU utilization {report.share(pool['gpu_utilization'])},"
            f" {report.usd(pool['cost_usd'], '$')}"
        )
    total = figures["totals"]
    lines += [
        f"total: {total['node_hours']:,.1f} node-hours, {report.usd(total['cost_usd'], '$')} ({catalog.PRICE_NOTE})",
        "",
        "the fleet against each worker alone (waits over started jobs; a job a worker has no pool for counts as rejected there):",
        comparison_table(comparison),
    ]
    return "\n".join(lines) + "\n"


def comparison_markdown(prepared: Prepared, comparison: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [
        "## The fleet against each worker alone",
        "",
        f"Dispatch: {prepared.dispatch.dispatcher}, order {', '.join(cluster_name(w) for w in prepared.dispatch.order)},"
        f" {prepared.dispatch.step} worker(s) a round, a round every {ROUND_S / 60:g} minutes without admission."
        " Each worker alone replays the jobs it has a pool for; the others count as rejected there."
        " GPU cost: the list price of the GPU-hours the team's jobs ran.",
        "",
        "| team | run | jobs | started | rejected | wait p50 | wait p95 | GPU cost (USD) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    teams = sorted({t for run in comparison.values() for t in run["teams"]})
    for team in [*teams, "all"]:
        for run, figures in comparison.items():
            row = figures["all"] if team == "all" else figures["teams"].get(team)
            if row is None:
                continue
            lines.append(
                f"| {team} | {run} | {row['jobs']} | {row['started']} | {row['rejected']} | {report.duration(row['wait_p50_s'])}"
                f" | {report.duration(row['wait_p95_s'])} | {report.usd(row['gpu_cost_usd'])} |"
            )
    return "\n".join(lines) + "\n"

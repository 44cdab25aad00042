"""What `simulate` reads of a fleet: the manager's dispatch (its MultiKueueConfig and Kueue
configuration) and quota (its ClusterQueues and Cohort), and the trace's jobs with the pool each
would run on per worker. infra.tools.simulate.fleet says how they are used, and from which
upstream files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import yaml

from components.checks.declared import get, items, mapping
from components.facts import multikueue
from components.fleet import job as fleet_job
from components.fleet.plan import cluster_name
from components.pools import GPU_MODEL_LABEL
from components.spec import PlatformSpec
from infra.tools.simulate.model import ModelError, StackModel
from infra.tools.simulate.objects import Objects, name_of
from infra.tools.simulate.trace import TraceJob

ALL_AT_ONCE_DISPATCHER = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
# kubernetes-sigs/kueue@v0.19.2 pkg/controller/workloaddispatcher/incrementaldispatcher.go:
# incrementalDispatcherRoundTimeout and DefaultStepSize.
ROUND_S = multikueue.INCREMENTAL_ROUND_MINUTES * 60.0
DEFAULT_STEP_SIZE = 3
# The manager's preemption policies the model implements (infra.tools.simulate.fleet).
MANAGER_WITHIN = ("Never", "LowerPriority")
MANAGER_RECLAIM = ("Never", "LowerPriority", "Any")
# The fleet's pool names: `<worker stack>.<pool>` (a file name too: pool-prod-aws.h100-train.png).
POOL_SEPARATOR = "."


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
    # ClusterQueue -> its preemption.withinClusterQueue and preemption.reclaimWithinCohort
    within: Mapping[str, str]
    reclaim: Mapping[str, str]

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
        step = _step_size(mapping(config.get("incrementalDispatcherConfig")).get("stepSize"))
    elif dispatcher == ALL_AT_ONCE_DISPATCHER:
        step = len(clusters)
    else:
        raise ModelError(f"Kueue configuration: multiKueue.dispatcherName {dispatcher!r}: an external dispatcher is not modelled")
    return Dispatch(tuple(by_cluster[c] for c in clusters), step, dispatcher)


def _step_size(value: Any) -> int:
    """Kueue refuses a stepSize below 1 (kubernetes-sigs/kueue@v0.19.2 pkg/config/validation.go,
    validateMultiKueue: `*idc.StepSize < 1`) and only an absent one is DefaultStepSize; the value
    is the manager's (components.facts.multikueue.INCREMENTAL_STEP_SIZE), not a stack file's."""
    if value is None:
        return DEFAULT_STEP_SIZE
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ModelError(
            f"the kueue release's managerConfig.controllerManagerConfigYaml:"
            f" multiKueue.incrementalDispatcherConfig.stepSize {value!r}: Kueue refuses a stepSize below 1"
        )
    return value


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
    within: dict[str, str] = {}
    reclaim: dict[str, str] = {}
    for cq in objects.kueue("ClusterQueue"):
        name = name_of(cq)
        cohort = get(cq, "spec", "cohortName")
        cohorts[name] = str(cohort) if cohort else None
        within[name] = str(get(cq, "spec", "preemption", "withinClusterQueue") or "Never")
        reclaim[name] = str(get(cq, "spec", "preemption", "reclaimWithinCohort") or "Never")
        borrow = get(cq, "spec", "preemption", "borrowWithinCohort", "policy") or "Never"
        if within[name] not in MANAGER_WITHIN or reclaim[name] not in MANAGER_RECLAIM or borrow != "Never":
            raise ModelError(
                f"manager ClusterQueue {name}: preemption {within[name]}/{reclaim[name]}/borrowWithinCohort {borrow}:"
                f" the manager's model takes withinClusterQueue {'/'.join(MANAGER_WITHIN)}, reclaimWithinCohort"
                f" {'/'.join(MANAGER_RECLAIM)} and borrowWithinCohort Never"
            )
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
    return ManagerQuota(dict(sorted(teams.items())), cohorts, nominal, cohort_quota, within, reclaim)


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

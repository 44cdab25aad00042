"""The manager's Kueue objects, as plain data, from its spec and its workers' `fleetQueues`.

- One ResourceFlavor per GPU model, labelled with the model (`gpu-platform.io/gpu-model`, which
  every worker's GPU nodes carry and fleet jobs select): the manager has no GPU nodes, its flavors
  only count quota per model.
- Team ClusterQueues in one cohort, each with the one MultiKueue AdmissionCheck on all its flavors
  (Kueue v0.19.2 pkg/cache/scheduler/clusterqueue.go makes a ClusterQueue inactive with two
  MultiKueue checks or with one on some flavors only). Nominal quota per model: the sum of the
  team's quota on the workers' pools of that model, or `fleet.quotas`. The cohort holds the sum of
  what the workers' cohorts hold, so teams borrow across the fleet as they do on one cluster.
- One MultiKueueConfig listing the workers in dispatch order (components.fleet.order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from components.facts import multikueue
from components.kubernetes.queues import FLAVOR_FUNGIBILITY, KUEUE_API, NAMESPACE_NAME_LABEL, PREEMPTION
from components.pools import GPU_MODEL_LABEL, GPU_RESOURCE
from components.spec.fleet import FleetStackSpec, worker_stack

ADMISSION_CHECK = "multikueue"
CONFIG_NAME = "fleet"
COHORT = "fleet"

Description = Mapping[str, Any]


def flavor_name(gpu_model: str) -> str:
    return gpu_model.lower().replace(".", "-")


def cluster_name(worker: str) -> str:
    """The MultiKueueCluster of a worker: its stack's name (prod-aws)."""
    return worker_stack(worker)


def secret_name(worker: str) -> str:
    return f"{cluster_name(worker)}-kubeconfig"


def gpu_models(descriptions: Mapping[str, Description]) -> list[str]:
    return sorted({p["gpuModel"] for d in descriptions.values() for p in d["pools"].values()})


@dataclass(frozen=True)
class ManagerTeam:
    team: str
    namespace: str
    cluster_queue: str
    local_queues: tuple[str, ...]
    nominal: dict[str, int]


def _model_sum(description: Description, quota: Mapping[str, int]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for pool, slots in quota.items():
        model = description["pools"][pool]["gpuModel"]
        totals[model] = totals.get(model, 0) + int(slots)
    return totals


def teams(spec: FleetStackSpec, descriptions: Mapping[str, Description]) -> list[ManagerTeam]:
    """Every team of any worker, with the worker's namespace and queue names (MultiKueue needs them
    on the worker as on the manager: setup_multikueue.md, "In the Worker Cluster")."""
    models = gpu_models(descriptions)
    found: dict[str, ManagerTeam] = {}
    for description in descriptions.values():
        for name, team in description["teams"].items():
            sums = _model_sum(description, team["quota"])
            known = found.get(name)
            nominal = {m: sums.get(m, 0) + (known.nominal[m] if known else 0) for m in models}
            found[name] = ManagerTeam(
                team=name,
                namespace=team["namespace"],
                cluster_queue=team["clusterQueue"],
                local_queues=tuple(dict.fromkeys([*(known.local_queues if known else ()), *team["localQueues"]])),
                nominal=nominal,
            )
    out = []
    for name in sorted(found):
        team = found[name]
        override = spec.fleet.quotas.get(name, {})
        out.append(ManagerTeam(team.team, team.namespace, team.cluster_queue, team.local_queues,
                               {m: override.get(m, team.nominal[m]) for m in models}))
    return out


def shared(descriptions: Mapping[str, Description]) -> dict[str, int]:
    """What no team holds on any worker, per GPU model: the manager cohort's own quota."""
    models = gpu_models(descriptions)
    totals = {m: 0 for m in models}
    for description in descriptions.values():
        for model, slots in _model_sum(description, description["sharedQuota"]).items():
            totals[model] += slots
    return totals


class FleetConflict(ValueError):
    """Workers whose descriptions cannot be merged into one manager."""


def priority_tiers(descriptions: Mapping[str, Description]) -> list[Mapping[str, Any]]:
    """The workers' priority tiers, one WorkloadPriorityClass each on the manager, sorted by name.

    A job names its tier once, and the manager's Workload carries that class's value to whichever
    worker runs it (MultiKueue copies the Workload's priority, workload.go step 5), so two workers
    giving one tier different values would rank the same job differently: refused, naming them."""
    found: dict[str, tuple[str, Mapping[str, Any]]] = {}
    problems: list[str] = []
    for worker, description in descriptions.items():
        for tier in description.get("priorityTiers", []):
            known = found.setdefault(tier["name"], (worker, tier))
            if known[1]["value"] != tier["value"]:
                problems.append(
                    f"priority tier {tier['name']!r} is {known[1]['value']:g} on {known[0]} but {tier['value']:g} on {worker}"
                )
    if problems:
        raise FleetConflict("; ".join(problems) + ": give each tier the same value on every worker")
    return [tier for _, (_, tier) in sorted(found.items())]


def flavor_spec(gpu_model: str) -> dict[str, Any]:
    return {"nodeLabels": {GPU_MODEL_LABEL: gpu_model}}


def _resource_groups(quotas: Mapping[str, int], models: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "coveredResources": [GPU_RESOURCE],
            "flavors": [
                {"name": flavor_name(m), "resources": [{"name": GPU_RESOURCE, "nominalQuota": quotas.get(m, 0)}]}
                for m in models
            ],
        }
    ]


def cluster_queue_spec(team: ManagerTeam, models: list[str]) -> dict[str, Any]:
    return {
        "cohortName": COHORT,
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: team.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": dict(PREEMPTION),
        "flavorFungibility": dict(FLAVOR_FUNGIBILITY),
        "resourceGroups": _resource_groups(team.nominal, models),
        # On every flavor: no `onFlavors` (a per-flavor MultiKueue check leaves the queue inactive).
        "admissionChecksStrategy": {"admissionChecks": [{"name": ADMISSION_CHECK}]},
    }


def cohort_spec(descriptions: Mapping[str, Description]) -> dict[str, Any]:
    return {"resourceGroups": _resource_groups(shared(descriptions), gpu_models(descriptions))}


def multikueue_cluster_spec(worker: str) -> dict[str, Any]:
    return {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret_name(worker)}}}


def multikueue_config_spec(order: list[str]) -> dict[str, Any]:
    return {"clusters": [cluster_name(w) for w in order]}


def admission_check_spec() -> dict[str, Any]:
    return {
        "controllerName": multikueue.CONTROLLER_NAME,
        "parameters": {"apiGroup": KUEUE_API.split("/")[0], "kind": "MultiKueueConfig", "name": CONFIG_NAME},
    }

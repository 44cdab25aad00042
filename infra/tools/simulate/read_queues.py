"""Kueue's side of the model: ClusterQueues with their quotas and policies, the cohort, the teams'
LocalQueues, the priority tiers and the controller's waitForPodsReady settings."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import yaml

from components.checks import declared
from components.checks.declared import get, items, mapping
from components.checks.quantities import parse_quantity
from components.naming import local_queue_name
from components.pools import GPU_RESOURCE
from infra.tools.simulate.model import (
    FAIR_SHARING_STRATEGIES,
    LESS_THAN_INITIAL_SHARE,
    KUEUE_BACKOFF_BASE_S,
    KUEUE_BACKOFF_MAX_S,
    KUEUE_PODS_READY_TIMEOUT_S,
    KUEUE_REQUEUE_TIMESTAMP,
    QUEUEING_STRATEGIES,
    RECLAIM_WITHIN_COHORT,
    WITHIN_CLUSTER_QUEUE,
    KueueConfig,
    ModelError,
    QueueModel,
    Refused,
    Tier,
)
from infra.tools.simulate.objects import Objects, duration_s, flavor_pools, int_of, name_of, optional_int


def _gpu_quotas(spec: Any, owner: str, pools: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """pool -> {nominalQuota, borrowingLimit, lendingLimit} of nvidia.com/gpu; `pools` maps a
    flavor's name to its pool's."""
    out: dict[str, dict[str, Any]] = {}
    for group in items(get(spec, "resourceGroups")):
        covered = [str(r) for r in items(get(group, "coveredResources"))]
        if covered != [GPU_RESOURCE]:
            raise ModelError(
                f"{owner}: a resource group covers {covered}; the model accounts only {GPU_RESOURCE}, "
                "as Kueue is configured here (quotaCheckStrategy IgnoreUndeclared)"
            )
        for flavor in items(get(group, "flavors")):
            for quota in items(get(flavor, "resources")):
                if get(quota, "name") == GPU_RESOURCE:
                    out[pools.get(str(get(flavor, "name")), str(get(flavor, "name")))] = dict(mapping(quota))
    return out


def cluster_queues(objects: Objects, pools: Sequence[str]) -> tuple[QueueModel, ...]:
    queues = []
    for cq in objects.kueue("ClusterQueue"):
        name, spec = name_of(cq), get(cq, "spec")
        owner = f"ClusterQueue {name}"
        quotas = _gpu_quotas(spec, owner, flavor_pools(objects))
        within = str(get(spec, "preemption", "withinClusterQueue") or "Never")
        reclaim = str(get(spec, "preemption", "reclaimWithinCohort") or "Never")
        borrow = get(spec, "preemption", "borrowWithinCohort", "policy") or "Never"
        strategy = str(get(spec, "queueingStrategy") or "BestEffortFIFO")
        if within not in WITHIN_CLUSTER_QUEUE or reclaim not in RECLAIM_WITHIN_COHORT:
            raise ModelError(f"{owner}: preemption {within}/{reclaim} is not a Kueue policy")
        if borrow != "Never":
            raise Refused("borrow-within-cohort", f"{owner}: preemption.borrowWithinCohort {borrow} is not modeled (only Never)")
        if strategy not in QUEUEING_STRATEGIES:
            raise ModelError(f"{owner}: queueingStrategy {strategy} is not a Kueue strategy")
        cohort = get(spec, "cohortName")
        checks = [
            f"{get(check, 'name')} on {', '.join(str(f) for f in items(get(check, 'onFlavors'))) or 'every flavor'}"
            for check in items(get(spec, "admissionChecksStrategy", "admissionChecks"))
        ] + [str(name) for name in items(get(spec, "admissionChecks"))]
        queues.append(
            QueueModel(
                name=name,
                cohort=str(cohort) if cohort else None,
                nominal={p: int_of(quotas[p].get("nominalQuota", 0), f"{owner} {p} nominalQuota") for p in pools if p in quotas},
                borrowing_limit={
                    p: optional_int(quotas.get(p, {}).get("borrowingLimit"), f"{owner} {p} borrowingLimit") for p in pools
                },
                lending_limit={
                    p: optional_int(quotas.get(p, {}).get("lendingLimit"), f"{owner} {p} lendingLimit") for p in pools
                },
                within_cluster_queue=within,
                reclaim_within_cohort=reclaim,
                queueing_strategy=strategy,
                admission_checks=tuple(checks),
                fair_weight=_fair_weight(get(spec, "fairSharing", "weight"), owner),
            )
        )
    return tuple(sorted(queues, key=lambda q: q.name))


def _fair_weight(value: Any, owner: str) -> float:
    """spec.fairSharing.weight, a Kubernetes quantity ("2", "0.5", "500m"); 1 when unset
    (kubernetes-sigs/kueue@v0.19.2 pkg/cache/scheduler/fair_sharing.go, parseFairWeight, reads it
    as a resource.Quantity's approximate float)."""
    if value is None:
        return 1.0
    try:
        weight = float(parse_quantity(value))
    except ValueError:
        raise ModelError(f"{owner}: fairSharing.weight {value!r} is not a Kubernetes quantity") from None
    if not weight >= 0 or weight == float("inf"):
        raise ModelError(f"{owner}: fairSharing.weight {value!r} is not a weight")
    return weight


def cohort_quotas(objects: Objects, queues: Sequence[QueueModel], pools: Sequence[str]) -> dict[str, dict[str, int]]:
    """A cohort's own quota; one that only ClusterQueues name (an implicit cohort) holds none."""
    cohorts = {q.cohort: {p: 0 for p in pools} for q in queues if q.cohort}
    for cohort in objects.kueue("Cohort"):
        name, spec = name_of(cohort), get(cohort, "spec")
        if get(spec, "parentName"):
            raise Refused("hierarchical-cohorts", f"Cohort {name}: hierarchical cohorts (parentName) are not modeled")
        quotas = _gpu_quotas(spec, f"Cohort {name}", flavor_pools(objects))
        cohorts[name] = {p: int_of(quotas.get(p, {}).get("nominalQuota", 0), f"Cohort {name} {p} nominalQuota") for p in pools}
    return cohorts


def team_queues(objects: Objects, queues: Sequence[QueueModel]) -> dict[str, str]:
    """team -> ClusterQueue: a team's jobs name its LocalQueue, in its namespace
    (components.naming: the namespace and the queue are named after the team)."""
    names = {q.name for q in queues}
    teams = {}
    for lq in objects.kueue("LocalQueue"):
        team = str(get(lq, "metadata", "namespace"))
        if name_of(lq) != local_queue_name(team):
            continue
        target = str(get(lq, "spec", "clusterQueue"))
        if target not in names:
            raise ModelError(f"LocalQueue {team}/{name_of(lq)} points at ClusterQueue {target}, which is not declared")
        teams[team] = target
    return dict(sorted(teams.items()))


def priority_tiers(objects: Objects) -> dict[str, Tier]:
    pod_priorities = {name_of(r["inputs"]): int(get(r["inputs"], "value")) for r in objects.of(declared.PRIORITY_CLASS)}
    for record in objects.of(declared.PRIORITY_CLASS):
        # The model places pods by priority and never lets one evict another: what the
        # kube-scheduler does for pods whose PriorityClass is preemptionPolicy Never (Kubernetes
        # docs, "Pod Priority and Preemption", Non-preempting PriorityClass).
        policy = get(record["inputs"], "preemptionPolicy") or "PreemptLowerPriority"
        if policy != "Never":
            raise Refused(
                "kube-scheduler-preemption",
                f"PriorityClass {name_of(record['inputs'])}: preemptionPolicy {policy}: the kube-scheduler's preemption is not modeled",
            )
    tiers = {}
    for wpc in objects.kueue("WorkloadPriorityClass"):
        name = name_of(wpc)
        if name not in pod_priorities:
            raise ModelError(f"WorkloadPriorityClass {name} has no PriorityClass of the same name for its pods")
        tiers[name] = Tier(priority=int(get(wpc, "value")), pod_priority=pod_priorities[name])
    return tiers


def kueue_config(objects: Objects) -> KueueConfig:
    release = objects.release("kueue")
    text = get(release, "managerConfig", "controllerManagerConfigYaml") if release is not None else None
    config = yaml.safe_load(text) if isinstance(text, str) else {}
    config = config if isinstance(config, dict) else {}
    if get(config, "admissionFairSharing"):
        raise Refused("admission-fair-sharing", "Kueue configuration: admissionFairSharing is not modeled")
    ready = mapping(get(config, "waitForPodsReady"))
    strategy = mapping(get(ready, "requeuingStrategy"))
    timeout = duration_s(str(ready["timeout"])) if "timeout" in ready else KUEUE_PODS_READY_TIMEOUT_S
    return KueueConfig(
        pods_ready_timeout_s=timeout,
        recovery_timeout_s=duration_s(str(ready["recoveryTimeout"])) if "recoveryTimeout" in ready else timeout,
        backoff_base_s=float(strategy.get("backoffBaseSeconds", KUEUE_BACKOFF_BASE_S)),
        backoff_max_s=float(strategy.get("backoffMaxSeconds", KUEUE_BACKOFF_MAX_S)),
        requeue_timestamp=str(strategy.get("timestamp", KUEUE_REQUEUE_TIMESTAMP)),
        fair_sharing=_fair_sharing(config),
    )


def _fair_sharing(config: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The preemption strategies when the configuration has a fairSharing section (present, even
    empty, turns it on), in Kueue's default order when it lists none."""
    if config.get("fairSharing") is None:
        return None
    listed = tuple(str(s) for s in items(get(config, "fairSharing", "preemptionStrategies")))
    if not listed:
        return FAIR_SHARING_STRATEGIES
    # Kueue's validation (pkg/config/validation.go) accepts one strategy, or the two in this order.
    if listed not in ((FAIR_SHARING_STRATEGIES[0],), (LESS_THAN_INITIAL_SHARE,), FAIR_SHARING_STRATEGIES):
        raise ModelError(f"Kueue configuration: fairSharing.preemptionStrategies {list(listed)} is not a combination Kueue accepts")
    return listed

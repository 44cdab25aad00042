"""The simulation model of a stack, read from what the stack deploys (its synthesized objects).

Nothing here reads the spec: pools come from the node groups (EKS) or node pools (GKE) in
resources.json, matched to Kueue's ResourceFlavors by their node labels as the scheduler would;
queues, quotas, cohort, preemption policies and priority tiers from the Kueue objects and
PriorityClasses in manifests/; the autoscaler's timings from its Helm release (EKS) or the GKE
cluster's autoscaling profile; Kueue's waitForPodsReady from the configuration its release
carries. A change in a pull request is therefore simulated exactly as it would be deployed.

Every figure that no object declares is a parameter below, with its default and where the
default comes from; docs/capacity-planning.md lists them all.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import yaml

from components.checks import rules
from components.checks.declared import get, items, mapping
from components.checks.fit import ASG_TAG, HELM_RELEASE, KUEUE_TYPE_PREFIX
from components.facts import aws as aws_facts
from components.facts import catalog
from components.naming import local_queue_name
from components.pools import DEVICE_PLUGIN_CONFIG_LABEL, GPU_RESOURCE

# --- parameters no object declares ------------------------------------------------------------

# Seconds from the autoscaler's scale-up decision to a node whose GPUs a pod can use, per cloud
# and instance family. Planning figures, not measurements: the autoscaler reacts within 30 s on
# clusters under 100 nodes (cluster-autoscaler FAQ, "What are the Service Level Objectives"),
# then the instance boots and joins (minutes; longer for the 8-GPU shapes with their large
# images, EFA or GPUDirect setup) and GKE installs the driver, and a GPU node can take up to 15
# minutes to report its GPUs allocatable (cluster-autoscaler utils/gpu/gpu.go). Measure your own
# (a node's creationTimestamp to its first allocatable nvidia.com/gpu) and pass
# `--scale-up-s POOL=SECONDS`.
SCALE_UP_S: dict[tuple[str, str], float] = {
    ("aws", "g4dn"): 240,
    ("aws", "g5"): 240,
    ("aws", "g6"): 240,
    ("aws", "g6e"): 240,
    ("aws", "p4d"): 600,
    ("aws", "p4de"): 600,
    ("aws", "p5"): 600,
    ("aws", "p5e"): 600,
    ("aws", "p5en"): 600,
    ("aws", "p6"): 600,
    ("gcp", "g2"): 360,
    ("gcp", "n1"): 360,
    ("gcp", "a2"): 420,
    ("gcp", "a3"): 600,
    ("gcp", "a4"): 600,
}

# Spot nodes lost per node and day, a Poisson process per pool. AWS publishes only bands of the
# share of Spot capacity reclaimed in the trailing month (Spot Instance Advisor, "frequency of
# interruption": <5%, 5-10%, 10-15%, 15-20%, >20%), and GPU types mostly sit in the top one;
# Google publishes no rate for Spot VMs. The default is the top AWS band's floor, 20% a month,
# for both clouds: pass `--spot-rate POOL=PER_NODE_DAY` with your own history.
SPOT_INTERRUPTIONS_PER_NODE_DAY = 0.2 / 30

# The cluster autoscaler's defaults where a deployment does not set the flag (cluster-autoscaler
# FAQ, "What are the parameters to CA?", and the chart's values): a node is removed after 10
# minutes unneeded, not within 10 minutes of a scale-up, and pods below priority -10 never cause
# a scale-up and never keep a node.
AUTOSCALER_UNNEEDED_S = 600.0
AUTOSCALER_DELAY_AFTER_ADD_S = 600.0

# GKE runs its own autoscaler and does not publish these flags; its profiles are described only
# qualitatively ("OPTIMIZE_UTILIZATION ... removes nodes faster", GKE cluster autoscaler docs).
# The upstream defaults stand in for both profiles, so idle time on GKE is an upper bound. Under
# OPTIMIZE_UTILIZATION GKE's scheduler prefers the most allocated node (bin packing); elsewhere
# the default kube-scheduler scores the least allocated node highest (NodeResourcesFit,
# LeastAllocated), which for GPU pods that request CPU and memory in proportion to their GPU
# slots (gpu-platform job) spreads them over nodes.
GKE_PACKING_PROFILE = "OPTIMIZE_UTILIZATION"

# Kueue 0.19 Configuration defaults (apis/config/v1beta2/defaults.go): waitForPodsReady is always
# on, with a 30 minute timeout for an admitted workload to have all pods ready, the same for a
# running workload whose pods are lost (recoveryTimeout), and requeuing after 60 s doubling up
# to 3600 s, ordered by the eviction time.
KUEUE_PODS_READY_TIMEOUT_S = 1800.0
KUEUE_BACKOFF_BASE_S = 60.0
KUEUE_BACKOFF_MAX_S = 3600.0
KUEUE_REQUEUE_TIMESTAMP = "Eviction"

# Preemption policies Kueue accepts (apis/kueue/v1beta2 clusterqueue_types.go) and the ones this
# model implements: every value of withinClusterQueue and reclaimWithinCohort; borrowWithinCohort
# only `Never` (the default, and what the stacks deploy).
WITHIN_CLUSTER_QUEUE = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM_WITHIN_COHORT = ("Never", "LowerPriority", "Any")
QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


class ModelError(Exception):
    """The synthesized objects hold something this model cannot simulate faithfully."""


# --- the model ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolModel:
    name: str
    cloud: str
    # None for nodes of an existing cluster.
    instance_type: str | None
    gpu_model: str
    gpus_per_node: int
    # nvidia.com/gpu one node advertises: GPUs x sharing replicas or MIG instances.
    slots_per_node: int
    # none: one job per node (whole GPUs); shared: time-slicing or MPS; mig: MIG instances.
    # Shared and MIG nodes take jobs slot by slot.
    sharing: str
    # The most slots one pod may request on a node (1 where shared GPUs refuse larger requests).
    max_pod_slots: int
    min_nodes: int
    max_nodes: int
    spot: bool
    # Catalog estimate (catalog.PRICE_NOTE); None for nodes of an existing cluster.
    usd_per_node_hour: float | None
    scale_up_s: float
    interruptions_per_node_day: float
    # False on existing clusters: nodes are what they are.
    autoscaled: bool

    @property
    def whole_nodes(self) -> bool:
        return self.sharing == "none"

    @property
    def max_slots(self) -> int:
        return self.max_nodes * self.slots_per_node


@dataclass(frozen=True)
class QueueModel:
    """A Kueue ClusterQueue: GPU slot quotas per flavor (pool) and its policies. A flavor the
    queue does not list is absent from `nominal`: Kueue admits nothing there, not even borrowed."""

    name: str
    cohort: str | None
    nominal: Mapping[str, int]
    borrowing_limit: Mapping[str, int | None]
    lending_limit: Mapping[str, int | None]
    within_cluster_queue: str
    reclaim_within_cohort: str
    queueing_strategy: str
    # Admission checks (e.g. GKE queued provisioning) are not simulated: a job is admitted on
    # quota and its nodes come from the autoscaler's scale-up. Listed in summary.json.
    admission_checks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tier:
    # Kueue's WorkloadPriorityClass value: admission order and preemption.
    priority: int
    # The PriorityClass value of the pods: the autoscaler's expendable cutoff and pod order.
    pod_priority: int


@dataclass(frozen=True)
class Autoscaler:
    unneeded_s: float
    delay_after_add_s: float
    # Pods with a lower priority never trigger a scale-up and never keep a node up.
    expendable_below: int
    pack_most_allocated: bool
    source: str


@dataclass(frozen=True)
class KueueConfig:
    pods_ready_timeout_s: float
    recovery_timeout_s: float
    backoff_base_s: float
    backoff_max_s: float
    # Eviction: a workload requeued after a timeout goes behind the ones queued meanwhile.
    requeue_timestamp: str


@dataclass(frozen=True)
class StackModel:
    stack: str
    cloud: str
    pools: tuple[PoolModel, ...]
    queues: tuple[QueueModel, ...]
    # Quota a cohort holds itself (its Cohort object), per pool.
    cohorts: Mapping[str, Mapping[str, int]]
    # team -> ClusterQueue name (the team's LocalQueue points at it).
    teams: Mapping[str, str]
    tiers: Mapping[str, Tier]
    # None on existing clusters: no node is ever added or removed.
    autoscaler: Autoscaler | None
    kueue: KueueConfig
    # Where each figure not read from an object came from, for summary.json.
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def pool(self, name: str) -> PoolModel:
        return next(p for p in self.pools if p.name == name)

    def queue(self, name: str) -> QueueModel:
        return next(q for q in self.queues if q.name == name)


@dataclass(frozen=True)
class Overrides:
    """Per-pool figures given on the command line instead of the defaults above."""

    spot_rates: Mapping[str, float] = field(default_factory=dict)
    scale_up_s: Mapping[str, float] = field(default_factory=dict)


# --- reading the objects ------------------------------------------------------------------------


def duration_s(text: str) -> float:
    """Seconds of a Go duration string (`15m`, `1h30m`, `90s`), as the autoscaler and Kueue take them."""
    text = text.strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise ModelError(f"not a duration: {text!r}")
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit():
        raise ModelError(f"{what}: expected a whole number, got {value!r}")
    return int(value)


def _optional_int(value: Any, what: str) -> int | None:
    return None if value is None else _int(value, what)


class _Objects:
    """The synthesized resources, by type."""

    def __init__(self, resources: Sequence[Mapping[str, Any]]) -> None:
        self.by_type: dict[str, list[Mapping[str, Any]]] = {}
        for record in resources:
            self.by_type.setdefault(str(record["type"]), []).append(record)

    def of(self, type_token: str) -> list[Mapping[str, Any]]:
        return self.by_type.get(type_token, [])

    def kueue(self, kind: str) -> list[Mapping[str, Any]]:
        return [r["inputs"] for r in self.of(f"{KUEUE_TYPE_PREFIX}{kind}")]

    def release(self, chart: str) -> Mapping[str, Any] | None:
        """The values of the Helm release of `chart` (`oci://.../kueue` and `kueue` alike)."""
        for record in self.of(HELM_RELEASE):
            if str(get(record["inputs"], "chart")).rsplit("/", 1)[-1] == chart:
                return mapping(get(record["inputs"], "values"))
        return None


def _name(obj: Mapping[str, Any]) -> str:
    return str(get(obj, "metadata", "name"))


def _gpu_quotas(spec: Any, owner: str) -> dict[str, dict[str, Any]]:
    """flavor -> {nominalQuota, borrowingLimit, lendingLimit} of nvidia.com/gpu."""
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
                    out[str(get(flavor, "name"))] = dict(mapping(quota))
    return out


def _queues(objects: _Objects, pools: Sequence[str]) -> tuple[QueueModel, ...]:
    queues = []
    for cq in objects.kueue("ClusterQueue"):
        name, spec = _name(cq), get(cq, "spec")
        owner = f"ClusterQueue {name}"
        quotas = _gpu_quotas(spec, owner)
        within = str(get(spec, "preemption", "withinClusterQueue") or "Never")
        reclaim = str(get(spec, "preemption", "reclaimWithinCohort") or "Never")
        borrow = get(spec, "preemption", "borrowWithinCohort", "policy") or "Never"
        strategy = str(get(spec, "queueingStrategy") or "BestEffortFIFO")
        if within not in WITHIN_CLUSTER_QUEUE or reclaim not in RECLAIM_WITHIN_COHORT:
            raise ModelError(f"{owner}: preemption {within}/{reclaim} is not a Kueue policy")
        if borrow != "Never":
            raise ModelError(f"{owner}: preemption.borrowWithinCohort {borrow} is not modeled (only Never)")
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
                nominal={p: _int(quotas[p].get("nominalQuota", 0), f"{owner} {p} nominalQuota") for p in pools if p in quotas},
                borrowing_limit={
                    p: _optional_int(quotas.get(p, {}).get("borrowingLimit"), f"{owner} {p} borrowingLimit") for p in pools
                },
                lending_limit={
                    p: _optional_int(quotas.get(p, {}).get("lendingLimit"), f"{owner} {p} lendingLimit") for p in pools
                },
                within_cluster_queue=within,
                reclaim_within_cohort=reclaim,
                queueing_strategy=strategy,
                admission_checks=tuple(checks),
            )
        )
    return tuple(sorted(queues, key=lambda q: q.name))


def _cohorts(objects: _Objects, queues: Sequence[QueueModel], pools: Sequence[str]) -> dict[str, dict[str, int]]:
    """A cohort's own quota; one that only ClusterQueues name (an implicit cohort) holds none."""
    cohorts = {q.cohort: {p: 0 for p in pools} for q in queues if q.cohort}
    for cohort in objects.kueue("Cohort"):
        name, spec = _name(cohort), get(cohort, "spec")
        if get(spec, "parentName"):
            raise ModelError(f"Cohort {name}: hierarchical cohorts (parentName) are not modeled")
        quotas = _gpu_quotas(spec, f"Cohort {name}")
        cohorts[name] = {p: _int(quotas.get(p, {}).get("nominalQuota", 0), f"Cohort {name} {p} nominalQuota") for p in pools}
    return cohorts


def _teams(objects: _Objects, queues: Sequence[QueueModel]) -> dict[str, str]:
    """team -> ClusterQueue: a team's jobs name its LocalQueue, in its namespace
    (components.naming: the namespace and the queue are named after the team)."""
    names = {q.name for q in queues}
    teams = {}
    for lq in objects.kueue("LocalQueue"):
        team = str(get(lq, "metadata", "namespace"))
        if _name(lq) != local_queue_name(team):
            continue
        target = str(get(lq, "spec", "clusterQueue"))
        if target not in names:
            raise ModelError(f"LocalQueue {team}/{_name(lq)} points at ClusterQueue {target}, which is not declared")
        teams[team] = target
    return dict(sorted(teams.items()))


def _tiers(objects: _Objects) -> dict[str, Tier]:
    pod_priorities = {_name(r["inputs"]): int(get(r["inputs"], "value")) for r in objects.of(rules.PRIORITY_CLASS)}
    tiers = {}
    for wpc in objects.kueue("WorkloadPriorityClass"):
        name = _name(wpc)
        if name not in pod_priorities:
            raise ModelError(f"WorkloadPriorityClass {name} has no PriorityClass of the same name for its pods")
        tiers[name] = Tier(priority=int(get(wpc, "value")), pod_priority=pod_priorities[name])
    return tiers


def _kueue_config(objects: _Objects) -> KueueConfig:
    release = objects.release("kueue")
    text = get(release, "managerConfig", "controllerManagerConfigYaml") if release is not None else None
    config = yaml.safe_load(text) if isinstance(text, str) else {}
    config = config if isinstance(config, dict) else {}
    if get(config, "fairSharing") or get(config, "admissionFairSharing"):
        raise ModelError("Kueue configuration: fair sharing is not modeled (classic preemption only)")
    ready = mapping(get(config, "waitForPodsReady"))
    strategy = mapping(get(ready, "requeuingStrategy"))
    timeout = duration_s(str(ready["timeout"])) if "timeout" in ready else KUEUE_PODS_READY_TIMEOUT_S
    return KueueConfig(
        pods_ready_timeout_s=timeout,
        recovery_timeout_s=duration_s(str(ready["recoveryTimeout"])) if "recoveryTimeout" in ready else timeout,
        backoff_base_s=float(strategy.get("backoffBaseSeconds", KUEUE_BACKOFF_BASE_S)),
        backoff_max_s=float(strategy.get("backoffMaxSeconds", KUEUE_BACKOFF_MAX_S)),
        requeue_timestamp=str(strategy.get("timestamp", KUEUE_REQUEUE_TIMESTAMP)),
    )


def _aws_autoscaler(objects: _Objects) -> Autoscaler:
    values = objects.release("cluster-autoscaler")
    if values is None:
        raise ModelError("no cluster-autoscaler release: the AWS node groups would never scale")
    args = mapping(get(values, "extraArgs"))

    def flag(name: str, default: float) -> float:
        return duration_s(str(args[name])) if name in args else default

    return Autoscaler(
        unneeded_s=flag("scale-down-unneeded-time", AUTOSCALER_UNNEEDED_S),
        delay_after_add_s=flag("scale-down-delay-after-add", AUTOSCALER_DELAY_AFTER_ADD_S),
        expendable_below=int(args.get("expendable-pods-priority-cutoff", rules.AUTOSCALER_PRIORITY_CUTOFF)),
        pack_most_allocated=False,
        source="cluster-autoscaler release extraArgs (upstream defaults where unset)",
    )


def _gke_autoscaler(objects: _Objects) -> Autoscaler:
    clusters = objects.of(rules.GKE_CLUSTER)
    profile = get(clusters[0]["inputs"], "clusterAutoscaling", "autoscalingProfile") if clusters else None
    return Autoscaler(
        unneeded_s=AUTOSCALER_UNNEEDED_S,
        delay_after_add_s=AUTOSCALER_DELAY_AFTER_ADD_S,
        expendable_below=rules.AUTOSCALER_PRIORITY_CUTOFF,
        pack_most_allocated=profile == GKE_PACKING_PROFILE,
        source=f"GKE autoscaling profile {profile or 'BALANCED'} (upstream autoscaler defaults)",
    )


# --- pools ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Nodes:
    """What one node group or node pool declares."""

    instance_type: str | None
    gpus_per_node: int
    slots_per_node: int
    sharing: str
    max_pod_slots: int
    min_nodes: int
    max_nodes: int
    spot: bool


def _plugin_config(objects: _Objects, labels: Mapping[str, str]) -> dict[str, Any] | None:
    """The NVIDIA device plugin config a node's label selects (k8s-device-plugin README,
    `config.map`); None when the stack installs no plugin (the node's own advertises)."""
    values = objects.release("nvidia-device-plugin")
    if values is None:
        return None
    name = labels.get(DEVICE_PLUGIN_CONFIG_LABEL) or get(values, "config", "default")
    text = get(values, "config", "map", str(name))
    loaded = yaml.safe_load(text) if isinstance(text, str) else None
    return loaded if isinstance(loaded, dict) else {}


def _plugin_sharing(config: Mapping[str, Any], slots: int) -> tuple[str, int]:
    """(sharing, most slots per pod) under the NVIDIA device plugin's config."""
    if get(config, "flags", "migStrategy") == "single":
        return "mig", slots
    for strategy in ("timeSlicing", "mps"):
        sharing = get(config, "sharing", strategy)
        if sharing is not None:
            # failRequestsGreaterThanOne: the plugin refuses a pod more than one replica.
            return "shared", 1 if get(sharing, "failRequestsGreaterThanOne") is True else slots
    return "none", slots


def _shape(instance_type: str, what: str) -> catalog.InstanceType:
    shape = catalog.INSTANCE_TYPES.get(instance_type)
    if shape is None:
        raise ModelError(f"{what}: instance type {instance_type} is not in the catalog")
    return shape


def _aws_nodes(objects: _Objects, record: Mapping[str, Any]) -> _Nodes:
    props = record["inputs"]
    what = f"node group {get(props, 'nodeGroupName') or record['name']}"
    types = [str(t) for t in items(get(props, "instanceTypes"))]
    if len(types) != 1:
        raise ModelError(f"{what}: one instance type expected, got {types}")
    shape = _shape(types[0], what)
    key = f"{record['type']}::{record['name']}"
    template_gpus = [
        get(tag["inputs"], "tag", "value")
        for tag in objects.of(ASG_TAG)
        if key in tag["options"]["dependsOn"]
        and get(tag["inputs"], "tag", "key") == f"{aws_facts.NODE_TEMPLATE_PREFIX}resources/{GPU_RESOURCE}"
    ]
    if len(template_gpus) != 1:
        raise ModelError(f"{what}: no ASG tag {aws_facts.NODE_TEMPLATE_PREFIX}resources/{GPU_RESOURCE}; its GPU slots are unknown")
    # The autoscaler sizes scale-ups by the template's slots (cluster-autoscaler
    # cloudprovider/aws/aws_manager.go, buildNodeFromTemplate); the fit proof holds the node's own equal.
    slots = _int(template_gpus[0], f"{what} GPU template tag")
    config = _plugin_config(objects, {str(k): str(v) for k, v in mapping(get(props, "labels")).items()})
    sharing, max_pod = _plugin_sharing(config or {}, slots)
    return _Nodes(
        instance_type=shape.name,
        gpus_per_node=shape.gpus_per_node,
        slots_per_node=slots,
        sharing=sharing,
        max_pod_slots=max_pod,
        min_nodes=_int(get(props, "scalingConfig", "minSize"), f"{what} minSize"),
        max_nodes=_int(get(props, "scalingConfig", "maxSize"), f"{what} maxSize"),
        spot=get(props, "capacityType") == "SPOT",
    )


def _gke_nodes(objects: _Objects, record: Mapping[str, Any]) -> _Nodes:
    props = record["inputs"]
    what = f"node pool {get(props, 'name') or record['name']}"
    node_config = mapping(get(props, "nodeConfig"))
    shape = _shape(str(get(node_config, "machineType")), what)
    accelerators = items(get(node_config, "guestAccelerators"))
    physical = sum(_int(get(a, "count"), f"{what} accelerator count") for a in accelerators)
    partition = next((str(get(a, "gpuPartitionSize")) for a in accelerators if get(a, "gpuPartitionSize")), None)
    profiles = catalog.GPU_MODELS[shape.gpu].mig_profiles
    if partition is not None and partition not in profiles:
        raise ModelError(f"{what}: MIG partition {partition} is not a {shape.gpu} profile")
    instances = profiles[partition] if partition is not None else 1
    config = _plugin_config(objects, {str(k): str(v) for k, v in mapping(get(node_config, "labels")).items()})
    if config is not None:
        replicas = [
            _int(get(r, "replicas"), f"{what} replicas")
            for strategy in ("timeSlicing", "mps")
            for r in items(get(config, "sharing", strategy, "resources"))
            if get(r, "name") == GPU_RESOURCE
        ]
        single_mig = get(config, "flags", "migStrategy") == "single"
        slots = physical * (instances if single_mig else replicas[0] if replicas else 1)
        sharing, max_pod = _plugin_sharing(config, slots)
    else:
        # GKE's own plugin: clients per GPU with sharing (a pod may ask for one), instances per
        # GPU with MIG partitions (GKE GPU sharing and MIG docs).
        clients = [_int(c, f"{what} clients") for a in accelerators if (c := get(a, "gpuSharingConfig", "maxSharedClientsPerGpu"))]
        if clients:
            slots, sharing, max_pod = physical * max(clients), "shared", 1
        elif partition is not None:
            slots, sharing = physical * instances, "mig"
            max_pod = slots
        else:
            slots, sharing, max_pod = physical, "none", physical
    autoscaling = mapping(get(props, "autoscaling"))
    zones = len(items(get(props, "nodeLocations"))) or 1
    if "totalMaxNodeCount" in autoscaling:
        low, high = autoscaling.get("totalMinNodeCount", 0), autoscaling["totalMaxNodeCount"]
    elif "maxNodeCount" in autoscaling:
        low, high = _int(autoscaling.get("minNodeCount", 0), what) * zones, _int(autoscaling["maxNodeCount"], what) * zones
    else:
        raise ModelError(f"{what}: no autoscaling limits; fixed-size GPU node pools are not modeled")
    return _Nodes(
        instance_type=shape.name,
        gpus_per_node=physical,
        slots_per_node=slots,
        sharing=sharing,
        max_pod_slots=max_pod,
        min_nodes=_int(low, f"{what} minimum"),
        max_nodes=_int(high, f"{what} maximum"),
        spot=get(node_config, "spot") is True or get(node_config, "preemptible") is True,
    )


def _existing_nodes(objects: _Objects, outputs: Mapping[str, Any], pool: str) -> _Nodes:
    """Nodes of an existing cluster: only the facts the stack declares (its gpuPools output);
    they neither scale nor get interrupted."""
    declared = mapping(get(outputs, "gpuPools", pool))
    if not declared:
        raise ModelError(f"pool {pool}: no gpuPools output declares its nodes")
    gpus = _int(declared.get("gpusPerNode"), f"pool {pool} gpusPerNode")
    slots = _int(declared.get("gpuSlotsPerNode"), f"pool {pool} gpuSlotsPerNode")
    labels = {str(k): str(v) for k, v in mapping(get(outputs, "devicePluginLabels", pool)).items()}
    config = _plugin_config(objects, labels)
    sharing, max_pod = _plugin_sharing(config or {}, slots)
    nodes = _int(declared.get("maxNodes"), f"pool {pool} maxNodes")
    return _Nodes(None, gpus, slots, sharing, max_pod, nodes, nodes, False)


def _matches(labels: Any, selector: Mapping[str, Any]) -> bool:
    have = mapping(labels)
    return all(str(have.get(k)) == str(v) for k, v in selector.items())


def _pools(
    objects: _Objects, outputs: Mapping[str, Any], cloud: str, overrides: Overrides
) -> tuple[PoolModel, ...]:
    pools = []
    for flavor in sorted(objects.kueue("ResourceFlavor"), key=_name):
        name = _name(flavor)
        selector = mapping(get(flavor, "spec", "nodeLabels"))
        if cloud == "aws":
            found = [r for r in objects.of(rules.EKS_NODE_GROUP) if _matches(get(r["inputs"], "labels"), selector)]
        elif cloud == "gcp":
            found = [r for r in objects.of(rules.GKE_NODE_POOL) if _matches(get(r["inputs"], "nodeConfig", "labels"), selector)]
        else:
            found = []
        if cloud in ("aws", "gcp") and len(found) != 1:
            raise ModelError(f"ResourceFlavor {name}: {len(found)} node groups carry its node labels {dict(selector)}; expected 1")
        if cloud == "aws":
            nodes = _aws_nodes(objects, found[0])
        elif cloud == "gcp":
            nodes = _gke_nodes(objects, found[0])
        else:
            nodes = _existing_nodes(objects, outputs, name)
        shape = catalog.INSTANCE_TYPES[nodes.instance_type] if nodes.instance_type else None
        gpu_model = shape.gpu if shape else str(get(outputs, "gpuPools", name, "gpuModel"))
        autoscaled = shape is not None
        if name in overrides.scale_up_s:
            scale_up = overrides.scale_up_s[name]
        elif shape is not None:
            family = catalog.family(shape.name)
            if (cloud, family) not in SCALE_UP_S:
                raise ModelError(f"pool {name}: no scale-up figure for {cloud} family {family}; pass --scale-up-s {name}=SECONDS")
            scale_up = SCALE_UP_S[(cloud, family)]
        else:
            scale_up = 0.0
        pools.append(
            PoolModel(
                name=name,
                cloud=cloud,
                instance_type=nodes.instance_type,
                gpu_model=gpu_model,
                gpus_per_node=nodes.gpus_per_node,
                slots_per_node=nodes.slots_per_node,
                sharing=nodes.sharing,
                max_pod_slots=nodes.max_pod_slots,
                min_nodes=nodes.min_nodes,
                max_nodes=nodes.max_nodes,
                spot=nodes.spot,
                # N1 machines are priced with their smallest GPU count; more GPUs cost their share.
                usd_per_node_hour=shape.usd_per_hour * nodes.gpus_per_node / shape.gpus_per_node if shape else None,
                scale_up_s=scale_up,
                interruptions_per_node_day=(
                    overrides.spot_rates.get(name, SPOT_INTERRUPTIONS_PER_NODE_DAY) if nodes.spot else 0.0
                ),
                autoscaled=autoscaled,
            )
        )
    return tuple(pools)


def build(
    stack: str, resources: Sequence[Mapping[str, Any]], outputs: Mapping[str, Any], overrides: Overrides | None = None
) -> StackModel:
    """The model of what `resources` (a synthesis's records) deploy. Raises ModelError."""
    overrides = overrides or Overrides()
    objects = _Objects(resources)
    cloud = str(outputs.get("cloud", ""))
    if cloud not in ("aws", "gcp", "existing"):
        raise ModelError(f"outputs.cloud: expected aws, gcp or existing, got {cloud!r}")
    pools = _pools(objects, outputs, cloud, overrides)
    names = [p.name for p in pools]
    queues = _queues(objects, names)
    autoscaler = _aws_autoscaler(objects) if cloud == "aws" else _gke_autoscaler(objects) if cloud == "gcp" else None
    kueue = _kueue_config(objects)
    parameters: dict[str, Any] = {
        "scale_up_s": {p.name: p.scale_up_s for p in pools if p.autoscaled},
        "spot_interruptions_per_node_day": {p.name: p.interruptions_per_node_day for p in pools if p.spot},
        "autoscaler": None
        if autoscaler is None
        else {
            "scale_down_unneeded_s": autoscaler.unneeded_s,
            "scale_down_delay_after_add_s": autoscaler.delay_after_add_s,
            "expendable_pods_priority_cutoff": autoscaler.expendable_below,
            "packing": "most allocated" if autoscaler.pack_most_allocated else "least allocated",
            "source": autoscaler.source,
        },
        "admission_checks_not_simulated": {q.name: list(q.admission_checks) for q in queues if q.admission_checks},
        "kueue": {
            "pods_ready_timeout_s": kueue.pods_ready_timeout_s,
            "recovery_timeout_s": kueue.recovery_timeout_s,
            "requeue_backoff_base_s": kueue.backoff_base_s,
            "requeue_backoff_max_s": kueue.backoff_max_s,
            "requeue_timestamp": kueue.requeue_timestamp,
        },
    }
    return StackModel(
        stack=stack,
        cloud=cloud,
        pools=pools,
        queues=queues,
        cohorts=_cohorts(objects, queues, names),
        teams=_teams(objects, queues),
        tiers=_tiers(objects),
        autoscaler=autoscaler,
        kueue=kueue,
        parameters=parameters,
    )


def spot_rate_per_s(pool: PoolModel) -> float:
    """The pool's interruption rate per node-second (0 when not spot)."""
    return pool.interruptions_per_node_day / 86400.0


def backoff_s(kueue: KueueConfig, requeues: int) -> float:
    """Kueue's requeue delay after the n-th waitForPodsReady eviction: base x 2^(n-1), capped."""
    # The exponent is capped: past it the maximum has long been reached (and 2**n would overflow).
    return min(kueue.backoff_base_s * math.pow(2, min(requeues - 1, 64)), kueue.backoff_max_s)

"""The fit proof (`job-fits-pool`): every job `gpu-platform job` accepts can start.

For every pool, the largest job the renderer accepts there (all its nodes, every GPU slot of a
node) and the smallest (one node, one slot) are rendered with the real renderer, for every team,
and held against what the declared resources say, read the way their consumers read them:

- Kueue: the team's LocalQueue and ClusterQueue, a flavor of it whose node labels agree with the
  job's node selector (Kueue only compares the keys its flavors use), the resources Kueue
  accounts (quotaCheckStrategy of the controller configuration in the kueue release) covered,
  and nominal plus borrowable quota in the cohort at least the job's total. The admitted pods
  carry the flavor's labels and tolerations, as Kueue injects them.
- The nodes of the pool once scaled up from zero. AWS: the autoscaler's template node (instance
  type, then the ASG's node-template tags: resources, labels, taints; cluster-autoscaler
  cloudprovider/aws/aws_manager.go buildNodeFromTemplate) and the real node (node group labels
  and taints, the launch template's EFA interfaces, GPU slots from the device plugin config its
  label selects, CPU and memory after the kubelet's reserved share and the DaemonSets that run
  there). GKE: the node pool's machine type, accelerators and sharing, labels and taints, from
  which GKE builds both the autoscaler's template and the node (cluster-autoscaler
  cloudprovider/gce/templates.go BuildNodeFromTemplate). Existing clusters: the pool facts the
  stack declares (node selector, GPUs per node, maximum nodes); their CPU and memory are unknown.

Flex-start and queued GKE pools hold no standing nodes: their capacity is obtainable on request,
when GKE's Dynamic Workload Scheduler grants it, and the proof says so. A queued pool's nodes come
only through ProvisioningRequests, with GKE's `cloud.google.com/gke-queued` taint on them: its jobs
fit only through a Kueue admission check of class `queued-provisioning.gke.io` on their flavor,
and with a toleration of that taint.

Nothing here reads the spec's derivations of those resources (only the pool list and the job
renderer come from the spec), so a derivation bug in a wing or the layer shows up as a misfit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import yaml

from components import node_resources
from components.checks import quantities
from components.checks.declared import UNKNOWN, Resource, get, items, mapping, node_group_instance_types
from components.facts import aws as aws_facts
from components.facts import catalog
from components.jobs import renderer
from components.kubernetes.queues import (
    GKE_QUEUED_TAINT_KEY,
    PROVISIONING_REQUEST_CONTROLLER,
    QUEUE_NAME_LABEL,
    QUEUED_PROVISIONING_CLASS,
    queue_plan,
)
from components.kubernetes.tiers import priority_tiers
from components.node_resources import DAEMONSET_REQUESTS, EKS_ADDON_DAEMONSETS, Requests
from components.pools import DEVICE_PLUGIN_CONFIG_LABEL, GPU_RESOURCE, Pool, derive_pools
from components.spec import PlatformSpec

EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
ASG_TAG = "aws:autoscaling/tag:Tag"
EKS_ADDON = "aws:eks/addon:Addon"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
KUEUE_TYPE_PREFIX = "kubernetes:kueue.x-k8s.io/v1beta2:"

TEMPLATE_LABEL_PREFIX = f"{aws_facts.NODE_TEMPLATE_PREFIX}label/"
TEMPLATE_TAINT_PREFIX = f"{aws_facts.NODE_TEMPLATE_PREFIX}taint/"
TEMPLATE_RESOURCE_PREFIX = f"{aws_facts.NODE_TEMPLATE_PREFIX}resources/"
# EKS and GKE spell taint effects in upper snake case; Kubernetes in camel case.
TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}
# Kueue 0.19 Configuration resources.quotaCheckStrategy: account only covered resources.
IGNORE_UNDECLARED = "IgnoreUndeclared"
# A reference and trainer arguments the proof's jobs render with: the smallest valid training run.
PROOF_IMAGE = "registry.invalid/gpu-platform/fit-proof:0"
PROOF_PRESET = "tiny"
PROOF_SEQ_LEN = 128
EFA_INTERFACE_TYPES = ("efa", "efa-only")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


@dataclass(frozen=True)
class NodeView:
    """One view of a scaled-from-zero node: what its consumer sees. None: unknown, not judged."""

    what: str
    resource: str | None
    labels: Mapping[str, str] | None
    taints: list[Taint] | None
    extended: Mapping[str, int] | None
    # CPU and memory left to jobs, with the DaemonSets counted; None where unknown.
    left: Requests | None
    daemonsets: tuple[str, ...]
    max_nodes: int | None
    # Where each extended resource comes from, for messages; `{name}` in the pattern is the resource.
    sources: Mapping[str, str] = field(default_factory=dict)
    source_pattern: str = ""
    # Nodes come only through ProvisioningRequests (GKE queued provisioning).
    queued: bool = False

    def source(self, name: str) -> str:
        return self.sources.get(name) or self.source_pattern.format(name=name)


@dataclass(frozen=True)
class PodShape:
    """What one pod of a rendered job asks of a node, and how many of them there are."""

    pods: int
    one_per_node: bool
    extended: dict[str, int]
    requests: Requests | None
    node_selector: dict[str, str]
    tolerations: list[Mapping[str, Any]]
    namespace: str
    queue: str

    def admitted(self, flavor: Mapping[str, Any]) -> PodShape:
        """The pod as Kueue admits it on `flavor`: the flavor's labels and tolerations added."""
        return PodShape(
            pods=self.pods,
            one_per_node=self.one_per_node,
            extended=self.extended,
            requests=self.requests,
            node_selector={**self.node_selector, **_str_map(get(flavor, "nodeLabels"))},
            tolerations=self.tolerations + [t for t in items(get(flavor, "tolerations")) if isinstance(t, Mapping)],
            namespace=self.namespace,
            queue=self.queue,
        )


# --- reading engine-shaped values --------------------------------------------------------------


def _known(value: Any) -> bool:
    return value != UNKNOWN


def _str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in mapping(value).items() if _known(v)}


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _requests(resources: Any) -> Requests:
    requests = mapping(get(resources, "requests"))
    return Requests(quantities.cpu_millicores(requests.get("cpu")), quantities.memory_mib(requests.get("memory")))


def _taints(value: Any) -> list[Taint] | None:
    if not _known(value):
        return None
    return [
        Taint(str(get(t, "key")), str(get(t, "value") or ""), TAINT_EFFECTS.get(str(get(t, "effect")), str(get(t, "effect"))))
        for t in items(value)
    ]


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Taint) -> bool:
    """Kubernetes toleration matching (core/v1 Toleration: key, operator, value, effect)."""
    for toleration in tolerations:
        key, operator = toleration.get("key") or "", toleration.get("operator") or "Equal"
        effect = toleration.get("effect") or ""
        if effect and effect != taint.effect:
            continue
        if operator == "Exists" and key in ("", taint.key):
            return True
        if operator == "Equal" and key == taint.key and (toleration.get("value") or "") == taint.value:
            return True
    return False


def _untolerated(tolerations: Sequence[Mapping[str, Any]], taints: Sequence[Taint]) -> list[Taint]:
    return [t for t in taints if t.effect in ("NoSchedule", "NoExecute") and not tolerates(tolerations, t)]


def _affinity_matches(affinity: Any, labels: Mapping[str, str]) -> bool:
    """Required node affinity: any term whose In/Exists expressions all hold; none: every node."""
    terms = items(get(affinity, "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"))
    if not terms:
        return True
    for term in terms:
        matched = True
        for expression in items(get(term, "matchExpressions")):
            key, operator = get(expression, "key"), get(expression, "operator")
            values = [str(v) for v in items(get(expression, "values"))]
            if operator == "In" and labels.get(str(key)) not in values:
                matched = False
            elif operator == "Exists" and key not in labels:
                matched = False
            elif operator == "NotIn" and labels.get(str(key)) in values:
                matched = False
        if matched:
            return True
    return False


# --- the DaemonSets and GPU slots a node gets ------------------------------------------------


@dataclass(frozen=True)
class _Release:
    chart: str
    values: Mapping[str, Any]

    def requests(self, name: str, path: tuple[str, ...] = ("resources",)) -> Requests:
        """The release's requests for its DaemonSet `name`: its values where they set them,
        the chart default (node_resources.DAEMONSET_REQUESTS) otherwise."""
        resources = get(self.values, *path)
        return _requests(resources) if get(resources, "requests") is not None else DAEMONSET_REQUESTS[name]


def _chart_name(chart: Any) -> str:
    """`oci://registry/.../jobset` and `jobset` alike."""
    return str(chart).rsplit("/", 1)[-1]


class Cluster:
    """The node agents, add-ons and device plugin configs the declared resources put on nodes."""

    def __init__(self, resources: Sequence[Resource]) -> None:
        self.releases = {
            _chart_name(get(r.props, "chart")): _Release(_chart_name(get(r.props, "chart")), mapping(get(r.props, "values")))
            for r in resources
            if r.type == HELM_RELEASE
        }
        self.addons = [str(get(r.props, "addonName")) for r in resources if r.type == EKS_ADDON]

    def daemonsets(self, labels: Mapping[str, str], taints: Sequence[Taint], instance_type: str | None) -> dict[str, Requests]:
        """DaemonSet name -> requests, for every DaemonSet that runs on a node like this."""
        running: dict[str, Requests] = {}
        plugin = self.releases.get("nvidia-device-plugin")
        if plugin is not None and not _untolerated(_tolerations(plugin.values), taints):
            running["nvidia-device-plugin"] = plugin.requests("nvidia-device-plugin")
            if get(plugin.values, "gfd", "enabled") is True:
                running["gpu-feature-discovery"] = plugin.requests("gpu-feature-discovery")
                # The chart's node-feature-discovery worker tolerates nvidia.com/gpu=present
                # (nvidia-device-plugin 0.20.0 values nfd.worker.tolerations).
                running["node-feature-discovery-worker"] = plugin.requests(
                    "node-feature-discovery-worker", ("nfd", "worker", "resources")
                )
            if self._plugin_config(plugin, labels).get("sharing", {}).get("mps") is not None:
                running["nvidia-mps-control-daemon"] = plugin.requests("nvidia-mps-control-daemon")
        dcgm = self.releases.get("dcgm-exporter")
        if (
            dcgm is not None
            and not _untolerated(_tolerations(dcgm.values), taints)
            and _affinity_matches(get(dcgm.values, "affinity"), labels)
        ):
            running["dcgm-exporter"] = dcgm.requests("dcgm-exporter")
        efa = self._efa_plugin(labels, taints, instance_type)
        if efa is not None:
            running["aws-efa-k8s-device-plugin"] = efa.requests("aws-efa-k8s-device-plugin")
        for addon in self.addons:
            # EKS add-on DaemonSets tolerate every taint (their manifests: `operator: Exists`).
            if addon in EKS_ADDON_DAEMONSETS:
                running[EKS_ADDON_DAEMONSETS[addon]] = DAEMONSET_REQUESTS[EKS_ADDON_DAEMONSETS[addon]]
        return running

    def _efa_plugin(self, labels: Mapping[str, str], taints: Sequence[Taint], instance_type: str | None) -> _Release | None:
        efa = self.releases.get("aws-efa-k8s-device-plugin")
        if efa is None or _untolerated(_tolerations(efa.values), taints):
            return None
        if any(labels.get(k) != v for k, v in _str_map(get(efa.values, "nodeSelector")).items()):
            return None
        supported = [str(v) for v in items(get(efa.values, "supportedInstanceLabels", "values"))]
        if supported and instance_type not in supported:
            return None
        return efa

    def efa_plugin_runs(self, labels: Mapping[str, str], taints: Sequence[Taint], instance_type: str | None) -> bool:
        return self._efa_plugin(labels, taints, instance_type) is not None

    @staticmethod
    def _plugin_config(plugin: _Release, labels: Mapping[str, str]) -> dict[str, Any]:
        """The device plugin config a node's label selects (k8s-device-plugin README, config.map)."""
        name = labels.get(DEVICE_PLUGIN_CONFIG_LABEL) or get(plugin.values, "config", "default")
        text = get(plugin.values, "config", "map", str(name))
        loaded = yaml.safe_load(text) if isinstance(text, str) and _known(text) else None
        return loaded if isinstance(loaded, dict) else {}

    def gpu_slots(self, labels: Mapping[str, str], taints: Sequence[Taint], physical: int, mig_instances: int) -> int | None:
        """`nvidia.com/gpu` a node advertises when the NVIDIA device plugin this stack installs
        runs there: physical GPUs x sharing replicas, or x MIG instances; None when the stack
        installs no plugin (the node's own advertises)."""
        plugin = self.releases.get("nvidia-device-plugin")
        if plugin is None:
            return None
        if _untolerated(_tolerations(plugin.values), taints):
            return 0
        config = self._plugin_config(plugin, labels)
        if get(config, "flags", "migStrategy") == "single":
            return physical * mig_instances
        for strategy in ("timeSlicing", "mps"):
            for resource in items(get(config, "sharing", strategy, "resources")):
                if get(resource, "name") == GPU_RESOURCE:
                    return physical * (_int(get(resource, "replicas")) or 1)
        return physical


def _tolerations(values: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in items(get(values, "tolerations")) if isinstance(t, Mapping)]


# --- nodes of a pool ------------------------------------------------------------------------


def _left(cloud: str, shape: catalog.InstanceType | None, daemonsets: Mapping[str, Requests]) -> Requests | None:
    if shape is None:
        return None
    return node_resources.allocatable("aws" if cloud == "aws" else "gcp", shape) - sum(daemonsets.values(), node_resources.NOTHING)


def _mig_instances(pool: Pool) -> int:
    return pool.gpu.mig_profiles.get(pool.mig_profile or "", 1)


def _aws_views(node_group: Resource, resources: Sequence[Resource], cluster: Cluster, pool: Pool) -> list[NodeView]:
    props = node_group.props
    types = node_group_instance_types(node_group, resources)
    shape = catalog.INSTANCE_TYPES.get(types[0]) if types else None
    physical = shape.gpus_per_node if shape else 0
    group = get(props, "nodeGroupName") or node_group.name
    max_nodes = _int(get(props, "scalingConfig", "maxSize"))
    tags = {
        str(get(r.props, "tag", "key")): get(r.props, "tag", "value")
        for r in resources
        if r.type == ASG_TAG and node_group.key in r.depends_on
    }
    template_labels = {k.removeprefix(TEMPLATE_LABEL_PREFIX): str(v) for k, v in tags.items() if k.startswith(TEMPLATE_LABEL_PREFIX)}
    template_taints = [
        Taint(k.removeprefix(TEMPLATE_TAINT_PREFIX), *str(v).split(":", 1))
        for k, v in tags.items()
        if k.startswith(TEMPLATE_TAINT_PREFIX) and _known(v) and ":" in str(v)
    ]
    # Capacity from the instance type, extended resources overridden by the resources tags.
    template_extended: dict[str, int] = {GPU_RESOURCE: physical}
    template_extended |= {
        k.removeprefix(TEMPLATE_RESOURCE_PREFIX): _int(v) or 0 for k, v in tags.items() if k.startswith(TEMPLATE_RESOURCE_PREFIX)
    }
    template = NodeView(
        what=f"the autoscaler's template of node group {group}",
        resource=node_group.key,
        labels=template_labels,
        taints=template_taints,
        extended=template_extended,
        left=None,
        daemonsets=(),
        max_nodes=max_nodes,
        source_pattern=f"ASG tag {TEMPLATE_RESOURCE_PREFIX}{{name}}",
    )
    labels_value, taints = get(props, "labels"), _taints(get(props, "taints"))
    labels = _str_map(labels_value) if _known(labels_value) else None
    extended: dict[str, int] | None = None
    daemonsets: dict[str, Requests] = {}
    if labels is not None and taints is not None:
        daemonsets = cluster.daemonsets(labels, taints, shape.name if shape else None)
        slots = cluster.gpu_slots(labels, taints, physical, _mig_instances(pool))
        extended = {GPU_RESOURCE: physical if slots is None else slots}
        if cluster.efa_plugin_runs(labels, taints, shape.name if shape else None):
            extended[node_resources.EFA_RESOURCE] = _efa_interfaces(node_group, resources)
    node = NodeView(
        what=f"a node of node group {group}",
        resource=node_group.key,
        labels=labels,
        taints=taints,
        extended=extended,
        left=_left("aws", shape, daemonsets) if labels is not None else None,
        daemonsets=tuple(sorted(daemonsets)),
        max_nodes=max_nodes,
        sources={
            GPU_RESOURCE: "the device plugin config its label selects",
            node_resources.EFA_RESOURCE: "its launch template's EFA interfaces, with the EFA device plugin running",
        },
    )
    return [template, node]


def _efa_interfaces(node_group: Resource, resources: Sequence[Resource]) -> int:
    templates = [r for r in resources if r.type == LAUNCH_TEMPLATE and r.key in node_group.depends_on]
    return sum(
        1
        for template in templates
        for nic in items(get(template.props, "networkInterfaces"))
        if get(nic, "interfaceType") in EFA_INTERFACE_TYPES
    )


def _gke_views(node_pool: Resource, cluster: Cluster, pool: Pool) -> list[NodeView]:
    props = node_pool.props
    node_config = mapping(get(props, "nodeConfig"))
    shape = catalog.INSTANCE_TYPES.get(str(get(node_config, "machineType")))
    accelerators = items(get(node_config, "guestAccelerators"))
    physical = sum(_int(get(a, "count")) or 0 for a in accelerators)
    labels_value, taints = get(node_config, "labels"), _taints(get(node_config, "taints"))
    labels = _str_map(labels_value) if _known(labels_value) else None
    extended: dict[str, int] | None = None
    daemonsets: dict[str, Requests] = {}
    if labels is not None and taints is not None:
        daemonsets = {"gke-system": DAEMONSET_REQUESTS["gke-system"], **cluster.daemonsets(labels, taints, None)}
        slots = cluster.gpu_slots(labels, taints, physical, _mig_instances(pool))
        extended = {GPU_RESOURCE: _gke_slots(accelerators, physical, pool) if slots is None else slots}
    autoscaling = get(props, "autoscaling")
    max_nodes = _int(get(autoscaling, "totalMaxNodeCount"))
    if max_nodes is None and _int(get(autoscaling, "maxNodeCount")) is not None:
        max_nodes = (_int(get(autoscaling, "maxNodeCount")) or 0) * (len(items(get(props, "nodeLocations"))) or 1)
    queued = get(props, "queuedProvisioning", "enabled") is True
    if queued and taints is not None:
        # GKE taints queued-provisioning nodes itself (cluster-toolkit gke-node-pool docs).
        taints = [*taints, Taint(GKE_QUEUED_TAINT_KEY, "true", "NoSchedule")]
    on_request = " (granted on request)" if queued or get(node_config, "flexStart") is True else ""
    return [
        NodeView(
            what=f"a node of node pool {get(props, 'name') or node_pool.name}{on_request}",
            resource=node_pool.key,
            labels=labels,
            taints=taints,
            extended=extended,
            left=_left("gcp", shape, daemonsets) if labels is not None else None,
            daemonsets=tuple(sorted(daemonsets)),
            max_nodes=max_nodes,
            sources={GPU_RESOURCE: "its accelerators and GPU sharing"},
            queued=queued,
        )
    ]


def _gke_slots(accelerators: list[Any], physical: int, pool: Pool) -> int:
    """GKE's own plugin: clients per GPU with sharing, instances per GPU with MIG partitions."""
    sharing = [_int(get(a, "gpuSharingConfig", "maxSharedClientsPerGpu")) for a in accelerators]
    if any(sharing):
        return physical * max(s or 1 for s in sharing)
    partition = next((get(a, "gpuPartitionSize") for a in accelerators if get(a, "gpuPartitionSize")), None)
    if isinstance(partition, str):
        return physical * pool.gpu.mig_profiles.get(partition, 1)
    return physical


def _existing_view(pool: Pool, cluster: Cluster) -> NodeView:
    """Nodes the stack does not create: only their declared facts are known."""
    labels = dict(pool.selector)
    slots = cluster.gpu_slots({**labels, **pool.labels}, [], pool.gpus_per_node, _mig_instances(pool))
    return NodeView(
        what=f"a node of pool {pool.name} (declared: {', '.join(f'{k}={v}' for k, v in labels.items())})",
        resource=None,
        labels=labels,
        taints=None,
        extended={GPU_RESOURCE: pool.slots_per_node if slots is None else slots},
        left=None,
        daemonsets=(),
        max_nodes=pool.max_nodes,
        sources={GPU_RESOURCE: "the declared GPUs per node and the device plugin config"},
    )


def node_candidates(spec: PlatformSpec, resources: Sequence[Resource], cluster: Cluster, pool: Pool, pod: PodShape) -> list[list[NodeView]]:
    """The views of every node group or node pool whose nodes the pod's selector selects."""
    if spec.cloud == "existing":
        return [[_existing_view(pool, cluster)]]
    node_type = EKS_NODE_GROUP if spec.cloud == "aws" else GKE_NODE_POOL
    found: list[list[NodeView]] = []
    for res in resources:
        if res.type != node_type:
            continue
        labels = get(res.props, "labels") if spec.cloud == "aws" else get(res.props, "nodeConfig", "labels")
        if _known(labels) and any(_str_map(labels).get(k) != v for k, v in pod.node_selector.items()):
            continue
        found.append(_aws_views(res, resources, cluster, pool) if spec.cloud == "aws" else _gke_views(res, cluster, pool))
    return found


def view_problems(view: NodeView, pod: PodShape) -> list[str]:
    """What keeps the pods off a node of `view`: labels, taints, resources, node count."""
    problems: list[str] = []
    if view.labels is not None:
        missing = {k: v for k, v in pod.node_selector.items() if view.labels.get(k) != v}
        problems += [f"{view.what} lacks the label {k}={v} the pods select" for k, v in missing.items()]
    if view.taints is not None:
        problems += [f"{view.what} carries the taint {t}, which the pods do not tolerate" for t in _untolerated(pod.tolerations, view.taints)]
    if view.extended is not None:
        for name, count in pod.extended.items():
            offered = view.extended.get(name, 0)
            if count > offered:
                source = view.source(name)
                problems.append(
                    f"{view.what} offers {offered} {name}" + (f" ({source})" if source else "") + f", a pod requests {count}"
                )
    if view.left is not None and pod.requests is not None:
        problems += _cpu_memory_problems(view, view.left, pod, pod.requests)
    if pod.one_per_node and view.max_nodes is not None and pod.pods > view.max_nodes:
        problems.append(f"{view.what.replace('a node of ', '')} scales to {view.max_nodes} nodes, the job needs {pod.pods} (one pod per node)")
    return problems


def _cpu_memory_problems(view: NodeView, left: Requests, pod: PodShape, requests: Requests) -> list[str]:
    """A node must hold as many of these pods as its GPU slots do: Kueue admits by slots, so a
    slot whose pod finds no CPU or memory strands an admitted job in Pending."""
    gpus = pod.extended.get(GPU_RESOURCE, 0)
    offered = (view.extended or {}).get(GPU_RESOURCE, 0)
    per_node = max(offered // gpus, 1) if gpus else 1
    needed = Requests(requests.cpu_m * per_node, requests.memory_mib * per_node)
    pods = "a pod requests" if per_node == 1 else f"the {per_node} pods its GPU slots hold request"
    running = f" ({', '.join(view.daemonsets)})" if view.daemonsets else ""
    problems: list[str] = []
    if needed.cpu_m > left.cpu_m:
        problems.append(
            f"{view.what} leaves {left.cpu_m}m CPU to pods after its reserved share and DaemonSets{running}, {pods} {needed.cpu_m}m"
        )
    if needed.memory_mib > left.memory_mib:
        problems.append(
            f"{view.what} leaves {left.memory_mib}Mi memory to pods after its reserved share and DaemonSets{running}, "
            f"{pods} {needed.memory_mib}Mi"
        )
    return problems


def _capacity_problems(view: NodeView, flavor: str, quota: int) -> list[str]:
    """Kueue admits by quota: quota the nodes cannot hold leaves admitted jobs Pending."""
    slots = (view.extended or {}).get(GPU_RESOURCE)
    if slots is None or view.extended is None or view.max_nodes is None or quota <= view.max_nodes * slots:
        return []
    return [
        f"Kueue may admit {quota} {GPU_RESOURCE} on flavor {flavor} (the nominal quotas of its cohort), "
        f"{view.what} offers {slots} and the pool scales to {view.max_nodes} nodes: {view.max_nodes * slots} in all"
    ]


def _queued_problems(view: NodeView, kueue: Kueue, cluster_queue: str, flavor: str) -> list[str]:
    """A queued pool's nodes come only for a ProvisioningRequest of GKE's queued class: without an
    admission check asking for one, Kueue admits the job and no node ever comes."""
    if not view.queued or QUEUED_PROVISIONING_CLASS in kueue.provisioning_classes(cluster_queue, flavor):
        return []
    return [
        f"{view.what} comes only through a ProvisioningRequest, but ClusterQueue {cluster_queue} admits on flavor "
        f"{flavor} without an admission check of class {QUEUED_PROVISIONING_CLASS}: the job would be admitted and "
        "never get a node"
    ]


# --- Kueue ------------------------------------------------------------------------------------


class Kueue:
    """The queues, flavors and quotas as declared, read the way Kueue's scheduler reads them."""

    def __init__(self, resources: Sequence[Resource], cluster: Cluster) -> None:
        def objects(kind: str) -> list[Resource]:
            return [r for r in resources if r.type == f"{KUEUE_TYPE_PREFIX}{kind}"]

        self.flavors = {str(get(r.props, "metadata", "name")): mapping(get(r.props, "spec")) for r in objects("ResourceFlavor")}
        self.cluster_queues = {str(get(r.props, "metadata", "name")): r for r in objects("ClusterQueue")}
        self.cohorts = {str(get(r.props, "metadata", "name")): mapping(get(r.props, "spec")) for r in objects("Cohort")}
        self.local_queues = {
            (str(get(r.props, "metadata", "namespace")), str(get(r.props, "metadata", "name"))): str(get(r.props, "spec", "clusterQueue"))
            for r in objects("LocalQueue")
        }
        self.admission_checks = {str(get(r.props, "metadata", "name")): mapping(get(r.props, "spec")) for r in objects("AdmissionCheck")}
        self.provisioning_configs = {
            str(get(r.props, "metadata", "name")): mapping(get(r.props, "spec")) for r in objects("ProvisioningRequestConfig")
        }
        kueue = cluster.releases.get("kueue")
        configuration = get(kueue.values, "managerConfig", "controllerManagerConfigYaml") if kueue else None
        loaded = yaml.safe_load(configuration) if isinstance(configuration, str) and _known(configuration) else None
        self.strategy = get(loaded, "resources", "quotaCheckStrategy") if isinstance(loaded, dict) else None

    @staticmethod
    def _quota(spec: Mapping[str, Any], flavor: str, resource: str, key: str) -> int | None:
        for group in items(get(spec, "resourceGroups")):
            for entry in items(get(group, "flavors")):
                if get(entry, "name") != flavor:
                    continue
                for quota in items(get(entry, "resources")):
                    if get(quota, "name") == resource:
                        return _int(get(quota, key))
        return None

    def available(self, cluster_queue: str, flavor: str, resource: str) -> tuple[int, int]:
        """(nominal, borrowable): the queue's own quota, and what the rest of its cohort lends it
        (every lendable quota of the cohort's queues and the cohort's own), up to its borrowingLimit."""
        spec = mapping(get(self.cluster_queues[cluster_queue].props, "spec"))
        nominal = self._quota(spec, flavor, resource, "nominalQuota") or 0
        cohort = get(spec, "cohortName")
        if not isinstance(cohort, str):
            return nominal, 0
        lent = 0
        for name, other in self.cluster_queues.items():
            other_spec = mapping(get(other.props, "spec"))
            if name == cluster_queue or get(other_spec, "cohortName") != cohort:
                continue
            lending = self._quota(other_spec, flavor, resource, "lendingLimit")
            lent += lending if lending is not None else self._quota(other_spec, flavor, resource, "nominalQuota") or 0
        lent += self._quota(self.cohorts.get(cohort, {}), flavor, resource, "nominalQuota") or 0
        limit = self._quota(spec, flavor, resource, "borrowingLimit")
        return nominal, lent if limit is None else min(lent, limit)

    def flavor_total(self, flavor: str, resource: str) -> int:
        """Everything Kueue may admit on `flavor`: the nominal quotas of every queue and cohort."""
        specs = [mapping(get(q.props, "spec")) for q in self.cluster_queues.values()] + list(self.cohorts.values())
        return sum(self._quota(spec, flavor, resource, "nominalQuota") or 0 for spec in specs)

    def provisioning_classes(self, cluster_queue: str, flavor: str) -> set[str]:
        """The ProvisioningRequest classes Kueue asks for before admitting on `flavor` through
        `cluster_queue`: its admission checks for that flavor (an empty onFlavors means every
        flavor; Kueue v1beta2 admissionChecksStrategy), run by the provisioning-request controller."""
        queue = self.cluster_queues.get(cluster_queue)
        rules = items(get(queue.props if queue else {}, "spec", "admissionChecksStrategy", "admissionChecks"))
        classes: set[str] = set()
        for rule in rules:
            on = [str(f) for f in items(get(rule, "onFlavors"))]
            check = self.admission_checks.get(str(get(rule, "name")), {})
            if (on and flavor not in on) or get(check, "controllerName") != PROVISIONING_REQUEST_CONTROLLER:
                continue
            if get(check, "parameters", "kind") == "ProvisioningRequestConfig":
                config = self.provisioning_configs.get(str(get(check, "parameters", "name")), {})
                classes.add(str(get(config, "provisioningClassName")))
        return classes

    def admit(self, pod: PodShape, totals: Mapping[str, int]) -> tuple[list[str], str | None, str | None]:
        """(problems, the flavor Kueue admits the job on, the ClusterQueue's key)."""
        cluster_queue = self.local_queues.get((pod.namespace, pod.queue))
        if cluster_queue is None:
            return [f"no LocalQueue {pod.queue} in namespace {pod.namespace} (label {QUEUE_NAME_LABEL})"], None, None
        queue = self.cluster_queues.get(cluster_queue)
        if queue is None:
            return [f"LocalQueue {pod.namespace}/{pod.queue} points at ClusterQueue {cluster_queue}, which is not declared"], None, None
        groups = items(get(queue.props, "spec", "resourceGroups"))
        covered = {str(r) for g in groups for r in items(get(g, "coveredResources"))}
        accounted = [r for r in totals if r in covered] if self.strategy == IGNORE_UNDECLARED else list(totals)
        problems = [f"ClusterQueue {cluster_queue} does not cover {r}, which the job requests" for r in accounted if r not in covered]
        gpu_group = next((g for g in groups if GPU_RESOURCE in items(get(g, "coveredResources"))), None)
        if problems or gpu_group is None:
            return problems or [f"ClusterQueue {cluster_queue} does not cover {GPU_RESOURCE}"], None, queue.key
        flavor_names = [str(get(f, "name")) for f in items(get(gpu_group, "flavors"))]
        keys = {k for name in flavor_names for k in _str_map(get(self.flavors.get(name, {}), "nodeLabels"))}
        selector = {k: v for k, v in pod.node_selector.items() if k in keys}
        matching = [n for n in flavor_names if all(_str_map(get(self.flavors.get(n, {}), "nodeLabels")).get(k) == v for k, v in selector.items())]
        if not matching:
            return [f"no flavor of ClusterQueue {cluster_queue} has the node labels {selector or pod.node_selector} the pods select"], None, queue.key
        group_resources = [r for r in accounted if r in items(get(gpu_group, "coveredResources"))]
        shortfalls: list[str] = []
        for name in matching:
            short = []
            for resource in group_resources:
                nominal, borrowable = self.available(cluster_queue, name, resource)
                if totals[resource] > nominal + borrowable:
                    short.append(
                        f"ClusterQueue {cluster_queue} holds {nominal} {resource} on flavor {name} and may borrow "
                        f"{borrowable}, the job requests {totals[resource]}"
                    )
            if not short:
                if name not in self.flavors:
                    return [f"ClusterQueue {cluster_queue} admits on flavor {name}, which is not a declared ResourceFlavor"], None, queue.key
                return [], name, queue.key
            shortfalls += short
        return shortfalls, None, queue.key


# --- the proof ---------------------------------------------------------------------------------


def proof_requests(spec: PlatformSpec, pool: Pool, team: str) -> list[renderer.JobRequest]:
    """The largest and the smallest job `gpu-platform job` accepts on `pool` for `team`."""
    if pool.max_nodes < 1:
        return []
    shared = renderer.shared_gpus(pool)
    largest = (1 if shared else pool.max_nodes, 1 if shared else pool.slots_per_node)
    shapes = [largest] if largest == (1, 1) else [largest, (1, 1)]
    tier = priority_tiers(spec)[0].name
    return [
        renderer.JobRequest(
            pool=pool.name,
            nodes=nodes,
            gpus_per_node=gpus,
            team=team,
            tier=tier,
            name="fit-proof",
            image=PROOF_IMAGE,
            trainer_args=[
                "--data", f"{renderer.DATA_MOUNT}/datasets/fit-proof", "--preset", PROOF_PRESET, "--max-steps", "1",
                "--checkpoint-every", "1", "--global-batch-size", str(nodes * gpus), "--seq-len", str(PROOF_SEQ_LEN),
                "--seed", "0",
            ],
        )
        for nodes, gpus in shapes
    ]


def pod_shape(jobset: Mapping[str, Any]) -> PodShape:
    """One pod of a rendered JobSet as the scheduler sizes it: its containers' requests plus the
    GCS FUSE sidecar GKE's webhook injects for the annotation."""
    job = get(jobset, "spec", "replicatedJobs", 0, "template", "spec")
    template = mapping(get(job, "template"))
    pod = mapping(get(template, "spec"))
    extended: dict[str, int] = {}
    requests = node_resources.NOTHING
    sized = False
    for container in items(get(pod, "containers")):
        asked = mapping(get(container, "resources", "requests"))
        for name, value in asked.items():
            if name in ("cpu", "memory"):
                sized = True
            elif _int(value) is not None:
                extended[name] = extended.get(name, 0) + (_int(value) or 0)
        requests = requests + _requests(get(container, "resources"))
    annotations = _str_map(get(template, "metadata", "annotations"))
    if annotations.get(renderer.GCS_FUSE_ANNOTATION) == "true":
        requests = requests + Requests(
            quantities.cpu_millicores(annotations.get(renderer.GCS_FUSE_CPU_REQUEST_ANNOTATION)),
            quantities.memory_mib(annotations.get(renderer.GCS_FUSE_MEMORY_REQUEST_ANNOTATION)),
        )
    anti_affinity = items(get(pod, "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"))
    return PodShape(
        pods=_int(get(job, "parallelism")) or 1,
        one_per_node=any(get(term, "topologyKey") == renderer.HOSTNAME_TOPOLOGY for term in anti_affinity),
        extended=extended,
        requests=requests if sized else None,
        node_selector=_str_map(get(pod, "nodeSelector")),
        tolerations=[t for t in items(get(pod, "tolerations")) if isinstance(t, Mapping)],
        namespace=str(get(jobset, "metadata", "namespace")),
        queue=str(get(jobset, "metadata", "labels", QUEUE_NAME_LABEL)),
    )


def _totals(pod: PodShape) -> dict[str, int]:
    totals = {name: count * pod.pods for name, count in pod.extended.items()}
    if pod.requests is not None:
        totals |= {"cpu": pod.requests.cpu_m * pod.pods, "memory": pod.requests.memory_mib * pod.pods}
    return totals


def misfits(resources: Sequence[Resource], spec: PlatformSpec) -> list[tuple[str | None, str]]:
    """(resource key or None, message) for every way a job the renderer accepts would not run."""
    cluster = Cluster(resources)
    kueue = Kueue(resources, cluster)
    pools = derive_pools(spec)
    teams = [t.team for t in queue_plan(spec, pools).teams]
    found: dict[tuple[str | None, str], None] = {}
    for pool in pools:
        for team in teams:
            for request in proof_requests(spec, pool, team):
                shape = f"pool {pool.name}, job {request.nodes} node(s) x {request.gpus_per_node} GPU(s)"
                try:
                    jobset = renderer.render(spec, request)
                except renderer.JobError as exc:
                    for problem in exc.problems:
                        found[(None, f"{shape}: gpu-platform job refuses it: {problem}")] = None
                    continue
                pod = pod_shape(jobset)
                problems, flavor, queue_key = kueue.admit(pod, _totals(pod))
                for problem in problems:
                    found[(queue_key, f"{shape}, team {team}: {problem}")] = None
                if flavor is None:
                    continue
                admitted = pod.admitted(kueue.flavors[flavor])
                candidates = node_candidates(spec, resources, cluster, pool, admitted)
                if not candidates:
                    selector = ", ".join(f"{k}={v}" for k, v in admitted.node_selector.items())
                    found[(None, f"{shape}: no node group or node pool has nodes labelled {selector}")] = None
                quota = kueue.flavor_total(flavor, GPU_RESOURCE)
                cluster_queue = kueue.local_queues[(pod.namespace, pod.queue)]
                for views in candidates:
                    for view in views:
                        problems = view_problems(view, admitted) + _capacity_problems(view, flavor, quota)
                        problems += _queued_problems(view, kueue, cluster_queue, flavor)
                        for problem in problems:
                            found[(view.resource, f"{shape}: {problem}")] = None
    return list(found)

"""The nodes of a pool once scaled up from zero, as the autoscaler's template and as the real node,
per cloud, and what a pod needs of them."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from components import node_resources
from components.checks import quantities
from components.checks.declared import (
    ASG_TAG,
    EKS_NODE_GROUP,
    GKE_NODE_POOL,
    LAUNCH_TEMPLATE,
    Resource,
    get,
    items,
    mapping,
    node_group_instance_types,
)
from components.checks.fit.cluster import GFD_PRODUCT_LABEL, Cluster
from components.checks.fit.karpenter import karpenter_views
from components.checks.fit.kueue import Kueue
from components.checks.fit.shapes import (
    NodeView,
    PodShape,
    Taint,
    int_or_none,
    is_known,
    str_map,
    taints_of,
    untolerated,
)
from components.facts import aws as aws_facts
from components.facts import catalog
from components.kubernetes.queues import GKE_QUEUED_TAINT_KEY, QUEUED_PROVISIONING_CLASS
from components.node_resources import DAEMONSET_REQUESTS, Requests
from components.pools import GPU_RESOURCE, NODE_POOL_LABEL, Pool
from components.spec import PlatformSpec

TEMPLATE_LABEL_PREFIX = f"{aws_facts.NODE_TEMPLATE_PREFIX}label/"
TEMPLATE_TAINT_PREFIX = f"{aws_facts.NODE_TEMPLATE_PREFIX}taint/"
TEMPLATE_RESOURCE_PREFIX = f"{aws_facts.NODE_TEMPLATE_PREFIX}resources/"


EFA_INTERFACE_TYPES = ("efa", "efa-only")
# Huge page resources are memory quantities (hugepages-2Mi: 42242Mi), counted here in MiB.
HUGEPAGES_PREFIX = "hugepages-"


def _left(
    cloud: str, shape: catalog.InstanceType | None, daemonsets: Mapping[str, Requests], efa: bool = False
) -> Requests | None:
    if shape is None:
        return None
    node = node_resources.allocatable("aws" if cloud == "aws" else "gcp", shape, efa=efa)
    return node - sum(daemonsets.values(), node_resources.NOTHING)


def _template_left(shape: catalog.InstanceType | None, tags: Mapping[str, Any], daemonsets: Mapping[str, Requests]) -> Requests | None:
    """CPU and memory of the autoscaler's template node once the DaemonSets that would run there
    are placed: Allocatable = Capacity, the instance type's vCPUs and memory unless the ASG's
    resources tags say otherwise (aws_manager.go buildNodeFromTemplate: "TODO: use proper
    allocatable"). It is never less than the real node's, so the real node is the one that binds."""
    if shape is None:
        return None
    cpu, memory = tags.get(f"{TEMPLATE_RESOURCE_PREFIX}cpu"), tags.get(f"{TEMPLATE_RESOURCE_PREFIX}memory")
    capacity = Requests(
        quantities.cpu_millicores(cpu) if is_known(cpu) and cpu is not None else shape.vcpus * 1000,
        quantities.memory_mib(memory) if is_known(memory) and memory is not None else shape.memory_gib * 1024,
    )
    return capacity - sum(daemonsets.values(), node_resources.NOTHING)


def _template_resource(name: str, value: Any) -> int:
    """A resources tag's value as the proof counts it: huge pages in MiB, devices by count."""
    if name.startswith(HUGEPAGES_PREFIX):
        return quantities.memory_mib(value)
    return int_or_none(value) or 0


def _mig_instances(pool: Pool) -> int:
    return pool.gpu.mig_profiles.get(pool.mig_profile or "", 1)


def _aws_views(node_group: Resource, resources: Sequence[Resource], cluster: Cluster, pool: Pool) -> list[NodeView]:
    props = node_group.props
    types = node_group_instance_types(node_group, resources)
    shape = catalog.INSTANCE_TYPES.get(types[0]) if types else None
    physical = shape.gpus_per_node if shape else 0
    group = get(props, "nodeGroupName") or node_group.name
    max_nodes = int_or_none(get(props, "scalingConfig", "maxSize"))
    tags = {
        str(get(r.props, "tag", "key")): get(r.props, "tag", "value")
        for r in resources
        if r.type == ASG_TAG and node_group.key in r.depends_on
    }
    template_labels = {k.removeprefix(TEMPLATE_LABEL_PREFIX): str(v) for k, v in tags.items() if k.startswith(TEMPLATE_LABEL_PREFIX)}
    template_taints = [
        Taint(k.removeprefix(TEMPLATE_TAINT_PREFIX), *str(v).split(":", 1))
        for k, v in tags.items()
        if k.startswith(TEMPLATE_TAINT_PREFIX) and is_known(v) and ":" in str(v)
    ]
    # Capacity from the instance type, extended resources overridden by the resources tags.
    template_extended: dict[str, int] = {GPU_RESOURCE: physical}
    template_extended |= {
        name: _template_resource(name, v)
        for k, v in tags.items()
        if k.startswith(TEMPLATE_RESOURCE_PREFIX) and (name := k.removeprefix(TEMPLATE_RESOURCE_PREFIX)) not in ("cpu", "memory")
    }
    # The autoscaler places the DaemonSets whose selectors and tolerations admit the template.
    template_daemonsets = cluster.daemonsets(template_labels, template_taints, shape.name if shape else None)
    template = NodeView(
        what=f"the autoscaler's template of node group {group}",
        resource=node_group.key,
        labels=template_labels,
        taints=template_taints,
        extended=template_extended,
        left=_template_left(shape, tags, template_daemonsets),
        daemonsets=tuple(sorted(template_daemonsets)),
        max_nodes=max_nodes,
        source_pattern=f"ASG tag {TEMPLATE_RESOURCE_PREFIX}{{name}}",
    )
    labels_value, taints = get(props, "labels"), taints_of(get(props, "taints"))
    labels = str_map(labels_value) if is_known(labels_value) else None
    extended: dict[str, int] | None = None
    daemonsets: dict[str, Requests] = {}
    # EFA instances pre-allocate huge pages at boot, which the kubelet takes off memory.
    efa = _efa_interfaces(node_group, resources) > 0
    if labels is not None and taints is not None:
        daemonsets = cluster.daemonsets(labels, taints, shape.name if shape else None)
        slots = cluster.gpu_slots(labels, taints, physical, _mig_instances(pool))
        extended = {GPU_RESOURCE: physical if slots is None else slots}
        if cluster.efa_plugin_runs(labels, taints, shape.name if shape else None):
            extended[node_resources.EFA_RESOURCE] = _efa_interfaces(node_group, resources)
        if efa and shape is not None:
            extended[node_resources.HUGEPAGES_2MI_RESOURCE] = node_resources.efa_hugepages_mib(shape)
    node = NodeView(
        what=f"a node of node group {group}",
        resource=node_group.key,
        labels=labels,
        taints=taints,
        extended=extended,
        left=_left("aws", shape, daemonsets, efa=efa) if labels is not None else None,
        margin=node_resources.JOB_MARGIN,
        daemonsets=tuple(sorted(daemonsets)),
        max_nodes=max_nodes,
        sources={
            GPU_RESOURCE: "the device plugin config its label selects",
            node_resources.EFA_RESOURCE: "its launch template's EFA interfaces, with the EFA device plugin running",
            node_resources.HUGEPAGES_2MI_RESOURCE: "MiB of huge pages an EFA instance pre-allocates",
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
    physical = sum(int_or_none(get(a, "count")) or 0 for a in accelerators)
    labels_value, taints = get(node_config, "labels"), taints_of(get(node_config, "taints"))
    labels = str_map(labels_value) if is_known(labels_value) else None
    extended: dict[str, int] | None = None
    daemonsets: dict[str, Requests] = {}
    if labels is not None and taints is not None:
        # GKE labels every node with its pool's name; DaemonSets may select pools by it.
        node_labels = {**labels, NODE_POOL_LABEL: str(get(props, "name"))}
        daemonsets = {"gke-system": DAEMONSET_REQUESTS["gke-system"], **cluster.daemonsets(node_labels, taints, None)}
        slots = cluster.gpu_slots(labels, taints, physical, _mig_instances(pool))
        extended = {GPU_RESOURCE: _gke_slots(accelerators, physical, pool) if slots is None else slots}
    autoscaling = get(props, "autoscaling")
    max_nodes = int_or_none(get(autoscaling, "totalMaxNodeCount"))
    if max_nodes is None and int_or_none(get(autoscaling, "maxNodeCount")) is not None:
        max_nodes = (int_or_none(get(autoscaling, "maxNodeCount")) or 0) * (len(items(get(props, "nodeLocations"))) or 1)
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
    sharing = [int_or_none(get(a, "gpuSharingConfig", "maxSharedClientsPerGpu")) for a in accelerators]
    if any(sharing):
        return physical * max(s or 1 for s in sharing)
    partition = next((get(a, "gpuPartitionSize") for a in accelerators if get(a, "gpuPartitionSize")), None)
    if isinstance(partition, str):
        return physical * pool.gpu.mig_profiles.get(partition, 1)
    return physical


def _existing_view(pool: Pool, cluster: Cluster) -> NodeView:
    """Nodes the stack does not create: only their declared facts are known, and what GPU
    feature discovery, which the stack installs, rewrites of them."""
    labels = dict(pool.selector)
    if GFD_PRODUCT_LABEL in labels:
        labels[GFD_PRODUCT_LABEL] = cluster.gfd_product({**labels, **pool.labels}, labels[GFD_PRODUCT_LABEL])
    slots = cluster.gpu_slots({**labels, **pool.labels}, [], pool.gpus_per_node, _mig_instances(pool))
    return NodeView(
        what=f"a node of pool {pool.name} (declared: {', '.join(f'{k}={v}' for k, v in pool.selector.items())})",
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
    found: list[list[NodeView]] = karpenter_views(resources, cluster, pool, pod) if spec.cloud == "aws" else []
    for res in resources:
        if res.type != node_type:
            continue
        labels = get(res.props, "labels") if spec.cloud == "aws" else get(res.props, "nodeConfig", "labels")
        if is_known(labels) and any(str_map(labels).get(k) != v for k, v in pod.node_selector.items()):
            continue
        found.append(_aws_views(res, resources, cluster, pool) if spec.cloud == "aws" else _gke_views(res, cluster, pool))
    return found


def view_problems(view: NodeView, pod: PodShape) -> list[str]:
    """What keeps the pods off a node of `view`: labels, taints, resources, node count."""
    problems: list[str] = list(view.blocked)
    if view.labels is not None:
        missing = {k: v for k, v in pod.node_selector.items() if view.labels.get(k) != v}
        problems += [
            f"{view.what} lacks the label {k}={v} the pods select" + (f" (it carries {k}={view.labels[k]})" if k in view.labels else "")
            for k, v in missing.items()
        ]
    if view.taints is not None:
        problems += [f"{view.what} carries the taint {t}, which the pods do not tolerate" for t in untolerated(pod.tolerations, view.taints)]
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
    margin = view.margin
    problems: list[str] = []
    if needed.cpu_m > left.cpu_m:
        problems.append(
            f"{view.what} leaves {left.cpu_m}m CPU to pods after its reserved share and DaemonSets{running}, {pods} {needed.cpu_m}m"
        )
    elif needed.cpu_m + margin.cpu_m > left.cpu_m:
        problems.append(
            f"{view.what} leaves {left.cpu_m}m CPU to pods after its reserved share and DaemonSets{running}, {pods} "
            f"{needed.cpu_m}m: less than the {margin.cpu_m}m margin for other node agents is left"
        )
    if needed.memory_mib > left.memory_mib:
        problems.append(
            f"{view.what} leaves {left.memory_mib}Mi memory to pods after its reserved share and DaemonSets{running}, "
            f"{pods} {needed.memory_mib}Mi"
        )
    elif needed.memory_mib + margin.memory_mib > left.memory_mib:
        problems.append(
            f"{view.what} leaves {left.memory_mib}Mi memory to pods after its reserved share and DaemonSets{running}, "
            f"{pods} {needed.memory_mib}Mi: less than the {margin.memory_mib}Mi margin for other node agents is left"
        )
    return problems


def capacity_problems(view: NodeView, flavor: str, quota: int) -> list[str]:
    """Kueue admits by quota: quota the nodes cannot hold leaves admitted jobs Pending."""
    slots = (view.extended or {}).get(GPU_RESOURCE)
    if slots is None or view.extended is None or view.max_nodes is None or quota <= view.max_nodes * slots:
        return []
    return [
        f"Kueue may admit {quota} {GPU_RESOURCE} on flavor {flavor} (the nominal quotas of its cohort), "
        f"{view.what} offers {slots} and the pool scales to {view.max_nodes} nodes: {view.max_nodes * slots} in all"
    ]


def queued_problems(view: NodeView, kueue: Kueue, cluster_queue: str, flavor: str) -> list[str]:
    """A queued pool's nodes come only for a ProvisioningRequest of GKE's queued class: without an
    admission check asking for one, Kueue admits the job and no node ever comes."""
    if not view.queued or QUEUED_PROVISIONING_CLASS in kueue.provisioning_classes(cluster_queue, flavor):
        return []
    return [
        f"{view.what} comes only through a ProvisioningRequest, but ClusterQueue {cluster_queue} admits on flavor "
        f"{flavor} without an admission check of class {QUEUED_PROVISIONING_CLASS}: the job would be admitted and "
        "never get a node"
    ]

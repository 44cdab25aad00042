"""Karpenter's NodePools and EC2NodeClasses read the way Karpenter reads them before it launches a
node (kubernetes-sigs/karpenter and aws/karpenter-provider-aws at v1.14.1): the NodePool's
requirements intersected with the instance types (the catalog's, as Karpenter's come from
DescribeInstanceTypes) and the capacity types the EC2NodeClass can serve, its labels and taints
on the node, GPUs from the instance type, `limits` (nodes, and GPUs as initialized nodes report
them) against the nodes one job needs, Karpenter's overhead model computes it (facts.karpenter: VM memory overhead, kube-reserved,
system-reserved and the hard eviction threshold, with the EC2NodeClass's kubelet settings where it
sets them). The real node, as its kubelet computes allocatable, is judged too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from components import node_resources
from components.checks import quantities
from components.checks.declared import KARPENTER_NODE_CLASS, KARPENTER_NODE_POOL, Resource, get, items, mapping
from components.checks.fit.cluster import Cluster
from components.checks.fit.shapes import NodeView, PodShape, Taint, int_or_none, is_known, str_map, taints_of
from components.facts import catalog
from components.facts import karpenter as facts
from components.node_resources import Requests
from components.pools import GPU_RESOURCE, Pool

# What Karpenter launches when a NodePool names no capacity type (kubernetes-sigs/karpenter
# pkg/apis/v1 NodePool defaults: on-demand).
DEFAULT_CAPACITY_TYPES = (facts.ON_DEMAND,)


@dataclass(frozen=True)
class DeclaredNodePool:
    """A NodePool resource and the EC2NodeClass it names (None when the stack declares none)."""

    resource: Resource
    name: str
    node_class: Resource | None

    @property
    def spec(self) -> Mapping[str, Any]:
        return mapping(get(self.resource.props, "spec"))

    @property
    def labels(self) -> dict[str, str]:
        return str_map(get(self.spec, "template", "metadata", "labels"))

    @property
    def taints(self) -> list[Taint] | None:
        return taints_of(get(self.spec, "template", "spec", "taints"))

    @property
    def requirements(self) -> list[Mapping[str, Any]]:
        return [mapping(r) for r in items(get(self.spec, "template", "spec", "requirements"))]

    def limit(self, resource: str) -> int | None:
        value = get(self.spec, "limits", resource)
        return int_or_none(value) if is_known(value) else None

    @property
    def gpu_limit(self) -> int | None:
        return self.limit(GPU_RESOURCE)

    @property
    def node_limit(self) -> int | None:
        return self.limit(facts.NODES_LIMIT)

    def max_nodes(self, gpus_counted: int) -> int | None:
        """Nodes the limits admit when each counts `gpus_counted` nvidia.com/gpu; None: no limit.
        `nodes` counts 1 a node; an initialized node counts the GPUs its status reports
        (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/state/statenode.go Capacity)."""
        gpu_limit = self.gpu_limit
        bounds = [self.node_limit, gpu_limit // gpus_counted if gpu_limit is not None and gpus_counted else None]
        known = [b for b in bounds if b is not None]
        return min(known) if known else None


def declared_node_pools(resources: Sequence[Resource]) -> list[DeclaredNodePool]:
    classes = {str(get(r.props, "metadata", "name")): r for r in resources if r.type == KARPENTER_NODE_CLASS}
    return [
        DeclaredNodePool(r, str(get(r.props, "metadata", "name")), classes.get(str(get(r.props, "spec", "template", "spec", "nodeClassRef", "name"))))
        for r in resources
        if r.type == KARPENTER_NODE_POOL
    ]


def _instance_labels(shape: catalog.InstanceType) -> dict[str, str]:
    """The well-known labels of an instance type that requirements may name (Karpenter AWS
    pkg/providers/instancetype/types.go computeRequirements)."""
    return {
        facts.INSTANCE_TYPE_LABEL: shape.name,
        facts.INSTANCE_FAMILY_LABEL: shape.name.split(".", 1)[0],
        "karpenter.k8s.aws/instance-gpu-count": str(shape.gpus_per_node),
        "karpenter.k8s.aws/instance-cpu": str(shape.vcpus),
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
    }


def _satisfies(value: str | None, requirement: Mapping[str, Any]) -> bool:
    """Whether a label value meets one requirement (Kubernetes node selector operators, with
    Karpenter's Gte/Lte); None: the node lacks the label."""
    operator = get(requirement, "operator")
    values = [str(v) for v in items(get(requirement, "values"))]
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    number = int_or_none(value) if value is not None else None
    bound = int_or_none(values[0]) if values else None
    if number is None or bound is None:
        return False
    return {"Gt": number > bound, "Lt": number < bound, "Gte": number >= bound, "Lte": number <= bound}.get(str(operator), False)


def instance_types(pool: DeclaredNodePool) -> list[catalog.InstanceType]:
    """The catalog's AWS instance types every requirement on an instance label admits."""
    shapes = [s for s in catalog.INSTANCE_TYPES.values() if s.cloud == "aws"]
    admitted: list[catalog.InstanceType] = []
    for shape in shapes:
        labels = _instance_labels(shape)
        if all(_satisfies(labels.get(str(get(r, "key"))), r) for r in pool.requirements if str(get(r, "key")) in labels):
            admitted.append(shape)
    return admitted


def capacity_types(pool: DeclaredNodePool) -> list[str]:
    """Capacity types Karpenter may launch for the NodePool: its requirement's, and `reserved`
    only where the EC2NodeClass selects a reservation (pkg/providers/capacityreservation)."""
    wanted = list(DEFAULT_CAPACITY_TYPES)
    for requirement in pool.requirements:
        if get(requirement, "key") == facts.CAPACITY_TYPE_LABEL:
            wanted = [t for t in (facts.RESERVED, facts.SPOT, facts.ON_DEMAND) if _satisfies(t, requirement)]
    reservations = items(get(pool.node_class.props, "spec", "capacityReservationSelectorTerms")) if pool.node_class else []
    return [t for t in wanted if t != facts.RESERVED or reservations]


def karpenter_allocatable(shape: catalog.InstanceType, node_class: Resource | None) -> Requests:
    """Karpenter's prediction of the node's allocatable (node_resources.karpenter_allocatable), with
    the kubelet settings the EC2NodeClass sets: maxPods, kubeReserved, systemReserved and the
    memory.available hard eviction threshold (pkg/providers/instancetype/types.go)."""
    kubelet = mapping(get(node_class.props, "spec", "kubelet")) if node_class else {}
    kube = mapping(get(kubelet, "kubeReserved"))
    system = mapping(get(kubelet, "systemReserved"))
    eviction = get(kubelet, "evictionHard", "memory.available")
    return node_resources.karpenter_allocatable(
        shape,
        max_pods=int_or_none(get(kubelet, "maxPods")),
        kube_reserved=(
            Requests(quantities.cpu_millicores(kube.get("cpu")), quantities.memory_mib(kube.get("memory"))) if kube else None
        ),
        system_reserved=Requests(quantities.cpu_millicores(system.get("cpu")), quantities.memory_mib(system.get("memory"))),
        eviction_mib=(
            quantities.memory_mib(eviction)
            if isinstance(eviction, str) and not eviction.endswith("%")
            else facts.EVICTION_HARD_MEMORY_MIB
        ),
    )


def _nodes_for(pod: PodShape, slots_per_node: int) -> int:
    """Nodes one job takes: one per pod when spread, else as many as its GPU slots fill."""
    if pod.one_per_node:
        return pod.pods
    gpus = pod.extended.get(GPU_RESOURCE, 0)
    per_node = max(slots_per_node // gpus, 1) if gpus else pod.pods
    return math.ceil(pod.pods / per_node)


def _blocked(pool: DeclaredNodePool, shapes: list[catalog.InstanceType], kinds: list[str]) -> list[str]:
    what = f"NodePool {pool.name}"
    problems: list[str] = []
    if pool.node_class is None:
        ref = get(pool.spec, "template", "spec", "nodeClassRef", "name")
        problems.append(f"{what} names EC2NodeClass {ref}, which the stack does not declare: Karpenter launches nothing for it")
    if not shapes:
        terms = "; ".join(f"{get(r, 'key')} {get(r, 'operator')} {items(get(r, 'values'))}" for r in pool.requirements)
        problems.append(f"{what}'s requirements ({terms}) exclude every instance type: Karpenter can launch no node for it")
    if not kinds:
        problems.append(f"{what} allows no capacity type its EC2NodeClass can serve: Karpenter can launch no node for it")
    return problems


def karpenter_views(resources: Sequence[Resource], cluster: Cluster, pool: Pool, pod: PodShape) -> list[list[NodeView]]:
    """Per NodePool whose labels agree with the pod's selector: per instance type it admits,
    Karpenter's model of the node and the node as its kubelet reports it."""
    found: list[list[NodeView]] = []
    for node_pool in declared_node_pools(resources):
        labels = node_pool.labels
        if any(labels.get(k) != v for k, v in pod.node_selector.items()):
            continue
        shapes, kinds = instance_types(node_pool), capacity_types(node_pool)
        blocked = _blocked(node_pool, shapes, kinds)
        if blocked:
            found.append([_blocked_view(node_pool, blocked)])
            continue
        views: list[NodeView] = []
        for shape in shapes:
            views += _shape_views(node_pool, shape, kinds, cluster, pool, pod)
        found.append(views)
    return found


def _blocked_view(node_pool: DeclaredNodePool, blocked: list[str]) -> NodeView:
    return NodeView(
        what=f"NodePool {node_pool.name}",
        resource=node_pool.resource.key,
        labels=None,
        taints=None,
        extended=None,
        left=None,
        daemonsets=(),
        max_nodes=None,
        blocked=tuple(blocked),
    )


def _shape_views(
    node_pool: DeclaredNodePool, shape: catalog.InstanceType, kinds: list[str], cluster: Cluster, pool: Pool, pod: PodShape
) -> list[NodeView]:
    taints = node_pool.taints
    labels = {
        **_instance_labels(shape),
        facts.NODE_POOL_LABEL: node_pool.name,
        facts.CAPACITY_TYPE_LABEL: kinds[0],
        **node_pool.labels,
    }
    physical = shape.gpus_per_node
    extended: dict[str, int] | None = None
    daemonsets: dict[str, Requests] = {}
    if taints is not None:
        daemonsets = cluster.daemonsets(labels, taints, shape.name)
        slots = cluster.gpu_slots(labels, taints, physical, pool.gpu.mig_profiles.get(pool.mig_profile or "", 1))
        extended = {GPU_RESOURCE: physical if slots is None else slots}
    # Once initialized a node counts against the GPU limit with what it reports: its slots.
    reported = physical if extended is None else extended[GPU_RESOURCE]
    max_nodes = node_pool.max_nodes(reported)
    blocked: list[str] = []
    if extended is not None:
        nodes = _nodes_for(pod, reported)
        gpu_limit, node_limit = node_pool.gpu_limit, node_pool.node_limit
        if node_limit is not None and nodes > node_limit:
            blocked.append(
                f"NodePool {node_pool.name}'s limits allow {node_limit} nodes; one job needs {nodes} {shape.name} "
                "node(s): Karpenter stops launching below that"
            )
        if max_nodes is not None and max_nodes < pool.max_nodes:
            # Kueue's quotas count the pool's maxNodes of slots; nodes past this never come.
            blocked.append(
                f"NodePool {node_pool.name}'s limits admit {max_nodes} {shape.name} node(s) as Karpenter counts them "
                f"({reported} {GPU_RESOURCE} each once initialized), below the pool's maxNodes {pool.max_nodes}"
            )
        if gpu_limit is not None and nodes * reported > gpu_limit:
            blocked.append(
                f"NodePool {node_pool.name}'s limits allow {gpu_limit} {GPU_RESOURCE}; one job needs {nodes} {shape.name} "
                f"node(s), which report {nodes * reported} {GPU_RESOURCE}: Karpenter stops launching below that"
            )
    used = sum(daemonsets.values(), node_resources.NOTHING)

    def view(what: str, left: Requests, problems: tuple[str, ...] = (), margin: Requests = node_resources.NOTHING) -> NodeView:
        return NodeView(
            what=what,
            resource=node_pool.resource.key,
            labels=labels,
            taints=taints,
            extended=extended,
            left=left,
            daemonsets=tuple(sorted(daemonsets)),
            max_nodes=max_nodes,
            sources={GPU_RESOURCE: "its instance type's GPUs and the device plugin config its label selects"},
            blocked=problems,
            margin=margin,
        )

    return [
        view(
            f"Karpenter's model of a {shape.name} node of NodePool {node_pool.name}",
            karpenter_allocatable(shape, node_pool.node_class) - used,
            tuple(blocked),
        ),
        view(
            f"a {shape.name} node of NodePool {node_pool.name}",
            node_resources.allocatable("aws", shape) - used,
            margin=node_resources.JOB_MARGIN,
        ),
    ]

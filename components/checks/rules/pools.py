"""Rules over GPU pools, EKS node groups and GKE node pools alike: taints, scale, spot, and every job fits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from components.checks.declared import EKS_NODE_GROUP, GKE_NODE_POOL, Resource
from components.checks.declared import get as _get
from components.checks.declared import items as _items
from components.checks.declared import mapping as _mapping
from components.checks.declared import node_group_instance_types
from components.checks.fit import proof
from components.checks.fit.karpenter import DeclaredNodePool, capacity_types, declared_node_pools, instance_types
from components.checks.rules.base import Context, Violation, int_or_none, is_unknown, truthy
from components.facts import catalog
from components.pools import GPU_TAINT_KEY, POOL_LABEL

# Both NodeGroup taints and GKE node pool taints spell the effect this way; Karpenter's NodePool
# templates as Kubernetes does.
NO_SCHEDULE = "NO_SCHEDULE"
_NO_SCHEDULE_SPELLINGS = (NO_SCHEDULE, "NoSchedule")


@dataclass(frozen=True)
class PoolView:
    """A GPU pool as the pool rules see it, whether an EKS node group or a GKE node pool."""

    resource: Resource
    gpus_per_node: int
    min_nodes: int | None
    max_nodes: int | None
    # None when the taints are unknown during a preview.
    tainted: bool | None


def _catalog_gpus(instance_type: Any) -> int:
    shape = catalog.INSTANCE_TYPES.get(instance_type) if isinstance(instance_type, str) else None
    return shape.gpus_per_node if shape else 0


def _has_gpu_taint(taints: Any) -> bool | None:
    if is_unknown(taints):
        return None
    return any(
        _get(t, "key") == GPU_TAINT_KEY and _get(t, "effect") in _NO_SCHEDULE_SPELLINGS for t in _items(taints)
    )


def _eks_pool(res: Resource, resources: Sequence[Resource]) -> PoolView | None:
    props = res.props
    types = node_group_instance_types(res, resources)
    gpus = max((_catalog_gpus(t) for t in types), default=0)
    ami = _get(props, "amiType")
    labelled = POOL_LABEL in _mapping(_get(props, "labels"))
    if not (gpus or labelled or (isinstance(ami, str) and "NVIDIA" in ami)):
        return None
    return PoolView(
        resource=res,
        gpus_per_node=gpus,
        min_nodes=int_or_none(_get(props, "scalingConfig", "minSize")),
        max_nodes=int_or_none(_get(props, "scalingConfig", "maxSize")),
        tainted=_has_gpu_taint(_get(props, "taints")),
    )


def _gke_pool(res: Resource) -> PoolView | None:
    props = res.props
    node_config = _mapping(_get(props, "nodeConfig"))
    accelerators = _items(_get(node_config, "guestAccelerators"))
    gpus = sum(int_or_none(_get(a, "count")) or 0 for a in accelerators) or _catalog_gpus(
        _get(node_config, "machineType")
    )
    labelled = POOL_LABEL in _mapping(_get(node_config, "labels"))
    if not (gpus or accelerators or labelled):
        return None
    low, high = _gke_node_range(props)
    return PoolView(
        resource=res,
        gpus_per_node=gpus,
        min_nodes=low,
        max_nodes=high,
        tainted=_has_gpu_taint(_get(node_config, "taints")),
    )


def _karpenter_pool(node_pool: DeclaredNodePool) -> PoolView:
    """A NodePool: no minimum (Karpenter launches for pending pods only), at most as many nodes of
    its largest admitted type as its `nodes` limit and its GPU limit (counted in physical GPUs, as a
    launching node counts) both hold; no limit, no maximum."""
    gpus = max((shape.gpus_per_node for shape in instance_types(node_pool)), default=0)
    return PoolView(
        resource=node_pool.resource,
        gpus_per_node=gpus,
        min_nodes=0,
        max_nodes=node_pool.max_nodes(gpus),
        tainted=_has_gpu_taint(_get(node_pool.spec, "template", "spec", "taints")),
    )


def _gke_node_range(props: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """Pool-wide min and max nodes: total* counts, or per-zone counts times the pool's zones."""
    autoscaling = _get(props, "autoscaling")
    if autoscaling is None:
        fixed = int_or_none(_get(props, "nodeCount"))
        return fixed, fixed
    total_min = int_or_none(_get(autoscaling, "totalMinNodeCount"))
    total_max = int_or_none(_get(autoscaling, "totalMaxNodeCount"))
    if total_min is not None or total_max is not None:
        return total_min, total_max
    zones = len(_items(_get(props, "nodeLocations"))) or 1
    per_min = int_or_none(_get(autoscaling, "minNodeCount"))
    per_max = int_or_none(_get(autoscaling, "maxNodeCount"))
    return (
        None if per_min is None else per_min * zones,
        None if per_max is None else per_max * zones,
    )


def gpu_pools(resources: Sequence[Resource]) -> list[PoolView]:
    """Every EKS node group, Karpenter NodePool and GKE node pool whose nodes carry NVIDIA GPUs."""
    views: list[PoolView] = [_karpenter_pool(p) for p in declared_node_pools(resources)]
    for res in resources:
        view = _eks_pool(res, resources) if res.type == EKS_NODE_GROUP else _gke_pool(res) if res.type == GKE_NODE_POOL else None
        if view is not None:
            views.append(view)
    return views


def gpu_pool_tainted(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    return [
        Violation(
            "gpu-pool-tainted",
            pool.resource.key,
            f"GPU pool has no {GPU_TAINT_KEY} taint with effect {NO_SCHEDULE}: any pod could land on its GPU nodes",
        )
        for pool in gpu_pools(resources)
        if pool.tainted is False
    ]


def gpu_pool_scale_to_zero(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    if ctx.environment == "prod":
        return []
    return [
        Violation(
            "gpu-pool-scale-to-zero",
            pool.resource.key,
            f"GPU pool keeps {pool.min_nodes} node(s) running in {ctx.environment}: set its minimum to 0",
        )
        for pool in gpu_pools(resources)
        if pool.min_nodes
    ]


def gpu_pool_max_nodes(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    return [
        Violation(
            "gpu-pool-max-nodes",
            pool.resource.key,
            f"GPU pool may scale to {pool.max_nodes} nodes, above policy.maxNodesPerPool ({ctx.max_nodes_per_pool})",
        )
        for pool in gpu_pools(resources)
        if pool.max_nodes is not None and pool.max_nodes > ctx.max_nodes_per_pool
    ]


def stack_max_gpus(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    pools = gpu_pools(resources)
    total = sum((pool.max_nodes or 0) * pool.gpus_per_node for pool in pools)
    if total <= ctx.max_gpus:
        return []
    parts = ", ".join(
        f"{pool.resource.name} {(pool.max_nodes or 0) * pool.gpus_per_node}" for pool in sorted(pools, key=lambda p: p.resource.name)
    )
    return [
        Violation(
            "stack-max-gpus",
            None,
            f"GPU pools reach {total} GPUs at maximum scale ({parts}), above policy.maxGpus ({ctx.max_gpus})",
        )
    ]


def spot_allowed(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    if ctx.allow_spot:
        return []
    spot: list[Resource] = [p.resource for p in declared_node_pools(resources) if "spot" in capacity_types(p)]
    for res in resources:
        if res.type == EKS_NODE_GROUP and _get(res.props, "capacityType") == "SPOT":
            spot.append(res)
        elif res.type == GKE_NODE_POOL and (
            truthy(_get(res.props, "nodeConfig", "spot")) or truthy(_get(res.props, "nodeConfig", "preemptible"))
        ):
            spot.append(res)
    return [
        Violation(
            "spot-allowed",
            res.key,
            f"spot nodes in {ctx.environment}, where this stack does not allow them (policy.allowSpot)",
        )
        for res in spot
    ]


def job_fits_pool(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """Every job `gpu-platform job` accepts can run on what the stack declares (components.checks.fit)."""
    if ctx.spec is None:
        return []
    return [Violation("job-fits-pool", resource, message) for resource, message in proof.misfits(resources, ctx.spec)]

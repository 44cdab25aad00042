"""Karpenter's side of the model: pools whose nodes come from a NodePool, and Karpenter's scale-up
and scale-down profile. A flavor's nodes are a NodePool's when no node group carries its labels;
where several NodePools do, Karpenter takes the one of highest weight (karpenter.sh docs
"NodePools", spec.weight), and so does the model.

Profile (kubernetes-sigs/karpenter and aws/karpenter-provider-aws at v1.14.1):
- scale-up: Karpenter batches pending pods for up to `batchMaxDuration` (chart settings, 10s) and
  launches through CreateFleet at once, with no autoscaler loop in between: the family's
  SCALE_UP_S less the cluster-autoscaler's 30 s reaction (model.SCALE_UP_S) plus the batch window.
- scale-down: `consolidationPolicy: WhenEmpty` removes a node once it has been empty for the
  NodePool's `consolidateAfter`; there is no delay after a scale-up, and no expendable-priority
  cutoff (every pending pod gets a node).
- capacity: `limits` in nvidia.com/gpu over the instance type's GPUs is the most nodes; the
  capacity-type requirement says spot or not.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from components.checks.declared import KARPENTER_NODE_POOL, get, items, mapping
from components.facts import catalog
from components.facts import karpenter as facts
from components.pools import GPU_RESOURCE
from infra.tools.simulate import read_nodes
from infra.tools.simulate.model import SCALE_UP_S, SPOT_INTERRUPTIONS_PER_NODE_DAY, Autoscaler, ModelError, Overrides, PoolModel
from infra.tools.simulate.objects import Objects, duration_s, int_of, name_of, pool_of

# The cluster-autoscaler's reaction time inside SCALE_UP_S (cluster-autoscaler FAQ: scale-up
# within 30 s on clusters under 100 nodes), which Karpenter does not spend.
AUTOSCALER_REACTION_S = 30.0
# Karpenter has no expendable-pods cutoff: the lowest int32 priority keeps every pod counted.
NO_CUTOFF = -(2**31)


def _requirement(node_pool: Mapping[str, Any], key: str) -> list[str] | None:
    for requirement in items(get(node_pool, "spec", "template", "spec", "requirements")):
        if get(requirement, "key") == key and get(requirement, "operator") == "In":
            return [str(v) for v in items(get(requirement, "values"))]
    return None


def _matches(labels: Any, selector: Mapping[str, Any]) -> bool:
    have = mapping(labels)
    return all(str(have.get(k)) == str(v) for k, v in selector.items())


def node_pools_for(objects: Objects, selector: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """NodePools whose nodes carry `selector`, highest weight first."""
    found = [r["inputs"] for r in objects.of(KARPENTER_NODE_POOL) if _matches(get(r["inputs"], "spec", "template", "metadata", "labels"), selector)]
    return sorted(found, key=lambda p: -(int(get(p, "spec", "weight") or 0)))


def describe(node_pool: Mapping[str, Any]) -> dict[str, Any]:
    """What the model takes from a NodePool, for the run's parameters."""
    return {
        "weight": int(get(node_pool, "spec", "weight") or 0),
        "capacity_types": _requirement(node_pool, facts.CAPACITY_TYPE_LABEL) or [facts.ON_DEMAND],
        "limit_gpus": get(node_pool, "spec", "limits", GPU_RESOURCE),
        "consolidate_after": get(node_pool, "spec", "disruption", "consolidateAfter"),
    }


def pool_model(objects: Objects, flavor: str, node_pool: Mapping[str, Any], overrides: Overrides) -> PoolModel:
    what = f"NodePool {name_of(node_pool)}"
    types = _requirement(node_pool, facts.INSTANCE_TYPE_LABEL)
    if not types or len(types) != 1 or types[0] not in catalog.INSTANCE_TYPES:
        raise ModelError(f"{what}: one catalog instance type expected in its {facts.INSTANCE_TYPE_LABEL} requirement, got {types}")
    shape = catalog.INSTANCE_TYPES[types[0]]
    labels = {str(k): str(v) for k, v in mapping(get(node_pool, "spec", "template", "metadata", "labels")).items()}
    config = read_nodes._plugin_config(objects, labels)  # pyright: ignore[reportPrivateUsage]
    if get(config, "flags", "migStrategy") == "single":
        raise ModelError(f"{what}: MIG on Karpenter nodes is not modeled")
    slots = shape.gpus_per_node
    for strategy in ("timeSlicing", "mps"):
        for resource in items(get(config, "sharing", strategy, "resources")):
            if get(resource, "name") == GPU_RESOURCE:
                slots = shape.gpus_per_node * int_of(get(resource, "replicas"), f"{what} replicas")
    sharing, max_pod = read_nodes._plugin_sharing(config or {}, slots)  # pyright: ignore[reportPrivateUsage]
    limit = get(node_pool, "spec", "limits", GPU_RESOURCE)
    if limit is None:
        raise ModelError(f"{what}: no {GPU_RESOURCE} limit; an unlimited NodePool is not modeled")
    capacity = describe(node_pool)["capacity_types"]
    if flavor in overrides.scale_up_s:
        scale_up = overrides.scale_up_s[flavor]
    else:
        family = catalog.family(shape.name)
        if ("aws", family) not in SCALE_UP_S:
            raise ModelError(f"pool {flavor}: no scale-up figure for aws family {family}; pass --scale-up-s {flavor}=SECONDS")
        scale_up = SCALE_UP_S[("aws", family)] - AUTOSCALER_REACTION_S + facts.BATCH_MAX_SECONDS
    spot = capacity == [facts.SPOT]
    return PoolModel(
        name=flavor,
        cloud="aws",
        instance_type=shape.name,
        gpu_model=shape.gpu,
        gpus_per_node=shape.gpus_per_node,
        slots_per_node=slots,
        sharing=sharing,
        max_pod_slots=max_pod,
        min_nodes=0,
        max_nodes=int_of(limit, f"{what} limit") // shape.gpus_per_node,
        spot=spot,
        usd_per_node_hour=shape.usd_per_hour,
        scale_up_s=scale_up,
        interruptions_per_node_day=overrides.spot_rates.get(flavor, SPOT_INTERRUPTIONS_PER_NODE_DAY) if spot else 0.0,
        autoscaled=True,
    )


def autoscaler(objects: Objects, node_groups: Callable[[Objects], Autoscaler]) -> Autoscaler:
    """Karpenter's profile where it provisions every pool, else the cluster-autoscaler's
    (`node_groups`). Beside
    node groups the cluster-autoscaler's release sets the timings (one profile per model): the
    NodePools' consolidateAfter equals its scale-down-unneeded-time, and its delay after a
    scale-up keeps NodePool nodes up a little longer than Karpenter would."""
    pools = [r["inputs"] for r in objects.of(KARPENTER_NODE_POOL)]
    if not pools or objects.release("karpenter") is None or objects.release("cluster-autoscaler") is not None:
        return node_groups(objects)
    afters = {str(get(p, "spec", "disruption", "consolidateAfter")) for p in pools}
    if len(afters) != 1 or afters == {"Never"}:
        raise ModelError(f"NodePools: one consolidateAfter expected across them, got {sorted(afters)}")
    return Autoscaler(
        unneeded_s=duration_s(afters.pop()),
        delay_after_add_s=0.0,
        expendable_below=NO_CUTOFF,
        pack_most_allocated=False,
        source="Karpenter NodePools disruption.consolidateAfter (WhenEmpty), no delay after scale-up",
    )


def split(objects: Objects, resources: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], dict[str, Mapping[str, Any]]]:
    """The records without the flavors whose nodes only NodePools carry, and those flavors'
    NodePools (highest weight) by flavor name."""
    groups = objects.of("aws:eks/nodeGroup:NodeGroup")
    karpenter: dict[str, Mapping[str, Any]] = {}
    for flavor in objects.kueue("ResourceFlavor"):
        selector = mapping(get(flavor, "spec", "nodeLabels"))
        if any(_matches(get(g["inputs"], "labels"), selector) for g in groups):
            continue
        found = node_pools_for(objects, selector)
        if found:
            karpenter[pool_of(flavor)] = found[0]
    kept = [
        r
        for r in resources
        if not (str(r["type"]).endswith(":ResourceFlavor") and pool_of(r["inputs"]) in karpenter)
    ]
    return kept, karpenter

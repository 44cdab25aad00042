"""The nodes' side of the model: each pool's nodes from its node group or node pool, matched to its
flavor, and the autoscaler's timings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import yaml

from components.checks import declared
from components.checks.declared import ASG_TAG, get, items, mapping
from components.checks.rules import scheduling
from components.facts import aws as aws_facts
from components.facts import catalog
from components.pools import DEVICE_PLUGIN_CONFIG_LABEL, GPU_RESOURCE
from infra.tools.simulate.model import (
    AUTOSCALER_DELAY_AFTER_ADD_S,
    AUTOSCALER_UNNEEDED_S,
    GKE_PACKING_PROFILE,
    SCALE_UP_S,
    SPOT_INTERRUPTIONS_PER_NODE_DAY,
    Autoscaler,
    ModelError,
    Overrides,
    PoolModel,
    Refused,
)
from infra.tools.simulate.objects import Objects, duration_s, int_of, name_of, pool_of


def aws_autoscaler(objects: Objects) -> Autoscaler:
    values = objects.release("cluster-autoscaler")
    if values is None:
        raise ModelError("no cluster-autoscaler release: the AWS node groups would never scale")
    args = mapping(get(values, "extraArgs"))

    def flag(name: str, default: float) -> float:
        return duration_s(str(args[name])) if name in args else default

    return Autoscaler(
        unneeded_s=flag("scale-down-unneeded-time", AUTOSCALER_UNNEEDED_S),
        delay_after_add_s=flag("scale-down-delay-after-add", AUTOSCALER_DELAY_AFTER_ADD_S),
        expendable_below=int(args.get("expendable-pods-priority-cutoff", scheduling.AUTOSCALER_PRIORITY_CUTOFF)),
        pack_most_allocated=False,
        source="cluster-autoscaler release extraArgs (upstream defaults where unset)",
    )


def gke_autoscaler(objects: Objects) -> Autoscaler:
    clusters = objects.of(declared.GKE_CLUSTER)
    profile = get(clusters[0]["inputs"], "clusterAutoscaling", "autoscalingProfile") if clusters else None
    return Autoscaler(
        unneeded_s=AUTOSCALER_UNNEEDED_S,
        delay_after_add_s=AUTOSCALER_DELAY_AFTER_ADD_S,
        expendable_below=scheduling.AUTOSCALER_PRIORITY_CUTOFF,
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


def _plugin_config(objects: Objects, labels: Mapping[str, str]) -> dict[str, Any] | None:
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


def _resource(record: Mapping[str, Any]) -> declared.Resource:
    """A synthesis record as the checks' declared.Resource, for their shared readers."""
    depends_on = tuple(str(key) for key in items(get(record, "options", "dependsOn")))
    return declared.Resource(str(record["type"]), str(record["name"]), mapping(record["inputs"]), depends_on=depends_on)


def _aws_nodes(objects: Objects, record: Mapping[str, Any]) -> _Nodes:
    props = record["inputs"]
    what = f"node group {get(props, 'nodeGroupName') or record['name']}"
    # Where EKS reads them: the node group's own, else its launch template's (Capacity Blocks).
    types = declared.node_group_instance_types(_resource(record), [_resource(r) for r in objects.of(declared.LAUNCH_TEMPLATE)])
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
    slots = int_of(template_gpus[0], f"{what} GPU template tag")
    config = _plugin_config(objects, {str(k): str(v) for k, v in mapping(get(props, "labels")).items()})
    sharing, max_pod = _plugin_sharing(config or {}, slots)
    return _Nodes(
        instance_type=shape.name,
        gpus_per_node=shape.gpus_per_node,
        slots_per_node=slots,
        sharing=sharing,
        max_pod_slots=max_pod,
        min_nodes=int_of(get(props, "scalingConfig", "minSize"), f"{what} minSize"),
        max_nodes=int_of(get(props, "scalingConfig", "maxSize"), f"{what} maxSize"),
        spot=get(props, "capacityType") == "SPOT",
    )


def _gke_nodes(objects: Objects, record: Mapping[str, Any]) -> _Nodes:
    props = record["inputs"]
    what = f"node pool {get(props, 'name') or record['name']}"
    node_config = mapping(get(props, "nodeConfig"))
    shape = _shape(str(get(node_config, "machineType")), what)
    accelerators = items(get(node_config, "guestAccelerators"))
    physical = sum(int_of(get(a, "count"), f"{what} accelerator count") for a in accelerators)
    partition = next((str(get(a, "gpuPartitionSize")) for a in accelerators if get(a, "gpuPartitionSize")), None)
    profiles = catalog.GPU_MODELS[shape.gpu].mig_profiles
    if partition is not None and partition not in profiles:
        raise ModelError(f"{what}: MIG partition {partition} is not a {shape.gpu} profile")
    instances = profiles[partition] if partition is not None else 1
    config = _plugin_config(objects, {str(k): str(v) for k, v in mapping(get(node_config, "labels")).items()})
    if config is not None:
        replicas = [
            int_of(get(r, "replicas"), f"{what} replicas")
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
        clients = [int_of(c, f"{what} clients") for a in accelerators if (c := get(a, "gpuSharingConfig", "maxSharedClientsPerGpu"))]
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
        low, high = int_of(autoscaling.get("minNodeCount", 0), what) * zones, int_of(autoscaling["maxNodeCount"], what) * zones
    else:
        raise Refused("fixed-size-node-pool", f"{what}: no autoscaling limits; fixed-size GPU node pools are not modeled")
    return _Nodes(
        instance_type=shape.name,
        gpus_per_node=physical,
        slots_per_node=slots,
        sharing=sharing,
        max_pod_slots=max_pod,
        min_nodes=int_of(low, f"{what} minimum"),
        max_nodes=int_of(high, f"{what} maximum"),
        spot=get(node_config, "spot") is True or get(node_config, "preemptible") is True,
    )


def _existing_nodes(objects: Objects, outputs: Mapping[str, Any], pool: str) -> _Nodes:
    """Nodes of an existing cluster: only the facts the stack declares (its gpuPools output);
    they neither scale nor get interrupted."""
    declared = mapping(get(outputs, "gpuPools", pool))
    if not declared:
        raise ModelError(f"pool {pool}: no gpuPools output declares its nodes")
    gpus = int_of(declared.get("gpusPerNode"), f"pool {pool} gpusPerNode")
    slots = int_of(declared.get("gpuSlotsPerNode"), f"pool {pool} gpuSlotsPerNode")
    labels = {str(k): str(v) for k, v in mapping(get(outputs, "devicePluginLabels", pool)).items()}
    config = _plugin_config(objects, labels)
    sharing, max_pod = _plugin_sharing(config or {}, slots)
    nodes = int_of(declared.get("maxNodes"), f"pool {pool} maxNodes")
    return _Nodes(None, gpus, slots, sharing, max_pod, nodes, nodes, False)


def _matches(labels: Any, selector: Mapping[str, Any]) -> bool:
    have = mapping(labels)
    return all(str(have.get(k)) == str(v) for k, v in selector.items())


def pool_models(
    objects: Objects, outputs: Mapping[str, Any], cloud: str, overrides: Overrides
) -> tuple[PoolModel, ...]:
    pools = []
    for flavor in sorted(objects.kueue("ResourceFlavor"), key=pool_of):
        name = pool_of(flavor)
        selector = mapping(get(flavor, "spec", "nodeLabels"))
        if cloud == "aws":
            found = [r for r in objects.of(declared.EKS_NODE_GROUP) if _matches(get(r["inputs"], "labels"), selector)]
        elif cloud == "gcp":
            found = [r for r in objects.of(declared.GKE_NODE_POOL) if _matches(get(r["inputs"], "nodeConfig", "labels"), selector)]
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

"""Per-pool facts derived from the spec and the catalog: pure functions, no Pulumi.

A `Pool` is what every consumer needs to know about one GPU pool (hardware, scale, sharing,
the labels and taint its nodes carry), so the cloud wings, the Kubernetes layer and the
summary never re-derive it, and never disagree.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass

from components import naming
from components.facts import catalog
from components.facts.capacity import ON_REQUEST, RESERVED, Way
from components.facts.gpudirect import GPU_SUBNET_BLOCK, GPUDIRECT, SUBNETS_PER_POOL, GpuDirect
from components.spec import NodePoolSpec, PlatformSpec, SharingMode
from components.spec.gcp_rules import gpu_subnet_slot
from components.spec.platform_rules import gpus_per_node, slots_per_gpu

# Label keys we own; the NVIDIA ones are read by the device plugin and GPU feature discovery.
POOL_LABEL = "gpu-platform.io/pool"
GPU_MODEL_LABEL = "gpu-platform.io/gpu-model"
# The device plugin picks its named config from this node label (k8s-device-plugin README).
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
# The taint that keeps non-GPU pods off GPU nodes; the device plugin and GPU pods tolerate it.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    # Kubernetes spelling; each wing maps it to its API's spelling (NO_SCHEDULE on EKS/GKE).
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class Pool:
    name: str
    gpu: catalog.GpuModel
    # None for pools of an existing cluster, which have no catalog shape.
    instance_type: catalog.InstanceType | None
    gpus_per_node: int
    min_nodes: int
    max_nodes: int
    # How the nodes are obtained (components.facts.capacity).
    provisioning: Way
    sharing_mode: SharingMode
    # Schedulable `nvidia.com/gpu` per physical GPU: replicas, MIG instances, or 1.
    slots_per_gpu: int
    mig_profile: str | None
    node_selector: dict[str, str]

    @property
    def spot(self) -> bool:
        return self.provisioning == "spot"

    @property
    def reserved(self) -> bool:
        """Nodes come from a reservation (a capacity reservation or a Capacity Block)."""
        return self.provisioning in RESERVED

    @property
    def on_request(self) -> bool:
        """Nodes exist only while a request is granted (flex-start, queued): the pool's capacity is
        obtainable on request, never standing."""
        return self.provisioning in ON_REQUEST

    @property
    def device_plugin_config(self) -> str:
        """The device-plugin named config this pool's nodes select (one per sharing profile)."""
        if self.sharing_mode == "none":
            return "none"
        if self.sharing_mode == "mig":
            return "mig-single"
        return f"{self.sharing_mode}-{self.slots_per_gpu}"

    @property
    def labels(self) -> dict[str, str]:
        """Labels the wing puts on the pool's nodes; Kueue flavors and jobs select on them."""
        return {
            POOL_LABEL: self.name,
            GPU_MODEL_LABEL: self.gpu.name,
            DEVICE_PLUGIN_CONFIG_LABEL: self.device_plugin_config,
        }

    @property
    def selector(self) -> dict[str, str]:
        """What finds this pool's nodes: our pool label, or the given selector on existing nodes."""
        return dict(self.node_selector) if self.node_selector else {POOL_LABEL: self.name}

    @property
    def taint(self) -> Taint:
        return Taint(GPU_TAINT_KEY, GPU_TAINT_VALUE)

    @property
    def slots_per_node(self) -> int:
        """What one node advertises as `nvidia.com/gpu` (scale-from-zero templates need it)."""
        return self.gpus_per_node * self.slots_per_gpu

    @property
    def max_gpus(self) -> int:
        return self.max_nodes * self.gpus_per_node

    @property
    def max_slots(self) -> int:
        return self.max_nodes * self.slots_per_node

    @property
    def usd_per_node_hour(self) -> float | None:
        """Reference on-demand price of one node (catalog.PRICE_NOTE); None on existing nodes.

        N1 machines are priced in the catalog with their minimum T4 count; extra attached T4s
        are charged per GPU at the same per-GPU share.
        """
        shape = self.instance_type
        if shape is None:
            return None
        return shape.usd_per_hour * self.gpus_per_node / shape.gpus_per_node


def derive_pool(spec_pool: NodePoolSpec) -> Pool:
    """The pool facts of one validated pool spec."""
    shape = catalog.INSTANCE_TYPES[spec_pool.instance_type] if spec_pool.instance_type else None
    gpu_name = shape.gpu if shape else spec_pool.gpu_model
    assert gpu_name is not None, "parse_spec guarantees a GPU model"
    gpu = catalog.GPU_MODELS[gpu_name]
    sharing = spec_pool.sharing
    return Pool(
        name=spec_pool.name,
        gpu=gpu,
        instance_type=shape,
        gpus_per_node=gpus_per_node(spec_pool),
        min_nodes=spec_pool.min_nodes,
        max_nodes=spec_pool.max_nodes,
        provisioning=spec_pool.way,
        sharing_mode=sharing.mode,
        slots_per_gpu=slots_per_gpu(spec_pool),
        mig_profile=sharing.profile,
        node_selector=dict(spec_pool.node_selector),
    )


def derive_pools(spec: PlatformSpec) -> list[Pool]:
    return [derive_pool(pool) for pool in spec.node_pools]


# --- GKE GPUDirect pools ---------------------------------------------------------------------
# Which GKE pools get GPUDirect, and the names and addresses of their extra networks: pure, no
# Pulumi, shared by the GCP wing (VPCs, node pool networks, `Network` objects, installers) and the
# job renderer (pod interfaces), so both name the same networks.
#
# A pool gets its family's GPUDirect stack (components.facts.gpudirect) when it is on GKE, its
# machine type has one, and the spec marks it `multiGpuTraining`: the pool runs jobs across nodes.
# Each such pool has networks of its own: a GKENetworkParamSet in device mode takes a VPC (or, for
# RDMA, a subnet) no other one may use (gke-networking-api apis/network/v1
# gkenetworkparamset_types.go: DeviceModeVPCAlreadyInUse, DeviceModeSubnetAlreadyInUse), and a RoCE
# VPC is bound to one zone (VPC docs "RDMA RoCE network profile").

# Pod annotations GKE multi-networking reads (GKE docs "Maximize GPU network bandwidth": the
# workload's `networking.gke.io/default-interface` and `networking.gke.io/interfaces`).
DEFAULT_INTERFACE_ANNOTATION = "networking.gke.io/default-interface"
INTERFACES_ANNOTATION = "networking.gke.io/interfaces"
# The GKE label naming a node's pool (set by GKE on every node).
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"


@dataclass(frozen=True)
class Subnet:
    name: str
    cidr: str
    # The GKE `Network` (and GKENetworkParamSet) that hands this subnet's NIC to pods.
    network_object: str
    device_mode: str


@dataclass(frozen=True)
class Vpc:
    name: str
    mtu: int
    # The zone whose RoCE network profile the VPC takes; None for a gVNIC VPC.
    roce_zone: str | None
    subnets: list[Subnet]


@dataclass(frozen=True)
class FabricPool:
    pool: str
    family: GpuDirect
    vpcs: list[Vpc]

    @property
    def subnets(self) -> list[tuple[Vpc, Subnet]]:
        """The node's extra NICs in interface order (eth1, eth2, ...)."""
        return [(vpc, subnet) for vpc in self.vpcs for subnet in vpc.subnets]


def gpudirect_of(spec: PlatformSpec, spec_pool: NodePoolSpec) -> GpuDirect | None:
    """The pool's GPUDirect stack, or None where it has none."""
    if spec.cloud != "gcp" or not spec_pool.multi_gpu_training or spec_pool.instance_type is None:
        return None
    return GPUDIRECT.get(spec_pool.instance_type)


def network_object(pool: str, network: str) -> str:
    """The cluster-scoped `Network` name of one of the pool's networks: `<pool>-<vpc1|rdma-0|...>`."""
    return f"{pool}-{network}"


def fabric_pools(spec: PlatformSpec) -> list[FabricPool]:
    """Every GPUDirect pool of the stack with its VPCs and subnets, in spec order."""
    found: list[FabricPool] = []
    for spec_pool in spec.node_pools:
        family = gpudirect_of(spec, spec_pool)
        if family is None:
            continue
        base = gpu_subnet_slot(spec_pool) * SUBNETS_PER_POOL
        pool_zones = list(spec_pool.zones or (spec.gcp.zones if spec.gcp else []))
        found.append(FabricPool(spec_pool.name, family, _vpcs(spec, spec_pool.name, family, base, pool_zones)))
    return found


def _subnet(spec: PlatformSpec, pool: str, parts: tuple[str, ...], index: int, network: str, mode: str) -> Subnet:
    block = ipaddress.IPv4Network(GPU_SUBNET_BLOCK)
    cidr = str(list(block.subnets(new_prefix=24))[index])
    return Subnet(naming.resource_name(spec, pool, *parts), cidr,
                  network_object(pool, network), mode)


def _vpcs(spec: PlatformSpec, pool: str, family: GpuDirect, base: int, zones: list[str]) -> list[Vpc]:
    if family.stack != "rdma":
        return [
            Vpc(naming.resource_name(spec, pool, "gpu", str(i + 1)), family.mtu, None,
                [_subnet(spec, pool, ("gpu", str(i + 1)), base + i, name, "NetDevice")])
            for i, name in enumerate(family.network_names)
        ]
    gvnic, *rdma = family.network_names
    return [
        Vpc(naming.resource_name(spec, pool, "gvnic"), family.mtu, None,
            [_subnet(spec, pool, ("gvnic",), base, gvnic, "NetDevice")]),
        Vpc(naming.resource_name(spec, pool, "rdma"), family.mtu, zones[0] if zones else None,
            [_subnet(spec, pool, ("rdma", str(i)), base + 1 + i, name, "RDMA") for i, name in enumerate(rdma)]),
    ]


def gpudirect_annotations(pool: str, family: GpuDirect) -> dict[str, str]:
    """The interface annotations of a pod on the pool: eth0 on the cluster's network, then the
    family's GPU NICs by the pool's `Network` names."""
    interfaces = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": interface, "network": network_object(pool, network)}
        for interface, network in family.pod_networks
    ]
    return {DEFAULT_INTERFACE_ANNOTATION: "eth0", INTERFACES_ANNOTATION: json.dumps(interfaces)}

"""Which GKE pools get GPUDirect, and the names and addresses of their extra networks: pure, no
Pulumi, shared by the GCP wing (VPCs, node pool networks, `Network` objects, installers) and the
job renderer (pod interfaces), so both name the same networks.

A pool gets its family's GPUDirect stack (components.facts.gpudirect) when it is on GKE, its
machine type has one, and the spec marks it `multiGpuTraining`: the pool runs jobs across nodes.
Each such pool has networks of its own: a GKENetworkParamSet in device mode takes a VPC (or, for
RDMA, a subnet) no other one may use (gke-networking-api apis/network/v1
gkenetworkparamset_types.go: DeviceModeVPCAlreadyInUse, DeviceModeSubnetAlreadyInUse), and a RoCE
VPC is bound to one zone (VPC docs "RDMA RoCE network profile").
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from components import naming
from components.facts.gpudirect import GPUDIRECT, GpuDirect
from components.spec import NodePoolSpec, PlatformSpec

# Pod annotations GKE multi-networking reads (GKE docs "Maximize GPU network bandwidth": the
# workload's `networking.gke.io/default-interface` and `networking.gke.io/interfaces`).
DEFAULT_INTERFACE_ANNOTATION = "networking.gke.io/default-interface"
INTERFACES_ANNOTATION = "networking.gke.io/interfaces"
# The GKE label naming a node's pool (set by GKE on every node).
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
# The extra subnets: one /24 each out of this /16, 16 per pool (a pool needs at most 9).
FABRIC_BLOCK = "192.168"
SUBNETS_PER_POOL = 16


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


def gpudirect(spec: PlatformSpec, spec_pool: NodePoolSpec) -> GpuDirect | None:
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
        family = gpudirect(spec, spec_pool)
        if family is None:
            continue
        base = len(found) * SUBNETS_PER_POOL
        pool_zones = list(spec_pool.zones or (spec.gcp.zones if spec.gcp else []))
        found.append(FabricPool(spec_pool.name, family, _vpcs(spec, spec_pool.name, family, base, pool_zones)))
    return found


def _subnet(spec: PlatformSpec, pool: str, parts: tuple[str, ...], index: int, network: str, mode: str) -> Subnet:
    return Subnet(naming.resource_name(spec, pool, *parts), f"{FABRIC_BLOCK}.{index}.0/24",
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


def pod_annotations(pool: str, family: GpuDirect) -> dict[str, str]:
    """The interface annotations of a pod on the pool: eth0 on the cluster's network, then the
    family's GPU NICs by the pool's `Network` names."""
    interfaces = [{"interfaceName": "eth0", "network": "default"}] + [
        {"interfaceName": interface, "network": network_object(pool, network)}
        for interface, network in family.pod_networks
    ]
    return {DEFAULT_INTERFACE_ANNOTATION: "eth0", INTERFACES_ANNOTATION: json.dumps(interfaces)}

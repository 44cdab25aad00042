"""The cluster's network: a VPC and subnet with the pods' and services' ranges and Cloud NAT for
private nodes, or the existing network the stack names; and the extra GPU networks of GPUDirect
pools."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.pools import FabricPool
from components.gcp.wing import Wing


@dataclass(frozen=True)
class Network:
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    pods_range: str
    services_range: str
    # The NAT private nodes reach the internet through (None on an existing network).
    nat: gcp.compute.RouterNat | None


def cluster_network(wing: Wing) -> Network:
    existing = wing.gcp.network.existing
    if existing is not None:
        return Network(existing.network, existing.subnetwork, existing.pods_range, existing.services_range, None)
    cidrs = wing.gcp.network.cidrs
    pods_range, services_range = wing.cloud_name("pods"), wing.cloud_name("services")
    vpc = gcp.compute.Network(
        f"{wing.name}-vpc",
        name=wing.cloud_name("vpc"),
        auto_create_subnetworks=False,
        routing_mode="REGIONAL",
        opts=wing.child(),
    )
    subnet = gcp.compute.Subnetwork(
        f"{wing.name}-subnet",
        name=wing.cloud_name("subnet"),
        region=wing.region,
        network=vpc.id,
        ip_cidr_range=cidrs.nodes,
        # Private nodes reach Google APIs (Artifact Registry, Cloud Storage) without NAT.
        private_ip_google_access=True,
        secondary_ip_ranges=[
            gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=pods_range, ip_cidr_range=cidrs.pods),
            gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=services_range, ip_cidr_range=cidrs.services),
        ],
        opts=wing.child(),
    )
    router = gcp.compute.Router(
        f"{wing.name}-router",
        name=wing.cloud_name("router"),
        region=wing.region,
        network=vpc.id,
        opts=wing.child(),
    )
    nat = gcp.compute.RouterNat(
        f"{wing.name}-nat",
        name=wing.cloud_name("nat"),
        router=router.name,
        region=wing.region,
        nat_ip_allocate_option="AUTO_ONLY",
        source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
        subnetworks=[
            gcp.compute.RouterNatSubnetworkArgs(name=subnet.id, source_ip_ranges_to_nats=["ALL_IP_RANGES"])
        ],
        log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
        opts=wing.child(),
    )
    return Network(vpc.id, subnet.id, pods_range, services_range, nat)


@dataclass(frozen=True)
class FabricNics:
    """One GPUDirect pool's extra node networks, in interface order: (VPC name, subnet name)."""

    pool: str
    nics: list[tuple[pulumi.Output[str], pulumi.Output[str]]]


def fabric_networks(wing: Wing, pools: list[FabricPool]) -> dict[str, FabricNics]:
    """The VPCs and subnets of the GPUDirect pools (components.pools plans them).

    MTU and the RoCE network profile as GKE's guides create them (components.facts.gpudirect);
    gVNIC VPCs let the nodes of the pool reach each other on every port, as the guides' firewall
    rules do (NCCL's plugins pick their ports). A RoCE VPC takes no firewall rules (VPC docs
    "RDMA RoCE network profile": RoCE VPCs support no firewall rules).
    """
    found: dict[str, FabricNics] = {}
    for pool in pools:
        nics: list[tuple[pulumi.Output[str], pulumi.Output[str]]] = []
        for plan in pool.vpcs:
            vpc = gcp.compute.Network(
                plan.name,
                name=plan.name,
                auto_create_subnetworks=False,
                routing_mode="REGIONAL",
                mtu=plan.mtu,
                network_profile=(
                    f"projects/{wing.project}/global/networkProfiles/{plan.roce_zone}-vpc-roce" if plan.roce_zone else None
                ),
                opts=wing.child(),
            )
            for subnet in plan.subnets:
                made = gcp.compute.Subnetwork(
                    subnet.name,
                    name=subnet.name,
                    region=wing.region,
                    network=vpc.id,
                    ip_cidr_range=subnet.cidr,
                    opts=wing.child(),
                )
                nics.append((vpc.name, made.name))
            if plan.roce_zone is None:
                gcp.compute.Firewall(
                    f"{plan.name}-internal",
                    name=f"{plan.name}-internal",
                    network=vpc.id,
                    direction="INGRESS",
                    source_ranges=[subnet.cidr for subnet in plan.subnets],
                    allows=[
                        gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["0-65535"]),
                        gcp.compute.FirewallAllowArgs(protocol="udp", ports=["0-65535"]),
                        gcp.compute.FirewallAllowArgs(protocol="icmp"),
                    ],
                    opts=wing.child(),
                )
        found[pool.pool] = FabricNics(pool.pool, nics)
    return found

"""The cluster's network: a new VPC with private subnets behind NAT, or an existing VPC."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.aws import plan
from components.facts import aws as aws_facts
from components.facts import karpenter as karpenter_facts
from components.spec import PlatformSpec

# A new VPC spans this many zones when the spec names none (EKS needs at least two).
DEFAULT_ZONE_COUNT = 3


class Network(pulumi.ComponentResource):
    """Private subnets by zone for the cluster and its nodes.

    New VPC: one private and one public subnet per zone, an internet gateway, NAT (one per
    zone in prod, a single one elsewhere) and an S3 gateway endpoint, so dataset and
    checkpoint traffic skips the NAT. Existing VPC: the spec's subnets, untouched.
    """

    vpc_id: pulumi.Output[str]
    # Private subnet id by availability zone, in zone order.
    private_subnets: dict[str, pulumi.Output[str]]

    def __init__(
        self, name: str, spec: PlatformSpec, region: str, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:aws:Network", name, None, opts)
        settings = spec.aws_settings
        if settings.network.vpc_id is not None:
            self.vpc_id = pulumi.Output.from_input(settings.network.vpc_id)
            self.private_subnets = {
                zone: pulumi.Output.from_input(subnet) for zone, subnet in sorted(settings.network.subnet_ids.items())
            }
        else:
            self._build_vpc(name, spec, region, list(settings.zones) or default_zones())
        self.register_outputs({"vpcId": self.vpc_id, "privateSubnets": self.private_subnets})

    @property
    def zones(self) -> list[str]:
        return list(self.private_subnets)

    def _build_vpc(self, name: str, spec: PlatformSpec, region: str, zones: list[str]) -> None:
        child = pulumi.ResourceOptions(parent=self)
        cluster = spec.cluster.name
        cluster_tag = {f"{aws_facts.CLUSTER_TAG_PREFIX}{cluster}": "shared"}
        # Karpenter's EC2NodeClasses find the node subnets by this tag (components/aws/karpenter.py).
        discovery = {karpenter_facts.DISCOVERY_TAG: cluster} if spec.aws_settings.provisioner == "karpenter" else {}
        vpc = aws.ec2.Vpc(
            name,
            cidr_block=spec.aws_settings.network.effective_vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={"Name": name},
            opts=child,
        )
        gateway = aws.ec2.InternetGateway(name, vpc_id=vpc.id, tags={"Name": name}, opts=child)
        public_routes = aws.ec2.RouteTable(
            f"{name}-public",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id)],
            tags={"Name": f"{name}-public"},
            opts=child,
        )
        private_subnets: dict[str, pulumi.Output[str]] = {}
        private_route_tables: list[pulumi.Output[str]] = []
        nat: aws.ec2.NatGateway | None = None
        for subnets in plan.subnet_plan(spec.aws_settings.network.effective_vpc_cidr, zones):
            zone = subnets.zone
            public = aws.ec2.Subnet(
                f"{name}-public-{zone}",
                vpc_id=vpc.id,
                availability_zone=zone,
                cidr_block=subnets.public_cidr,
                tags={"Name": f"{name}-public-{zone}", aws_facts.PUBLIC_ELB_TAG: "1", **cluster_tag},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-public-{zone}", subnet_id=public.id, route_table_id=public_routes.id, opts=child
            )
            if nat is None or not plan.single_nat(spec.environment):
                address = aws.ec2.Eip(f"{name}-nat-{zone}", domain="vpc", tags={"Name": f"{name}-nat-{zone}"}, opts=child)
                nat = aws.ec2.NatGateway(
                    f"{name}-{zone}",
                    allocation_id=address.id,
                    subnet_id=public.id,
                    tags={"Name": f"{name}-{zone}"},
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]),
                )
            private = aws.ec2.Subnet(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                availability_zone=zone,
                cidr_block=subnets.private_cidr,
                tags={"Name": f"{name}-private-{zone}", aws_facts.INTERNAL_ELB_TAG: "1", **cluster_tag, **discovery},
                opts=child,
            )
            routes = aws.ec2.RouteTable(
                f"{name}-private-{zone}",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                tags={"Name": f"{name}-private-{zone}"},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{zone}", subnet_id=private.id, route_table_id=routes.id, opts=child
            )
            private_subnets[zone] = private.id
            private_route_tables.append(routes.id)
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=private_route_tables,
            tags={"Name": f"{name}-s3"},
            opts=child,
        )
        self.vpc_id = vpc.id
        self.private_subnets = private_subnets


def default_zones() -> list[str]:
    """The region's first zones that need no opt-in (Local and Wavelength Zones do)."""
    zones = aws.get_availability_zones(
        state="available",
        filters=[aws.GetAvailabilityZonesFilterArgs(name="opt-in-status", values=["opt-in-not-required"])],
    )
    return sorted(zones.names)[:DEFAULT_ZONE_COUNT]

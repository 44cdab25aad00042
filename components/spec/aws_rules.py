"""AWS-only rules: the `aws` section, pool AMI/EFA/volume fields, zones in the region."""

from __future__ import annotations

import ipaddress
import re

from components.facts import catalog, limits
from components.facts.aws import ARM64_AMI_TYPES, BOTTLEROCKET_AMI_TYPES
from components.facts.machine_types import system_node_type_problem
from components.spec.karpenter_rules import karpenter_problems, node_group_pools
from components.spec.models import ANYWHERE, AwsSpec, NodePoolSpec, PlatformSpec
from components.spec.problems import ROOT, Problem, cloud_only_problems

# --- AWS-only rules: the `aws` section, pool AMI/EFA/volume fields, zones in the region -----

_AWS_ZONE_SUFFIX = re.compile(r"^[a-z]$")
IAM_PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")
_VPC_ID = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8,17}$")
# Capacity Reservation ids (ODCRs and Capacity Blocks alike) and resource group ARNs (EC2 API
# CapacityReservationTarget: CapacityReservationId, CapacityReservationResourceGroupArn).
_CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{17}$")
_RESOURCE_GROUP_ARN = re.compile(r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[\w.-]+$")
# The AWS wing's own node group for add-ons; a pool of that name would collide with it.
AWS_SYSTEM_POOL = "system"
# A new VPC is cut into per-zone subnets; below /20 the private subnets (one pod IP each with
# the VPC CNI) get too small for GPU nodes full of pods.
_MAX_VPC_PREFIX = 20
# Pool fields only the AWS wing reads.
_AWS_POOL_FIELDS = ("ami_type", "root_volume_gib", "efa")


def aws_problems(spec: PlatformSpec, region: str | None) -> list[Problem]:
    """Rules for the AWS wing; on other clouds, that no AWS-only field is set."""
    if spec.cloud != "aws":
        return cloud_only_problems(spec, "aws", _AWS_POOL_FIELDS)
    settings = spec.aws_settings
    at = f"{ROOT}.aws"
    problems = _aws_network_problems(settings, region, at)
    problems += _aws_endpoint_problems(spec, settings, at)
    problems += [
        Problem(f"{at}.admins[{i}]", f"expected an IAM role or user ARN (arn:aws:iam::<account>:role/<name>), got {arn!r}")
        for i, arn in enumerate(settings.admins)
        if not IAM_PRINCIPAL_ARN.match(arn)
    ]
    nodes = settings.system_nodes
    type_problem = system_node_type_problem("aws", nodes.instance_type)
    if type_problem:
        problems.append(Problem(f"{at}.systemNodes.instanceType", type_problem))
    if nodes.max_nodes < nodes.min_nodes:
        problems.append(
            Problem(f"{at}.systemNodes.maxNodes", f"must be >= minNodes ({nodes.min_nodes}), got {nodes.max_nodes}")
        )
    problems += _node_group_size_problems(nodes.max_nodes, f"{at}.systemNodes.maxNodes")
    grouped = node_group_pools(spec)
    if len(grouped) >= limits.EKS_NODE_GROUPS_PER_CLUSTER:
        problems.append(
            Problem(
                f"{ROOT}.nodePools",
                f"at most {limits.EKS_NODE_GROUPS_PER_CLUSTER - 1} GPU pools: each is an EKS managed node group, and EKS "
                f"allows {limits.EKS_NODE_GROUPS_PER_CLUSTER} per cluster (service quota 'Managed node groups per cluster'), "
                f"one of them the system node group; got {len(grouped)}",
            )
        )
    network_zones = _aws_network_zones(settings)
    for i, pool in enumerate(spec.node_pools):
        problems += _aws_pool_problems(pool, f"{ROOT}.nodePools[{i}]", region, network_zones)
    problems += _aws_device_plugin_problems(spec)
    problems += karpenter_problems(spec)
    return problems


def _aws_network_zones(settings: AwsSpec) -> list[str] | None:
    """The zones the cluster has subnets in, when the stack file says (None: chosen at deploy)."""
    if settings.network.subnet_ids:
        return sorted(settings.network.subnet_ids)
    return list(settings.zones) or None


def _zone_problem(zone: str, region: str | None) -> str | None:
    """Why `zone` cannot be used in `region` (None when it can, or when the region is unknown)."""
    if region is None or (zone.startswith(region) and _AWS_ZONE_SUFFIX.match(zone[len(region):])):
        return None
    return (
        f"{zone!r} is not an availability zone of region {region} (stack file key aws:region); "
        f"zones there are named {region}a, {region}b, ..."
    )


def _zone_problems(zones: list[str], region: str | None, at: str) -> list[Problem]:
    problems: list[Problem] = []
    for i, zone in enumerate(zones):
        if zone in zones[:i]:
            problems.append(Problem(f"{at}[{i}]", f"duplicate zone {zone!r}"))
        message = _zone_problem(zone, region)
        if message:
            problems.append(Problem(f"{at}[{i}]", message))
    return problems


def _aws_network_problems(settings: AwsSpec, region: str | None, at: str) -> list[Problem]:
    network = settings.network
    problems = _zone_problems(settings.zones, region, f"{at}.zones")
    if settings.zones and len(set(settings.zones)) < 2:
        problems.append(Problem(f"{at}.zones", "EKS needs subnets in at least two zones; list two or more"))
    if network.vpc_id is None:
        if network.subnet_ids:
            problems.append(Problem(f"{at}.network.subnetIds", "only with vpcId (an existing VPC); a new VPC gets its own subnets"))
        if network.vpc_cidr is not None:
            problems += _vpc_cidr_problems(network.vpc_cidr, f"{at}.network.vpcCidr")
        return problems
    if not _VPC_ID.match(network.vpc_id):
        problems.append(Problem(f"{at}.network.vpcId", f"expected a VPC id (vpc-0123abcd), got {network.vpc_id!r}"))
    if network.vpc_cidr is not None:
        problems.append(Problem(f"{at}.network.vpcCidr", "only for a new VPC; an existing VPC (vpcId) keeps its CIDR"))
    if settings.zones:
        problems.append(Problem(f"{at}.zones", "not with vpcId: the zones are the keys of network.subnetIds"))
    if len(network.subnet_ids) < 2:
        problems.append(
            Problem(f"{at}.network.subnetIds", "required with vpcId: private subnet ids by zone, in at least two zones")
        )
    for zone, subnet in sorted(network.subnet_ids.items()):
        message = _zone_problem(zone, region)
        if message:
            problems.append(Problem(f"{at}.network.subnetIds.{zone}", message))
        if not _SUBNET_ID.match(subnet):
            problems.append(
                Problem(f"{at}.network.subnetIds.{zone}", f"expected a subnet id (subnet-0123abcd), got {subnet!r}")
            )
    return problems


def _vpc_cidr_problems(cidr: str, at: str) -> list[Problem]:
    try:
        net = ipaddress.IPv4Network(cidr)
    except ValueError:
        return [Problem(at, f"expected an IPv4 network such as 10.0.0.0/16, got {cidr!r}")]
    if net.prefixlen > _MAX_VPC_PREFIX:
        return [Problem(at, f"expected a /{_MAX_VPC_PREFIX} or larger network (pods take one VPC IP each), got /{net.prefixlen}")]
    if not net.is_private:
        return [Problem(at, f"expected a private range (10/8, 172.16/12, 192.168/16), got {cidr}")]
    return []


def _aws_endpoint_problems(spec: PlatformSpec, settings: AwsSpec, at: str) -> list[Problem]:
    problems: list[Problem] = []
    cidrs = settings.public_access_cidrs
    for i, cidr in enumerate(cidrs):
        try:
            ipaddress.IPv4Network(cidr)
        except ValueError:
            problems.append(Problem(f"{at}.publicAccessCidrs[{i}]", f"expected an IPv4 CIDR such as 203.0.113.0/24, got {cidr!r}"))
    public = settings.endpoint_public(spec.environment)
    if not public and cidrs:
        problems.append(Problem(f"{at}.publicAccessCidrs", "only with publicEndpoint: true; the endpoint is private"))
    if public and spec.environment == "prod" and ANYWHERE in settings.endpoint_cidrs():
        problems.append(
            Problem(
                f"{at}.publicEndpoint",
                "prod must not expose the Kubernetes API to the whole internet: set publicEndpoint: false "
                "(run `pulumi up` from inside the VPC) or list your CI/VPN ranges in publicAccessCidrs",
            )
        )
    return problems


def _node_group_size_problems(max_nodes: int, at: str) -> list[Problem]:
    """An EKS managed node group holds 1 to 450 nodes (CreateNodegroup API; EKS service quotas)."""
    if max_nodes < limits.EKS_MIN_MAX_NODES:
        return [Problem(at, f"an EKS managed node group's maximum size is at least {limits.EKS_MIN_MAX_NODES}, got {max_nodes}")]
    if max_nodes > limits.EKS_NODES_PER_NODE_GROUP:
        return [
            Problem(
                at,
                f"at most {limits.EKS_NODES_PER_NODE_GROUP} nodes per EKS managed node group (service quota "
                f"'Nodes per managed node group'), got {max_nodes}",
            )
        ]
    return []


def _aws_pool_problems(pool: NodePoolSpec, at: str, region: str | None, network_zones: list[str] | None) -> list[Problem]:
    problems = _zone_problems(pool.zones, region, f"{at}.zones")
    problems += _node_group_size_problems(pool.max_nodes, f"{at}.maxNodes")
    if pool.name == AWS_SYSTEM_POOL:
        problems.append(Problem(f"{at}.name", f"{AWS_SYSTEM_POOL!r} is the add-on node group's name on aws; pick another"))
    if pool.zones and network_zones is None:
        problems.append(
            Problem(f"{at}.zones", "list the platform's zones in platform.aws.zones too, so the VPC has subnets there")
        )
    elif network_zones is not None:
        problems += [
            Problem(f"{at}.zones[{i}]", f"{zone!r} is not one of the cluster's zones ({', '.join(network_zones)})")
            for i, zone in enumerate(pool.zones)
            if zone not in network_zones and _zone_problem(zone, region) is None
        ]
    problems += _reservation_problems(pool, at)
    shape = catalog.INSTANCE_TYPES.get(pool.instance_type or "")
    if pool.efa:
        if shape is not None and not shape.fast_interconnect:
            efa_types = ", ".join(t for t in catalog.instance_types("aws") if catalog.INSTANCE_TYPES[t].fast_interconnect)
            problems.append(Problem(f"{at}.efa", f"{shape.name} has no EFA; EFA types: {efa_types}"))
        if len(pool.zones) > 1:
            problems.append(
                Problem(f"{at}.zones", "an EFA pool runs in one cluster placement group, which lives in one zone: list one zone")
            )
    if pool.ami_type in ARM64_AMI_TYPES and shape is not None:
        problems.append(
            Problem(f"{at}.amiType", f"{pool.ami_type} runs on Arm (Graviton) instances; {shape.name} is x86_64: use the x86_64 AMI type")
        )
    if pool.ami_type in BOTTLEROCKET_AMI_TYPES and pool.sharing.mode != "none":
        problems.append(
            Problem(
                f"{at}.sharing.mode",
                f"GPU sharing is configured through the NVIDIA device plugin's named configs, which Bottlerocket's "
                f"built-in plugin does not read; use amiType AL2023_x86_64_NVIDIA for {pool.sharing.mode} pools",
            )
        )
    return problems


def _reservation_problems(pool: NodePoolSpec, at: str) -> list[Problem]:
    """What an EC2 launch template can target: a Capacity Reservation by id (an ODCR or a
    Capacity Block), or a resource group of ODCRs. Reservations by id live in one zone, and EC2
    launches into them only from a subnet there (EKS "Create a managed node group with Capacity
    Blocks for ML"): the pool names that zone."""
    reservation = pool.reservation
    if reservation is None or pool.way not in ("reservation", "capacity-block"):
        return []
    if pool.way == "capacity-block" and not _CAPACITY_RESERVATION_ID.match(reservation):
        return [Problem(f"{at}.reservation", f"expected the Capacity Block's reservation id (cr-0123456789abcdef0), got {reservation!r}")]
    if not _CAPACITY_RESERVATION_ID.match(reservation) and not _RESOURCE_GROUP_ARN.match(reservation):
        return [
            Problem(
                f"{at}.reservation",
                "expected an On-Demand Capacity Reservation id (cr-0123456789abcdef0) or the ARN of a resource group "
                f"of reservations (arn:aws:resource-groups:<region>:<account>:group/<name>), got {reservation!r}",
            )
        ]
    if _CAPACITY_RESERVATION_ID.match(reservation) and len(pool.zones) != 1:
        what = "A Capacity Block" if pool.way == "capacity-block" else "An On-Demand Capacity Reservation"
        return [
            Problem(
                f"{at}.zones",
                f"{what} lives in one availability zone and takes instances only from there: set zones to that one zone",
            )
        ]
    return []


def _aws_device_plugin_problems(spec: PlatformSpec) -> list[Problem]:
    """Exactly one nvidia.com/gpu advertiser per node: the AMI family and devicePlugin must agree."""
    bottlerocket = [p.ami_type in BOTTLEROCKET_AMI_TYPES for p in spec.node_pools]
    choice = spec.device_plugin_choice
    if choice is None and any(bottlerocket) and not all(bottlerocket):
        return [
            Problem(
                f"{ROOT}.nodePools",
                "Bottlerocket NVIDIA pools advertise GPUs themselves and AL2023 NVIDIA pools need the NVIDIA "
                "device plugin: use one AMI family for all pools",
            )
        ]
    if choice == "nvidia":
        reason = "Bottlerocket NVIDIA nodes run their own device plugin (each GPU would be advertised twice)"
        clashes = bottlerocket
    elif choice == "managed":
        reason = "AL2023 NVIDIA nodes have no device plugin of their own (no GPU would be advertised)"
        clashes = [not b for b in bottlerocket]
    else:
        return []
    return [
        Problem(f"{ROOT}.nodePools[{i}].amiType", f"devicePlugin: {choice} does not fit {pool.ami_type}: {reason}")
        for i, pool in enumerate(spec.node_pools)
        if clashes[i]
    ]

"""What the AWS wing builds, as plain data: labels, autoscaler tags and values, subnets, EFA.

Pure functions of the spec and the pool facts (no Pulumi resources), so each decision is
tested directly; the components only map these plans onto resources.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

import pulumi

from components import naming
from components.facts import aws as aws_facts
from components.facts import charts
from components.pools import GPU_TAINT_KEY, Pool
from components.spec import Environment, NodePoolSpec, PlatformSpec, Problem

# Label on the system node group; add-ons that must stay off GPU nodes select it.
SYSTEM_ROLE_LABEL = "gpu-platform.io/role"
SYSTEM_ROLE = "system"

# Cluster-autoscaler: where it runs and the service account its IAM role trusts.
AUTOSCALER_NAMESPACE = charts.CLUSTER_AUTOSCALER.namespace
AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"

# Priority expander ranks (highest wins): for the same request, reserved capacity (paid for
# whether used or not) before spot, spot before on-demand, and GPU pools before the system group.
# Ties fall through to least-waste.
RESERVED_PRIORITY = 30
SPOT_PRIORITY = 20
ON_DEMAND_PRIORITY = 10
SYSTEM_PRIORITY = 1

# Label EKS puts on every managed node with the node group's capacity type (EKS "Managed node
# groups": eks.amazonaws.com/capacityType). The scale-from-zero template carries it too, so a job
# that selects on it triggers a scale-up as it would land on a running node.
CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"

# Scale-down timing for training. A GPU node is only removed after 15 idle minutes, so the
# next job of a queue (or a restarted gang) finds it warm; a freshly added node gets 20 minutes
# for the whole gang to land; big GPU nodes boot, join and pull multi-GiB images slowly.
SCALE_DOWN_UNNEEDED_TIME = "15m"
SCALE_DOWN_DELAY_AFTER_ADD = "20m"
MAX_NODE_PROVISION_TIME = "30m"


def capacity_type(pool: Pool) -> str:
    """EKS capacityType of a pool (CreateNodegroup API spelling): CAPACITY_BLOCK for a Capacity
    Block, which EKS requires for one (EKS "Create a managed node group with Capacity Blocks for
    ML"); an On-Demand Capacity Reservation serves on-demand instances."""
    if pool.provisioning == "capacity-block":
        return "CAPACITY_BLOCK"
    return "SPOT" if pool.spot else "ON_DEMAND"


@dataclass(frozen=True)
class ReservationTarget:
    """What a pool's launch template says about capacity reservations (EC2 launch template data:
    CapacityReservationSpecification and InstanceMarketOptions)."""

    reservation_id: str | None
    resource_group_arn: str | None
    # "capacity-block" for a Capacity Block, which EC2 requires beside the reservation id.
    market_type: str | None
    # Launch only into the reservation, never as plain on-demand instances beside it (EC2
    # CapacityReservationPreference `capacity-reservations-only`); None for Capacity Blocks, whose
    # target already admits nothing else.
    preference: str | None

    @property
    def instance_type_in_template(self) -> bool:
        """EKS takes a Capacity Block node group's instance type from its launch template, which must
        name it (EKS "Create a managed node group with Capacity Blocks for ML")."""
        return self.market_type == "capacity-block"


def reservation_target(spec_pool: NodePoolSpec) -> ReservationTarget | None:
    """The reservation a pool's instances launch into, or None for on-demand and spot pools."""
    reservation = spec_pool.reservation
    if reservation is None or not spec_pool.reserved:
        return None
    if spec_pool.way == "capacity-block":
        return ReservationTarget(reservation, None, "capacity-block", None)
    by_group = reservation.startswith("arn:")
    return ReservationTarget(
        None if by_group else reservation, reservation if by_group else None, None, "capacity-reservations-only"
    )


def placement_group(spec_pool: NodePoolSpec) -> bool:
    """EFA pools get a cluster placement group of their own, except on reserved capacity: a
    Capacity Block's instances sit together in an UltraCluster already (EC2 User Guide, "Work with
    Capacity Blocks": no cluster placement group needed), and a reservation's instances go where it
    was made (an ODCR meant for EFA is created in a cluster placement group itself)."""
    return spec_pool.efa and not spec_pool.reserved


def node_labels(pool: Pool, spec_pool: NodePoolSpec) -> dict[str, str]:
    """Labels on a pool's nodes: the pool facts, the accelerator, and EFA where present."""
    labels = {**pool.labels, aws_facts.ACCELERATOR_LABEL: pool.gpu.accelerator_label}
    if spec_pool.efa:
        labels[aws_facts.EFA_LABEL] = "true"
    return labels


def autoscaler_cluster_tag(cluster_name: str) -> str:
    return f"{aws_facts.AUTOSCALER_CLUSTER_TAG_PREFIX}{cluster_name}"


def asg_tags(cluster_name: str, pool: Pool, labels: dict[str, str], resources: Mapping[str, int | str]) -> dict[str, str]:
    """Tags the pool's autoscaling group needs for auto-discovery and scale from zero.

    With no node to look at, the autoscaler builds a template node from the instance type
    (pods, CPU, memory, physical GPUs) and these tags: every extended resource a job may request
    (`resources`: GPU slots, EFA devices, EFA nodes' huge pages; node_resources.template_resources), the labels and the
    taint (cluster-autoscaler/cloudprovider/aws/aws_manager.go, buildNodeFromTemplate and
    extractAllocatableResourcesFromAsg; kubernetes/autoscaler#2929). A resource without a tag
    counts as zero, so a pod requesting it never triggers a scale-up from zero. Managed node
    group tags never reach the ASG, so these go on the ASG itself.
    """
    taint = pool.taint
    tags = {
        aws_facts.AUTOSCALER_ENABLED_TAG: "true",
        autoscaler_cluster_tag(cluster_name): "owned",
        f"{aws_facts.NODE_TEMPLATE_PREFIX}taint/{taint.key}": f"{taint.value}:{taint.effect}",
    }
    tags.update({f"{aws_facts.NODE_TEMPLATE_PREFIX}resources/{name}": str(count) for name, count in resources.items()})
    tags.update({f"{aws_facts.NODE_TEMPLATE_PREFIX}label/{key}": value for key, value in labels.items()})
    tags[f"{aws_facts.NODE_TEMPLATE_PREFIX}label/{CAPACITY_TYPE_LABEL}"] = capacity_type(pool)
    return dict(sorted(tags.items()))


def pool_priority(pool: Pool) -> int:
    if pool.reserved:
        return RESERVED_PRIORITY
    return SPOT_PRIORITY if pool.spot else ON_DEMAND_PRIORITY


def expander_priorities(pools: list[Pool], asg_names: dict[str, str], system_asg: str) -> dict[str, list[str]]:
    """The priority expander's table: priority -> anchored regexes of ASG names.

    Keys are strings (Helm values); the chart renders them as the integers the expander reads.
    """
    table: dict[int, list[str]] = {SYSTEM_PRIORITY: [exact_match(system_asg)]}
    for pool in pools:
        table.setdefault(pool_priority(pool), []).append(exact_match(asg_names[pool.name]))
    return {str(priority): sorted(patterns) for priority, patterns in sorted(table.items())}


_REGEX_SPECIAL = re.compile(r"([.^$*+?()\[\]{}|\\])")


def exact_match(name: str) -> str:
    """An anchored regex (Go RE2 syntax) matching exactly `name`."""
    return "^" + _REGEX_SPECIAL.sub(r"\\\1", name) + "$"


def gpu_scale_down_threshold(pools: list[Pool]) -> str:
    """`--scale-down-gpu-utilization-threshold` below one used slot on the fullest node.

    A node is a scale-down candidate when requested/allocatable GPUs fall below the threshold.
    The default 0.5 lets the autoscaler evict a training pod that uses half a node's GPUs;
    half of one slot's share means only nodes with no GPU pod at all are candidates.
    """
    most_slots = max(pool.slots_per_node for pool in pools)
    return f"{0.5 / most_slots:.4g}"


def autoscaler_values(
    cluster_name: str,
    region: str,
    kubernetes_version: str,
    role_arn: pulumi.Input[str],
    priorities: pulumi.Input[dict[str, list[str]]],
    pools: list[Pool],
) -> dict[str, Any]:
    """Helm values of the cluster-autoscaler chart (keys per shared/charts/...keys.json)."""
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name},
        "fullnameOverride": "cluster-autoscaler",
        "image": {"tag": aws_facts.CLUSTER_AUTOSCALER_IMAGE_TAGS[kubernetes_version]},
        "rbac": {
            "serviceAccount": {
                "name": AUTOSCALER_SERVICE_ACCOUNT,
                "annotations": {"eks.amazonaws.com/role-arn": role_arn},
            }
        },
        "nodeSelector": {SYSTEM_ROLE_LABEL: SYSTEM_ROLE},
        "extraArgs": {
            "expander": "priority,least-waste",
            "balance-similar-node-groups": True,
            "scale-down-gpu-utilization-threshold": gpu_scale_down_threshold(pools),
            "scale-down-unneeded-time": SCALE_DOWN_UNNEEDED_TIME,
            "scale-down-delay-after-add": SCALE_DOWN_DELAY_AFTER_ADD,
            "max-node-provision-time": MAX_NODE_PROVISION_TIME,
        },
        "expanderPriorities": priorities,
    }


def efa_device_plugin_values(pools: list[Pool], spec: PlatformSpec) -> dict[str, Any]:
    """The EFA device plugin runs on EFA pools only, which carry the GPU taint.

    The chart also requires the node's instance type to be in its own list of EFA types; it is
    set to the EFA pools' types, so a chart list that lags behind new instances cannot keep
    the plugin off them.
    """
    efa = {p.name for p in spec.node_pools if p.efa}
    types = sorted({pool.instance_type.name for pool in pools if pool.name in efa and pool.instance_type})
    return {
        "nodeSelector": {aws_facts.EFA_LABEL: "true"},
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
        "supportedInstanceLabels": {"keys": ["node.kubernetes.io/instance-type"], "values": types},
    }


def pool_zones(spec_pool: NodePoolSpec, cluster_zones: list[str], offered: set[str]) -> list[str]:
    """The zones a pool's node group spans: the pool's own or else the cluster's, only those where
    EC2 offers its instance type (DescribeInstanceTypeOfferings by availability zone; as
    terraform-aws-eks docs/network/efa.md looks them up). A pool in one placement group (EFA) takes
    the first of them."""
    zones = [zone for zone in (list(spec_pool.zones) or cluster_zones) if zone in offered]
    return zones[:1] if placement_group(spec_pool) else zones


def zone_problems(spec_pool: NodePoolSpec, at: str, cluster_zones: list[str], offered: set[str]) -> list[Problem]:
    """Zones that cannot run the pool: named ones where its type is not offered, or no zone at all."""
    instance_type = spec_pool.instance_type
    where = ", ".join(z for z in cluster_zones if z in offered) or "none of them"
    if spec_pool.zones:
        return [
            Problem(
                f"{at}.zones[{i}]",
                f"EC2 does not offer {instance_type} in {zone} (instance type offerings); zones of the cluster that do: {where}",
            )
            for i, zone in enumerate(spec_pool.zones)
            if zone not in offered
        ]
    if not any(zone in offered for zone in cluster_zones):
        return [
            Problem(
                f"{at}.instanceType",
                f"EC2 offers {instance_type} in none of the cluster's zones ({', '.join(cluster_zones)}; instance type "
                "offerings): list zones that offer it in platform.aws.zones",
            )
        ]
    return []


@dataclass(frozen=True)
class ZoneSubnets:
    zone: str
    private_cidr: str
    public_cidr: str


def subnet_plan(vpc_cidr: str, zones: list[str]) -> list[ZoneSubnets]:
    """Big private subnets (pods take VPC IPs) and small public ones (NAT, load balancers).

    The VPC is split into equal blocks, one private block per zone; the last block is split
    again into the public subnets.
    """
    network = ipaddress.IPv4Network(vpc_cidr)
    bits = max(2, math.ceil(math.log2(len(zones) + 1)))
    blocks = list(network.subnets(prefixlen_diff=bits))
    publics = list(blocks[-1].subnets(prefixlen_diff=max(2, math.ceil(math.log2(len(zones))))))
    return [ZoneSubnets(zone, str(blocks[i]), str(publics[i])) for i, zone in enumerate(zones)]


def single_nat(environment: Environment) -> bool:
    """Dev saves one NAT gateway per extra zone; prod keeps a NAT per zone (no cross-zone outage)."""
    return environment != "prod"


def log_retention_days(environment: Environment) -> int:
    return 90 if environment == "prod" else 30


@dataclass(frozen=True)
class TrainerIdentity:
    """One IRSA role the trainer runs as: a team's own, or (a stack without teams) the one role
    of the `default` namespace, which reaches the whole bucket."""

    resource_suffix: str
    namespace: str
    # None: the whole bucket (no teams to keep apart).
    team: str | None

    @property
    def subject(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{naming.TRAINER_SERVICE_ACCOUNT}"


def trainer_identities(spec: PlatformSpec) -> list[TrainerIdentity]:
    if not spec.scheduling.teams:
        # The resource name of the single role stacks had before teams had roles of their own.
        return [TrainerIdentity("trainer-role", naming.team_namespace(naming.DEFAULT_TEAM), None)]
    return [
        TrainerIdentity(f"trainer-{team.name}", naming.team_namespace(team.name), team.name)
        for team in spec.scheduling.teams
    ]


def kubeconfig(cluster_name: str, endpoint: str, certificate_authority: str, region: str) -> str:
    """A kubeconfig that authenticates with `aws eks get-token` (the caller's AWS identity)."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": certificate_authority}}
        ],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "current-context": cluster_name,
        "users": [
            {
                "name": cluster_name,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "aws",
                        "args": ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"],
                    }
                },
            }
        ],
    }
    return json.dumps(document, indent=2, sort_keys=True)


def ecr_lifecycle_policy() -> str:
    """Untagged layers go after a week; the newest 200 tagged images stay (tags are immutable)."""
    rules = [
        {
            "rulePriority": 1,
            "description": "expire untagged images after 7 days",
            "selection": {"tagStatus": "untagged", "countType": "sinceImagePushed", "countUnit": "days", "countNumber": 7},
            "action": {"type": "expire"},
        },
        {
            "rulePriority": 2,
            "description": "keep the newest 200 images",
            "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": 200},
            "action": {"type": "expire"},
        },
    ]
    return json.dumps({"rules": rules}, sort_keys=True)

"""Which AWS pools Karpenter provisions (`aws.provisioner: karpenter`), and what such a pool may ask.

EFA pools stay on managed node groups beside Karpenter's NodePools. Karpenter v1.14.1 can attach
EFA interfaces (as many as the instance type supports when a NodeClaim requests
vpc.amazonaws.com/efa, aws/karpenter-provider-aws pkg/providers/amifamily/resolver.go; the
EC2NodeClass has networkInterfaces and placementGroupSelector), but the platform's EFA layout (a
cluster placement group per pool, the interfaces per network card of node_resources.efa_interfaces,
the EFA device plugin's node selection) is built and proven for node groups only. The two
provisioners side by side is what Karpenter's migration guide runs ("Migrating from Cluster
Autoscaler"): each leaves the other's nodes alone (Karpenter only manages NodeClaims of its
NodePools; the autoscaler only the node groups tagged for it).
"""

from __future__ import annotations

import re

from components.facts import karpenter as facts
from components.spec.models import NodePoolSpec, PlatformSpec
from components.spec.problems import ROOT, Problem


def karpenter_provisions(spec: PlatformSpec, pool: NodePoolSpec) -> bool:
    """Whether Karpenter launches this pool's nodes, else a managed node group does."""
    return spec.cloud == "aws" and spec.aws_settings.provisioner == "karpenter" and not pool.efa


def node_group_pools(spec: PlatformSpec) -> list[NodePoolSpec]:
    """The pools that are EKS managed node groups."""
    return [pool for pool in spec.node_pools if not karpenter_provisions(spec, pool)]


def karpenter_problems(spec: PlatformSpec) -> list[Problem]:
    problems: list[Problem] = []
    alias = spec.aws_settings.karpenter.ami_alias if spec.cloud == "aws" else None
    if alias is not None and spec.aws_settings.provisioner != "karpenter":
        problems.append(Problem(f"{ROOT}.aws.karpenter.amiAlias", "applies to aws.provisioner: karpenter only; remove it or set the provisioner"))
    elif alias is not None and not re.fullmatch(facts.PINNED_AMI_ALIAS_PATTERN, alias):
        problems.append(
            Problem(f"{ROOT}.aws.karpenter.amiAlias", f"expected an AL2023 release alias like al2023@v20240807, got {alias!r}")
        )
    for i, pool in enumerate(spec.node_pools):
        if not karpenter_provisions(spec, pool):
            continue
        at = f"{ROOT}.nodePools[{i}]"
        if pool.ami_type not in facts.AMI_ALIAS:
            problems.append(
                Problem(
                    f"{at}.amiType",
                    f"with aws.provisioner: karpenter a pool uses an AL2023 NVIDIA AMI ({', '.join(facts.AMI_ALIAS)}), "
                    f"got {pool.ami_type}",
                )
            )
        if pool.min_nodes > 0:
            # A NodePool has no minimum size: Karpenter launches nodes for pending pods only
            # (static NodePools, spec.replicas, are alpha in v1.14.1: feature gate StaticCapacity).
            problems.append(
                Problem(
                    f"{at}.minNodes",
                    f"Karpenter keeps no idle nodes, so a pool it provisions starts from 0; got {pool.min_nodes} "
                    "(for always-on nodes leave aws.provisioner at cluster-autoscaler)",
                )
            )
        if pool.reserved and pool.reservation is not None and pool.reservation.startswith("arn:"):
            # capacityReservationSelectorTerms select by id or tags, not by resource group
            # (pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml at v1.14.1).
            problems.append(
                Problem(
                    f"{at}.reservation",
                    "Karpenter selects reservations by id (cr-...), not by resource group ARN; name the reservation",
                )
            )
    return problems

"""`eks-role-policies-first`: EKS resources are created after, and deleted before, their roles'
policies; read from `dependsOn` in the synthesis as Pulumi orders by it."""

from __future__ import annotations

import copy
from typing import Callable

import pytest

from components.checks.declared import EKS_ADDON, EKS_CLUSTER, EKS_NODE_GROUP, Resource
from components.checks.rules import base, lifecycle
from infra.synth import Synthesis

Synthesized = Callable[[str], Synthesis]
DEV = base.Context("dev", 16, 256, True)


def resources_of(result: Synthesis) -> list[Resource]:
    return base.from_synthesis(copy.deepcopy(result.resources))


@pytest.mark.parametrize("stack", ["dev-aws", "prod-aws"])
def test_the_aws_stacks_order_eks_after_their_roles_policies(synthesized: Synthesized, stack: str) -> None:
    resources = resources_of(synthesized(stack))
    users = [r for r in resources if r.type in (EKS_CLUSTER, EKS_NODE_GROUP, EKS_ADDON)]
    # Something to prove: the cluster, every node group and the IRSA add-ons name a role.
    assert sum(any(":iam/role:Role::" in key for key in r.depends_on) for r in users) >= 4
    assert lifecycle.eks_role_policies_first(resources, DEV) == []


@pytest.mark.parametrize(
    ("type_token", "name", "policy"),
    [
        (EKS_NODE_GROUP, "ml-prod-h100-train", "aws:iam/rolePolicyAttachment:RolePolicyAttachment::ml-prod-node-AmazonEKSWorkerNodePolicy"),
        (EKS_CLUSTER, "ml-prod", "aws:iam/rolePolicyAttachment:RolePolicyAttachment::ml-prod-cluster-AmazonEKSClusterPolicy"),
        (EKS_ADDON, "ml-prod-vpc-cni", "aws:iam/rolePolicyAttachment:RolePolicyAttachment::ml-prod-vpc-cni"),
    ],
)
def test_an_eks_resource_not_waiting_for_its_role_s_policy_fails(
    synthesized: Synthesized, type_token: str, name: str, policy: str
) -> None:
    resources = [
        Resource(r.type, r.name, r.props, r.protect, r.ignore_changes, tuple(k for k in r.depends_on if k != policy))
        if (r.type, r.name) == (type_token, name)
        else r
        for r in resources_of(synthesized("prod-aws"))
    ]
    found = lifecycle.eks_role_policies_first(resources, DEV)
    assert [(v.resource, v.message) for v in found] == [
        (f"{type_token}::{name}", f"does not depend on {policy}, a policy of the role it uses")
    ]

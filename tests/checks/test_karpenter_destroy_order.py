"""`karpenter-permissions-outlive-nodes`: the dependencies `pulumi destroy` orders deletes by keep
Karpenter's permissions until its nodes are gone. Each planted miss drops one dependency from the
synthesized records, as a forgotten depends_on would."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helpers import REPO

from components.checks.rules import base, registry
from components.facts.rule_catalog import RULES_BY_ID
from components.spec import PlatformSpec
from infra import offline
from infra.synth import Synthesis

RULE = "karpenter-permissions-outlive-nodes"
RELEASE = "kubernetes:helm.sh/v3:Release::ml-dev-karpenter-karpenter"


@pytest.fixture(scope="module")
def stack() -> tuple[PlatformSpec, Synthesis]:
    _, spec, result = offline.synthesize(str(REPO / "stacks/Pulumi.dev-aws-karpenter.yaml"), REPO)
    return spec, result


def violations(stack: tuple[PlatformSpec, Synthesis], records: list[dict[str, Any]]) -> list[tuple[str | None, str]]:
    found = registry.CHECKS[RULE](base.from_synthesis(records), base.context_of(stack[0]))
    return [(v.resource, v.message) for v in found]


def without(stack: tuple[PlatformSpec, Synthesis], key: str, dependency: str) -> list[dict[str, Any]]:
    records = copy.deepcopy(stack[1].resources)
    record = next(r for r in records if f"{r['type']}::{r['name']}" == key)
    before = record["options"]["dependsOn"]
    record["options"]["dependsOn"] = [d for d in before if d != dependency]
    assert len(record["options"]["dependsOn"]) == len(before) - 1
    return records


def test_the_rule_is_mandatory() -> None:
    assert RULES_BY_ID[RULE].enforcement == "mandatory"


def test_the_karpenter_stack_keeps_karpenter_s_permissions_until_its_nodes_are_gone(stack: tuple[PlatformSpec, Synthesis]) -> None:
    assert violations(stack, stack[1].resources) == []


@pytest.mark.parametrize(
    "dependency",
    [
        "aws:iam/rolePolicy:RolePolicy::ml-dev-karpenter-karpenter",
        "aws:sqs/queuePolicy:QueuePolicy::ml-dev-karpenter-karpenter-interruption",
        "aws:ec2/tag:Tag::ml-dev-karpenter-karpenter-discovery-security-group",
    ],
)
def test_a_release_not_depending_on_what_karpenter_acts_with_is_a_violation(stack: tuple[PlatformSpec, Synthesis], dependency: str) -> None:
    assert violations(stack, without(stack, RELEASE, dependency)) == [
        (
            RELEASE,
            f"the karpenter release does not depend on {dependency}: `pulumi destroy` may delete it while Karpenter "
            "still terminates its nodes, whose finalizers then hang",
        )
    ]


def test_a_node_pool_not_depending_on_the_release_is_a_violation(stack: tuple[PlatformSpec, Synthesis]) -> None:
    records = without(stack, "kubernetes:karpenter.sh/v1:NodePool::ml-dev-karpenter-karpenter-l4-train-nodepool", RELEASE)
    # Through its EC2NodeClass the NodePool would still depend on the release; drop that too.
    record = next(r for r in records if r["name"] == "ml-dev-karpenter-karpenter-l4-train-nodeclass")
    record["options"]["dependsOn"] = [d for d in record["options"]["dependsOn"] if d != RELEASE]
    assert {r for r, _ in violations(stack, records)} == {
        "kubernetes:karpenter.sh/v1:NodePool::ml-dev-karpenter-karpenter-l4-train-nodepool",
        "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::ml-dev-karpenter-karpenter-l4-train-nodeclass",
    }

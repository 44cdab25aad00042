"""The CrossGuard pack calls the same rule functions as `check`, on CrossGuard's own argument
objects: properties behind its unknown-checking proxies, options, dependencies, and the stack's
spec from the stack config."""

from __future__ import annotations

import importlib.util
import json
from typing import Any, Iterator

import pytest
from helpers import REPO, platform_of
from pulumi.runtime import settings
from pulumi.runtime.config import set_all_config
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, unknown_checking_proxy

from components.checks import declared
from components.checks.rules import security
from components.facts.rule_catalog import RULES

_spec = importlib.util.spec_from_file_location("gpu_platform_pack", REPO / "policy" / "pack.py")
assert _spec and _spec.loader
pack = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pack)

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}


@pytest.fixture
def stack_config() -> Iterator[dict[str, Any]]:
    """The dev-aws spec as the stack config a real preview hands the pack; edit it in a test."""
    platform = platform_of("dev-aws")
    settings.reset_options(project="gpu-platform", stack="dev-aws", preview=True)
    set_all_config({"gpu-platform:platform": json.dumps(platform)})
    yield platform
    settings.reset_options()
    set_all_config({})


def apply(platform: dict[str, Any]) -> None:
    set_all_config({"gpu-platform:platform": json.dumps(platform)})


def options(protect: bool = False, ignore_changes: list[str] | None = None) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, ignore_changes or [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def policy(rule_id: str) -> Any:
    return next(p for p in pack.policies() if p.name == rule_id)


def run_resource_policy(rule_id: str, type_token: str, props: dict[str, Any], **opts: Any) -> list[str]:
    reported: list[str] = []
    args = ResourceValidationArgs(
        type_token, unknown_checking_proxy(props), f"urn:pulumi:dev-aws::gpu-platform::{type_token}::r", "r", options(**opts), None
    )
    policy(rule_id).validate(args, lambda message, urn=None: reported.append(message))
    return reported


def node_group(**changes: Any) -> dict[str, Any]:
    return {
        "instanceTypes": ["g6.xlarge"],
        "capacityType": "SPOT",
        "scalingConfig": {"minSize": 0, "maxSize": 4, "desiredSize": 0},
        "taints": [GPU_TAINT],
        "launchTemplate": {"id": "lt-1", "version": "1"},
        **changes,
    }


def test_the_pack_has_one_policy_per_rule_with_its_enforcement_and_severity() -> None:
    policies = pack.policies()
    assert [p.name for p in policies] == [r.id for r in RULES]
    for p, rule in zip(policies, RULES):
        assert p.enforcement_level == EnforcementLevel(rule.enforcement)
        assert p.severity == Severity(rule.severity)
        expected = ResourceValidationPolicy if rule.scope == "resource" else StackValidationPolicy
        assert isinstance(p, expected)


def test_a_resource_policy_reports_a_violation_of_its_rule(stack_config: dict[str, Any]) -> None:
    reported = run_resource_policy("gpu-pool-tainted", declared.EKS_NODE_GROUP, node_group(taints=[]))
    assert reported == ["GPU pool has no nvidia.com/gpu taint with effect NO_SCHEDULE: any pod could land on its GPU nodes"]


def test_a_compliant_resource_reports_nothing(stack_config: dict[str, Any]) -> None:
    assert run_resource_policy("gpu-pool-tainted", declared.EKS_NODE_GROUP, node_group()) == []


def test_values_unknown_during_the_preview_are_not_violations(stack_config: dict[str, Any]) -> None:
    assert run_resource_policy("gpu-pool-tainted", declared.EKS_NODE_GROUP, node_group(taints=UNKNOWN_ARRAY_VALUE)) == []


def test_the_environment_comes_from_the_stack_config(stack_config: dict[str, Any]) -> None:
    warm = node_group(scalingConfig={"minSize": 1, "maxSize": 4, "desiredSize": 1})
    assert len(run_resource_policy("gpu-pool-scale-to-zero", declared.EKS_NODE_GROUP, warm)) == 1
    stack_config["environment"] = "prod"
    stack_config["nodePools"] = [{**p, "capacity": "on-demand"} for p in stack_config["nodePools"]]
    apply(stack_config)
    assert run_resource_policy("gpu-pool-scale-to-zero", declared.EKS_NODE_GROUP, warm) == []


def test_limits_come_from_the_stack_config(stack_config: dict[str, Any]) -> None:
    assert run_resource_policy("gpu-pool-max-nodes", declared.EKS_NODE_GROUP, node_group()) == []
    stack_config["policy"] = {"maxNodesPerPool": 3}
    apply(stack_config)
    assert len(run_resource_policy("gpu-pool-max-nodes", declared.EKS_NODE_GROUP, node_group())) == 1


def test_an_overridden_rule_is_not_reported(stack_config: dict[str, Any]) -> None:
    stack_config["policy"] = {"overrides": [{"rule": "gpu-pool-scale-to-zero", "reason": "warm notebooks for a workshop"}]}
    apply(stack_config)
    warm = node_group(scalingConfig={"minSize": 1, "maxSize": 4, "desiredSize": 1})
    assert run_resource_policy("gpu-pool-scale-to-zero", declared.EKS_NODE_GROUP, warm) == []


def test_resource_options_reach_the_rules(stack_config: dict[str, Any]) -> None:
    assert len(run_resource_policy("autoscaler-drift-ignored", declared.EKS_NODE_GROUP, node_group())) == 1
    ignored = run_resource_policy(
        "autoscaler-drift-ignored", declared.EKS_NODE_GROUP, node_group(), ignore_changes=["scalingConfig.desiredSize"]
    )
    assert ignored == []


def policy_resource(type_token: str, name: str, props: dict[str, Any], dependencies: list[PolicyResource]) -> PolicyResource:
    urn = f"urn:pulumi:dev-aws::gpu-platform::{type_token}::{name}"
    return PolicyResource(type_token, unknown_checking_proxy(props), urn, name, options(), None, None, dependencies, {})


def run_stack_policy(rule_id: str, resources: list[PolicyResource]) -> list[tuple[str, str | None]]:
    reported: list[tuple[str, str | None]] = []
    policy(rule_id).validate(StackValidationArgs(resources), lambda message, urn=None: reported.append((message, urn)))
    return reported


def test_a_stack_policy_links_resources_through_their_dependencies(stack_config: dict[str, Any]) -> None:
    bucket = policy_resource(declared.S3_BUCKET, "data", {"bucket": "ml-dev-training"}, [])
    flags = {flag: True for flag in security.PUBLIC_ACCESS_BLOCK_FLAGS}
    block = policy_resource(declared.S3_PUBLIC_ACCESS_BLOCK, "data", {"bucket": "data-id", **flags}, [bucket])
    assert run_stack_policy("no-public-buckets", [bucket, block]) == []
    [(message, urn)] = run_stack_policy("no-public-buckets", [bucket])
    assert urn == bucket.urn and "BucketPublicAccessBlock" in message

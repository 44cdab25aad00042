"""The spec's `policy` section: limits with defaults, and overrides that must name an overridable
rule and give a reason."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import platform_of

from components.checks.rules import base
from components.spec import SpecError, parse_spec


def parse(policy: dict[str, Any] | None = None, environment: str = "dev") -> Any:
    raw = platform_of("dev-aws")
    raw["environment"] = environment
    if policy is not None:
        raw["policy"] = policy
    return parse_spec(raw, "stacks/Pulumi.dev-aws.yaml")


def problems(policy: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as caught:
        parse(policy)
    return [(p.path, p.message) for p in caught.value.problems]


def test_limits_default_to_16_nodes_per_pool_and_256_gpus() -> None:
    ctx = base.context_of(parse())
    assert (ctx.max_nodes_per_pool, ctx.max_gpus, ctx.overrides) == (16, 256, {})


@pytest.mark.parametrize("environment, allowed", [("dev", True), ("staging", True), ("prod", False)])
def test_spot_is_allowed_outside_prod_by_default(environment: str, allowed: bool) -> None:
    assert base.context_of(parse(environment=environment)).allow_spot is allowed


def test_allow_spot_overrides_the_environment_default() -> None:
    assert base.context_of(parse({"allowSpot": True}, environment="prod")).allow_spot is True


def test_limits_are_read_from_the_spec() -> None:
    ctx = base.context_of(parse({"maxNodesPerPool": 4, "maxGpus": 32}))
    assert (ctx.max_nodes_per_pool, ctx.max_gpus) == (4, 32)


def test_an_override_with_a_reason_reaches_the_rules() -> None:
    spec = parse({"overrides": [{"rule": "gpu-pool-scale-to-zero", "reason": "demo day: keep one node warm"}]})
    assert base.context_of(spec).overrides == {"gpu-pool-scale-to-zero": "demo day: keep one node warm"}


def test_an_override_of_an_unknown_rule_is_a_spec_error() -> None:
    assert problems({"overrides": [{"rule": "gpu-pool-scale-to-zro", "reason": "x"}]}) == [
        ("platform.policy.overrides[0].rule", "unknown policy rule 'gpu-pool-scale-to-zro' (did you mean 'gpu-pool-scale-to-zero'?)")
    ]


def test_an_override_of_a_rule_that_is_not_overridable_is_a_spec_error() -> None:
    [(path, message)] = problems({"overrides": [{"rule": "no-public-buckets", "reason": "public datasets"}]})
    assert path == "platform.policy.overrides[0].rule"
    assert message.startswith("no-public-buckets cannot be overridden; overridable rules: gpu-pool-scale-to-zero")


@pytest.mark.parametrize("reason", ["", "   "])
def test_an_override_without_a_reason_is_a_spec_error(reason: str) -> None:
    assert problems({"overrides": [{"rule": "gpu-pool-scale-to-zero", "reason": reason}]}) == [
        ("platform.policy.overrides[0].reason", "must say why the rule does not apply to this stack")
    ]


def test_an_override_missing_its_reason_key_is_a_spec_error() -> None:
    assert problems({"overrides": [{"rule": "gpu-pool-scale-to-zero"}]}) == [
        ("platform.policy.overrides[0].reason", "required field is missing")
    ]


def test_the_same_rule_overridden_twice_is_a_spec_error() -> None:
    entry = {"rule": "gpu-pool-scale-to-zero", "reason": "warm eval pool"}
    assert problems({"overrides": [entry, entry]}) == [
        ("platform.policy.overrides[1].rule", "gpu-pool-scale-to-zero is overridden twice; keep one entry")
    ]


def test_limits_must_be_positive() -> None:
    [(path, _)] = problems({"maxGpus": 0})
    assert path == "platform.policy.maxGpus"

"""The platform spec: the one place user input is checked.

A stack file carries one structured key, `gpu-platform:platform`. It is parsed in two passes,
both of which collect every problem before reporting:

1. shape: types, required fields, unknown keys, simple bounds (pydantic, strict, no coercion);
2. rules: facts that need the catalog or several fields at once (`rule_problems`).

Anything downstream may assume a `PlatformSpec` is valid; nothing downstream re-checks input.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from components.spec.aws_rules import AWS_SYSTEM_POOL, aws_problems
from components.spec.gcp_rules import GKE_SYSTEM_POOL, gcp_problems
from components.spec.models import (
    CONFIG_KEY,
    CONFIG_NAMESPACE,
    AmiType,
    Environment,
    GcpSpec,
    NodeAutoProvisioningSpec,
    NodePoolSpec,
    PlatformSpec,
    PriorityTierSpec,
    SharingMode,
    stack_file_schema,
)
from components.spec.platform_rules import gpu_model_name, instance_type_problem, platform_problems
from components.spec.policy_rules import policy_problems
from components.spec.problems import ROOT, Problem, SpecError, shape_problem
from components.spec.scheduling_rules import monitoring_problems, scheduling_problems

__all__ = [
    "AWS_SYSTEM_POOL",
    "CONFIG_KEY",
    "CONFIG_NAMESPACE",
    "GKE_SYSTEM_POOL",
    "AmiType",
    "Environment",
    "GcpSpec",
    "NodeAutoProvisioningSpec",
    "NodePoolSpec",
    "PlatformSpec",
    "PriorityTierSpec",
    "Problem",
    "SharingMode",
    "SpecError",
    "gpu_model_name",
    "instance_type_problem",
    "parse_spec",
    "region_namespace",
    "rule_problems",
    "stack_file_schema",
]

def parse_spec(raw: Any, source: str, region: str | None = None) -> PlatformSpec:
    """Validate the raw `gpu-platform:platform` value from the stack file named `source`.

    `region` is the stack's region for the spec's cloud (see `region_namespace`); zone rules
    check against it, and skip that check when it is None.
    """
    if raw is None:
        raise SpecError(source, [Problem(ROOT, f"missing: set `{CONFIG_NAMESPACE}:{CONFIG_KEY}`")])
    try:
        spec = PlatformSpec.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(source, [shape_problem(err) for err in exc.errors()]) from None
    problems = rule_problems(spec, region)
    if problems:
        raise SpecError(source, problems)
    return spec


def region_namespace(raw: Any) -> str | None:
    """The provider config namespace whose `region` the raw spec's cloud runs in (`aws`, `gcp`).

    The region is provider config (`aws:region`, `gcp:region`), not part of the spec, so both
    the program and the offline tools read it from there and hand it to `parse_spec`.
    """
    cloud = raw.get("cloud") if isinstance(raw, dict) else None
    return cloud if cloud in ("aws", "gcp") else None


def rule_problems(spec: PlatformSpec, region: str | None = None) -> list[Problem]:
    """Pass 2: every rule module's problems, in stack-file order of the sections they check."""
    return (
        platform_problems(spec)
        + scheduling_problems(spec)
        + monitoring_problems(spec)
        + aws_problems(spec, region)
        + gcp_problems(spec, region)
        + policy_problems(spec.policy)
    )

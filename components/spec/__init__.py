"""The platform spec: the one place user input is checked.

A stack file carries one structured key, `gpu-platform:platform`. It is parsed in two passes,
whose problems are reported together, all at once:

1. shape: types, required fields, unknown keys, simple bounds (pydantic, strict, no coercion);
2. rules: facts that need the catalog or several fields at once (`rule_problems`). After shape
   errors the rules run on what parsed (components.spec.partial), skipping whatever judged a
   repaired value.

Anything downstream may assume a `PlatformSpec` is valid; nothing downstream re-checks input.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from components.facts import regions
from components.spec.aws_rules import AWS_SYSTEM_POOL, aws_problems
from components.spec.capacity_rules import capacity_problems
from components.spec.fleet import fleet_worker_problems
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
    TeamSpec,
)
from components.spec.name_rules import control_character_problems, name_problems
from components.spec.partial import repair
from components.spec.platform_rules import gpu_model_name, instance_type_problem, platform_problems
from components.spec.policy_rules import policy_problems
from components.spec.schema import stack_file_schema
from components.spec.problems import (
    ROOT,
    DeployTimeProblems,
    Problem,
    SpecError,
    did_you_mean,
    in_file_order,
    shape_problem,
)
from components.spec.observability_rules import observability_problems
from components.spec.scheduling_rules import monitoring_problems, scheduling_problems
from components.spec.tenancy_rules import tenancy_problems

__all__ = [
    "AWS_SYSTEM_POOL",
    "CONFIG_KEY",
    "CONFIG_NAMESPACE",
    "GKE_SYSTEM_POOL",
    "AmiType",
    "DeployTimeProblems",
    "Environment",
    "GcpSpec",
    "NodeAutoProvisioningSpec",
    "NodePoolSpec",
    "PlatformSpec",
    "PriorityTierSpec",
    "Problem",
    "control_character_problems",
    "SharingMode",
    "SpecError",
    "TeamSpec",
    "gpu_model_name",
    "instance_type_problem",
    "parse_spec",
    "region_namespace",
    "region_problems",
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
    control = control_character_problems(raw)
    if control:
        raise SpecError(source, control)
    try:
        spec = PlatformSpec.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
    else:
        problems = rule_problems(spec, region)
        if problems:
            raise SpecError(source, in_file_order(raw, problems))
        return spec
    shape = [shape_problem(err) for err in errors]
    repaired = repair(raw, list(errors))
    rules = rule_problems(repaired.spec, region) if repaired else []
    kept = [problem for problem in (repaired.keeps(p) for p in rules) if problem] if repaired else []
    raise SpecError(source, in_file_order(raw, shape + kept))


def region_namespace(raw: Any) -> str | None:
    """The provider config namespace whose `region` the raw spec's cloud runs in (`aws`, `gcp`).

    The region is provider config (`aws:region`, `gcp:region`), not part of the spec, so both
    the program and the offline tools read it from there and hand it to `parse_spec`.
    """
    cloud = raw.get("cloud") if isinstance(raw, dict) else None
    return cloud if cloud in ("aws", "gcp") else None


def region_problems(namespace: str, region: Any) -> list[Problem]:
    """The provider's region (`aws:region`, `gcp:region`): required, and one the cloud has."""
    key = f"{namespace}:region"
    if not isinstance(region, str):
        return [Problem(key, f"required for cloud: {namespace} (the provider setting the program builds with)")]
    known = regions.regions(namespace)
    if region not in known:
        hint = did_you_mean(region, known)
        return [Problem(key, f"{region!r} is not a region of {namespace}{hint}; regions: {', '.join(known)}")]
    return []


def rule_problems(spec: PlatformSpec, region: str | None = None) -> list[Problem]:
    """Pass 2: every rule module's problems, in stack-file order of the sections they check."""
    return (
        platform_problems(spec)
        + capacity_problems(spec)
        + scheduling_problems(spec)
        + tenancy_problems(spec)
        + name_problems(spec)
        + monitoring_problems(spec)
        + observability_problems(spec)
        + aws_problems(spec, region)
        + gcp_problems(spec, region)
        + policy_problems(spec.policy)
        + fleet_worker_problems(spec)
    )

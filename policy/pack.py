"""The gpu-platform rules as CrossGuard policies, for a real `pulumi preview --policy-pack policy`.

Every policy calls the rule function of components.checks.rules that `gpu-platform check` calls: rules
of scope "resource" as a ResourceValidationPolicy on each resource, rules of scope "stack" (links
between resources, totals) as a StackValidationPolicy. Properties arrive camelCase, as in the
offline synth; values unknown during the preview become declared.UNKNOWN, which no rule reports.

Limits and waivers come from the stack's own spec: the stack config key `gpu-platform:platform`
that the program reads too (CrossGuard hands a pack the stack's config, so `pulumi.Config` sees
it). A waived (overridden) violation is not reported here; `check` and `review` show it with its
reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyResourceOptions,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from components.checks import declared
from components.checks.rules import base, registry
from components.facts.rule_catalog import RULES, RuleInfo
from components.spec import CONFIG_KEY, CONFIG_NAMESPACE, parse_spec

PACK_NAME = "gpu-platform"

_ENFORCEMENT = {"mandatory": EnforcementLevel.MANDATORY, "advisory": EnforcementLevel.ADVISORY}
_SEVERITY = {
    "low": Severity.LOW,
    "medium": Severity.MEDIUM,
    "high": Severity.HIGH,
    "critical": Severity.CRITICAL,
}


def stack_context() -> base.Context:
    """Limits and waivers of the stack being previewed, from its config (raises SpecError)."""
    raw = pulumi.Config(CONFIG_NAMESPACE).get_object(CONFIG_KEY)
    spec = parse_spec(raw, f"stacks/Pulumi.{pulumi.get_stack()}.yaml")
    return base.context_of(spec)


def plain(value: Any) -> Any:
    """CrossGuard's property proxies as plain values, as the offline synth records them: unknowns
    as declared.UNKNOWN, and whole numbers as ints (protobuf sends every number as a double)."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: _read(value, key) for key in value}
    if isinstance(value, Sequence):
        return [_read(value, i) for i in range(len(value))]
    return value


def _read(container: Any, key: Any) -> Any:
    try:
        return plain(container[key])
    except UnknownValueError:
        return declared.UNKNOWN


def as_resource(
    resource_type: str,
    name: str,
    props: Any,
    opts: PolicyResourceOptions | None,
    depends_on: Sequence[str] = (),
) -> declared.Resource:
    return declared.Resource(
        type=resource_type,
        name=name,
        props=plain(props),
        protect=bool(opts.protect) if opts else False,
        ignore_changes=tuple(opts.ignore_changes or ()) if opts else (),
        depends_on=tuple(depends_on),
    )


def _reportable(violations: list[base.Violation], ctx: base.Context) -> list[base.Violation]:
    return [v for v in violations if registry.judge(v, ctx).level != "overridden"]


def resource_policy(info: RuleInfo) -> ResourceValidationPolicy:
    check = registry.CHECKS[info.id]

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        ctx = stack_context()
        resource = as_resource(args.resource_type, args.name, args.props, args.opts)
        for violation in _reportable(check([resource], ctx), ctx):
            report_violation(violation.message, None)

    return ResourceValidationPolicy(
        name=info.id,
        description=info.description,
        validate=validate,
        enforcement_level=_ENFORCEMENT[info.enforcement],
        severity=_SEVERITY[info.severity],
    )


def stack_policy(info: RuleInfo) -> StackValidationPolicy:
    check = registry.CHECKS[info.id]

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        ctx = stack_context()
        urns: dict[str, str] = {}
        resources: list[declared.Resource] = []
        for r in args.resources:
            depends_on = [f"{d.resource_type}::{d.name}" for d in r.dependencies]
            resource = as_resource(r.resource_type, r.name, r.props, r.opts, depends_on)
            urns[resource.key] = r.urn
            resources.append(resource)
        for violation in _reportable(check(resources, ctx), ctx):
            report_violation(violation.message, urns.get(violation.resource or ""))

    return StackValidationPolicy(
        name=info.id,
        description=info.description,
        validate=validate,
        enforcement_level=_ENFORCEMENT[info.enforcement],
        severity=_SEVERITY[info.severity],
    )


def policies() -> list[Policy]:
    """One policy per catalogued rule, in the catalog's order."""
    return [resource_policy(info) if info.scope == "resource" else stack_policy(info) for info in RULES]

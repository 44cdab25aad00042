"""Policy section rules: overrides name a known, overridable rule, with a reason."""

from __future__ import annotations

from components.facts import rule_catalog
from components.spec.models import PolicySpec
from components.spec.problems import ROOT, Problem, did_you_mean


def policy_problems(policy: PolicySpec) -> list[Problem]:
    """An override names a known, overridable rule once, with a reason a reviewer can judge."""
    problems: list[Problem] = []
    seen: set[str] = set()
    for i, override in enumerate(policy.overrides):
        at = f"{ROOT}.policy.overrides[{i}]"
        rule = rule_catalog.RULES_BY_ID.get(override.rule)
        if rule is None:
            hint = did_you_mean(override.rule, list(rule_catalog.RULES_BY_ID))
            problems.append(Problem(f"{at}.rule", f"unknown policy rule {override.rule!r}{hint}"))
        elif not rule.overridable:
            problems.append(
                Problem(
                    f"{at}.rule",
                    f"{override.rule} cannot be overridden; overridable rules: {', '.join(rule_catalog.OVERRIDABLE)}",
                )
            )
        elif override.rule in seen:
            problems.append(Problem(f"{at}.rule", f"{override.rule} is overridden twice; keep one entry"))
        seen.add(override.rule)
        if not override.reason.strip():
            problems.append(Problem(f"{at}.reason", "must say why the rule does not apply to this stack"))
    return problems

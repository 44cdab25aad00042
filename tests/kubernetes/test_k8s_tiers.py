"""The default priority tiers and how a stack replaces them."""

from __future__ import annotations

from k8s_support import onprem_platform, spec_of

from components.kubernetes.tiers import AUTOSCALER_EXPENDABLE_CUTOFF, DEFAULT_TIERS, priority_tiers


def tier(name: str):
    return next(t for t in DEFAULT_TIERS if t.name == name)


def test_the_default_tiers_pass_the_rules_a_stack_s_own_tiers_must() -> None:
    platform = onprem_platform()
    platform["scheduling"]["priorityTiers"] = [t.model_dump(by_alias=True) for t in DEFAULT_TIERS]
    assert spec_of(platform).scheduling.priority_tiers == list(DEFAULT_TIERS)


def test_the_default_tiers_rank_production_standard_best_effort_opportunistic() -> None:
    ranked = sorted(DEFAULT_TIERS, key=lambda t: t.value, reverse=True)
    assert [t.name for t in ranked] == ["production", "standard", "best-effort", "opportunistic"]


def test_production_and_standard_preempt_lower_tiers() -> None:
    assert {tier("production").preemption_policy, tier("standard").preemption_policy} == {"PreemptLowerPriority"}


def test_best_effort_never_preempts() -> None:
    assert tier("best-effort").preemption_policy == "Never"


def test_opportunistic_never_preempts_and_never_triggers_a_scale_up() -> None:
    opportunistic = tier("opportunistic")
    assert opportunistic.preemption_policy == "Never"
    assert opportunistic.value < AUTOSCALER_EXPENDABLE_CUTOFF


def test_standard_is_the_only_global_default() -> None:
    assert [t.name for t in DEFAULT_TIERS if t.global_default] == ["standard"]


def test_a_stack_without_tiers_gets_the_defaults() -> None:
    assert priority_tiers(spec_of(onprem_platform())) == DEFAULT_TIERS


def test_a_stack_s_own_tiers_replace_the_defaults() -> None:
    platform = onprem_platform()
    platform["scheduling"]["priorityTiers"] = [{"name": "urgent", "value": 500}]
    assert [t.name for t in priority_tiers(spec_of(platform))] == ["urgent"]

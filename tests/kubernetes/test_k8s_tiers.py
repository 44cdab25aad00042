"""The default priority tiers and how a stack replaces them."""

from __future__ import annotations

import re

from helpers import REPO
from k8s_support import onprem_platform, spec_of

from components.kubernetes.tiers import AUTOSCALER_EXPENDABLE_CUTOFF, DEFAULT_TIERS, priority_tiers
from infra.synth import Synthesis


def tier(name: str):
    return next(t for t in DEFAULT_TIERS if t.name == name)


def test_the_default_tiers_pass_the_rules_a_stack_s_own_tiers_must() -> None:
    platform = onprem_platform()
    platform["scheduling"]["priorityTiers"] = [t.model_dump(by_alias=True) for t in DEFAULT_TIERS]
    assert spec_of(platform).scheduling.priority_tiers == list(DEFAULT_TIERS)


def test_the_default_tiers_rank_production_standard_best_effort_opportunistic() -> None:
    ranked = sorted(DEFAULT_TIERS, key=lambda t: t.value, reverse=True)
    assert [t.name for t in ranked] == ["production", "standard", "best-effort", "opportunistic"]


def test_no_default_tier_lets_the_kube_scheduler_preempt() -> None:
    """Kueue preempts (components.kubernetes.tiers)."""
    assert {t.preemption_policy for t in DEFAULT_TIERS} == {"Never"}


def test_opportunistic_never_triggers_a_scale_up() -> None:
    assert tier("opportunistic").value < AUTOSCALER_EXPENDABLE_CUTOFF


def test_standard_is_the_only_global_default() -> None:
    assert [t.name for t in DEFAULT_TIERS if t.global_default] == ["standard"]


def test_a_stack_without_tiers_gets_the_defaults() -> None:
    assert priority_tiers(spec_of(onprem_platform())) == DEFAULT_TIERS


def test_a_stack_s_own_tiers_replace_the_defaults() -> None:
    platform = onprem_platform()
    platform["scheduling"]["priorityTiers"] = [{"name": "urgent", "value": 500}]
    assert [t.name for t in priority_tiers(spec_of(platform))] == ["urgent"]


def _tier_table() -> dict[str, tuple[int, set[str]]]:
    """docs/scheduling.md's tier table: tier -> (value, the tiers it preempts in its queue)."""
    text = (REPO / "docs" / "scheduling.md").read_text()
    rows = re.findall(r"^\| `([a-z-]+)` \| (-?\d+) \| ([^|]+) \|", text, flags=re.MULTILINE)
    return {name: (int(value), set(re.findall(r"`([a-z-]+)`", preempts))) for name, value, preempts in rows}


def test_the_tier_table_says_whom_kueue_preempts_as_the_cluster_queues_do(onprem: Synthesis) -> None:
    """Kueue's SatisfiesPreemptionPolicy (v0.19.2 pkg/scheduler/preemption/common/
    preemption_policy.go) over the declared ClusterQueues' `withinClusterQueue`."""
    queues = [r for r in onprem.resources if r["type"].endswith(":ClusterQueue")]
    policies = {q["inputs"]["spec"]["preemption"]["withinClusterQueue"] for q in queues}
    assert policies == {"LowerPriority"}, "the table assumes strictly-lower-priority preemption"
    values = {r["inputs"]["metadata"]["name"]: r["inputs"]["value"] for r in onprem.resources if r["type"].endswith(":WorkloadPriorityClass")}
    table = _tier_table()
    assert {name: value for name, (value, _) in table.items()} == values
    for name, (value, preempts) in table.items():
        assert preempts == {other for other, v in values.items() if value > v}, name
    reclaim = {q["inputs"]["spec"]["preemption"]["reclaimWithinCohort"] for q in queues}
    assert [f"`reclaimWithinCohort: {policy}`" in (REPO / "docs" / "scheduling.md").read_text() for policy in reclaim] == [True]


def test_every_priority_class_leaves_preemption_to_kueue(onprem: Synthesis) -> None:
    classes = [r for r in onprem.resources if r["type"] == "kubernetes:scheduling.k8s.io/v1:PriorityClass"]
    assert classes and {c["inputs"]["preemptionPolicy"] for c in classes} == {"Never"}

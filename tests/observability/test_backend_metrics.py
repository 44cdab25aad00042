"""Per backend, every rule names only series that backend exports: GKE's managed packages are a
subset of the chart's exporters, so the rules they cannot feed are left out there, each with a
documented reason."""

from __future__ import annotations

import copy
from typing import Any

from helpers import REPO
from k8s_support import pools_of, spec_of
from promql_names import unknown_metrics

from components.facts import metrics
from components.kubernetes.tiers import priority_tiers
from components.observability.rules import GKE_SYSTEM_RULES, NOT_ON_GKE, global_rule_groups, rule_groups
from infra import stackfile


def _gcp_platform() -> dict[str, Any]:
    return copy.deepcopy(stackfile.read("dev-gcp", REPO).config["gpu-platform:platform"])


def _groups(platform: dict[str, Any]) -> list[dict[str, Any]]:
    """Every group the backend evaluates: ClusterRules' (or PrometheusRule's) and GlobalRules'."""
    spec = spec_of(platform)
    return rule_groups(spec, pools_of(platform), priority_tiers(spec)) + global_rule_groups(spec)


def _rules(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for group in groups for rule in group["rules"]]


def _recorded(groups: list[dict[str, Any]]) -> list[str]:
    return [rule["record"] for rule in _rules(groups) if "record" in rule]


def test_every_gke_rule_names_only_series_gke_exports() -> None:
    groups = _groups(_gcp_platform())
    assert unknown_metrics([rule["expr"] for rule in _rules(groups)], _recorded(groups), backend="managed") == []


def test_the_chart_s_rules_on_gke_would_name_series_gke_does_not_export() -> None:
    platform = _gcp_platform()
    platform["observability"] = {"prometheus": "kube-prometheus-stack"}
    groups = _groups(platform)
    missing = unknown_metrics([rule["expr"] for rule in _rules(groups)], _recorded(groups), backend="managed")
    assert {"DCGM_EXP_XID_ERRORS_COUNT", "kube_node_status_condition", "kube_pod_created"} <= set(missing)


def test_exactly_the_rules_gke_cannot_feed_are_left_out_there() -> None:
    platform = _gcp_platform()
    on_gke = {rule.get("alert", rule.get("record")) for rule in _rules(_groups(platform))}
    platform["observability"] = {"prometheus": "kube-prometheus-stack"}
    with_chart = {rule.get("alert", rule.get("record")) for rule in _rules(_groups(platform))}
    assert with_chart - on_gke == set(NOT_ON_GKE)


def test_gke_keeps_the_idle_gpu_stall_goodput_and_queue_alerts() -> None:
    alerts = {rule["alert"] for rule in _rules(_groups(_gcp_platform())) if "alert" in rule}
    assert {"GpuAllocatedButIdle", "TrainingJobStalled", "LowGoodput", "WorkloadsPendingTooLong"} <= alerts


def test_every_left_out_rule_is_documented_in_the_runbook() -> None:
    text = (REPO / "docs/observability.md").read_text()
    section = text.split("### Per backend", 1)[1].split("\n## ", 1)[0]
    assert all(f"`{name}`" in section for name in NOT_ON_GKE)


def test_the_chart_s_exporter_lists_hold_what_the_rules_read() -> None:
    assert {"kube_node_status_condition", "kube_pod_created", "kube_pod_status_ready_time"} <= metrics.KUBE_STATE_METRICS
    assert "node_cpu_seconds_total" in metrics.NODE_EXPORTER


def _idle_expr(platform: dict[str, Any]) -> str:
    [rule] = [r for r in _rules(_groups(platform)) if r.get("alert") == "GpuAllocatedButIdle"]
    return rule["expr"]


def test_the_idle_gpu_alert_on_gke_drops_the_managed_exporter_s_own_namespace() -> None:
    assert 'namespace!~"dcgm-exporter|gke-managed-system"' in _idle_expr(_gcp_platform())


def test_the_idle_gpu_alert_with_the_chart_drops_only_nvidia_s_exporter_namespace() -> None:
    platform = _gcp_platform()
    platform["observability"] = {"prometheus": "kube-prometheus-stack"}
    assert 'namespace!="dcgm-exporter"' in _idle_expr(platform)


def test_gke_evaluates_node_not_ready_from_its_system_metric_in_global_rules_alone() -> None:
    spec = spec_of(_gcp_platform())
    cluster_rules = {r.get("alert") for g in rule_groups(spec, pools_of(_gcp_platform()), priority_tiers(spec)) for r in g["rules"]}
    global_rules = {r.get("alert") for g in global_rule_groups(spec) for r in g["rules"]}
    assert global_rules == set(GKE_SYSTEM_RULES) == {"NodeNotReady"}
    assert not cluster_rules & global_rules


def test_the_chart_has_no_global_rules() -> None:
    platform = _gcp_platform()
    platform["observability"] = {"prometheus": "kube-prometheus-stack"}
    assert global_rule_groups(spec_of(platform)) == []


def test_gke_s_node_condition_metric_is_a_published_gke_series_only() -> None:
    assert "kubernetes.io/node/status_condition" in metrics.published("managed")
    assert "kubernetes.io/node/status_condition" not in metrics.published()


def test_gke_s_kube_state_list_covers_exactly_the_kube_state_packages_the_platform_enables() -> None:
    from components.observability.objects import managed_components

    kube_state = {"POD", "DEPLOYMENT", "STATEFULSET", "DAEMONSET", "JOBSET", "HPA", "STORAGE"}
    enabled = set(managed_components(spec_of(_gcp_platform()))) & kube_state
    assert set(metrics.GKE_KUBE_STATE_BY_PACKAGE) == enabled

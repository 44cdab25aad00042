"""Dashboards: every query is PromQL naming only published or recorded metrics, and each ships as
a ConfigMap the grafana sidecar loads."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from obs_support import onprem_rule_groups, run_promtool
from promql_names import unknown_metrics

from components.observability import dashboards
from components.observability.dashboards import BOARDS, Board


def _selector(variable_query: str) -> str:
    """The series selector of Grafana's `label_values(selector, label)` (not PromQL itself)."""
    assert variable_query.startswith("label_values(") and variable_query.endswith(")")
    return variable_query.removeprefix("label_values(").rsplit(",", 1)[0]


def _recorded() -> list[str]:
    return [rule["record"] for group in onprem_rule_groups() for rule in group["rules"] if "record" in rule]


@pytest.mark.parametrize("board", BOARDS, ids=lambda b: b.uid)
def test_every_query_parses_and_names_only_known_metrics(board: Board) -> None:
    exprs = dashboards.queries(board) + [_selector(query) for _, query in board.variables]
    assert unknown_metrics(exprs, _recorded() + ["team_pool:gpu_usd_per_hour:usage"]) == []


def test_a_dashboard_query_with_a_misspelt_metric_is_caught() -> None:
    assert unknown_metrics(['trainer_tokens_per_sec{jobset=~"$jobset"}']) == ["trainer_tokens_per_sec"]


@pytest.mark.parametrize("board", BOARDS, ids=lambda b: b.uid)
def test_every_panel_of_the_built_dashboard_carries_its_queries(board: Board) -> None:
    built = dashboards.build(board)
    assert built["uid"] == board.uid
    assert [[t["expr"] for t in p["targets"]] for p in built["panels"]] == [[q for q, _ in p.queries] for p in board.panels]
    assert {v["name"] for v in built["templating"]["list"]} == {name for name, _ in board.variables}


def test_the_dashboards_ship_as_config_maps_with_the_sidecar_label() -> None:
    maps = dashboards.config_maps()
    assert [m["metadata"]["labels"]["grafana_dashboard"] for m in maps] == ["1"] * len(BOARDS)
    assert {m["metadata"]["namespace"] for m in maps} == {"monitoring"}


def test_the_fleet_s_per_pool_panels_group_each_node_s_gpus_under_its_pool_label(tmp_path: Path) -> None:
    """promtool evaluates the utilization panel's query over two nodes of two pools, with
    kube-state-metrics scraped twice (two series per node), as kube_node_labels reports them
    with the chart's allowlist."""
    expr = dashboards.FLEET.panels[0].queries[0][0].replace("$pool", ".*")
    assert "DCGM_FI_DEV_GPU_UTIL" in expr
    node_labels = "kube_node_labels{{node=\"{node}\", label_gpu_platform_io_pool=\"{pool}\", instance=\"{i}\"}}"
    series = [
        {"series": 'DCGM_FI_DEV_GPU_UTIL{Hostname="n1", gpu="0"}', "values": "80"},
        {"series": 'DCGM_FI_DEV_GPU_UTIL{Hostname="n1", gpu="1"}', "values": "40"},
        {"series": 'DCGM_FI_DEV_GPU_UTIL{Hostname="n2", gpu="0"}', "values": "10"},
        *({"series": node_labels.format(node=n, pool=p, i=i), "values": "1"}
          for n, p in (("n1", "h100"), ("n2", "a100")) for i in ("ksm-a", "ksm-b")),
    ]
    (tmp_path / "empty.yaml").write_text("groups: []\n")
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({
        "rule_files": ["empty.yaml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": [{
            "expr": expr, "eval_time": "0m",
            "exp_samples": [{"labels": '{label_gpu_platform_io_pool="h100"}', "value": 60},
                            {"labels": '{label_gpu_platform_io_pool="a100"}', "value": 10}]}]}],
    }))
    result = run_promtool("test", "rules", "test.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr



def _evaluate(tmp_path: Path, series: list[dict[str, str]], expr: str, eval_time: str, value: float) -> str:
    """promtool's output for `expr` at `eval_time` over `series` (1m apart), expected one sample."""
    (tmp_path / "empty.yaml").write_text("groups: []\n")
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({
        "rule_files": ["empty.yaml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": [{
            "expr": expr, "eval_time": eval_time, "exp_samples": [{"labels": "{}", "value": value}]}]}],
    }))
    result = run_promtool("test", "rules", "test.yaml", cwd=tmp_path)
    return "" if result.returncode == 0 else result.stdout + result.stderr


@pytest.mark.parametrize("index", [0, 1], ids=["completed", "failed"])
def test_a_jobset_finishing_in_the_last_hour_is_counted_once(tmp_path: Path, index: int) -> None:
    """JobSet's controller writes a JobSet's counter once, at 1: `old` finished two hours before
    the evaluation, `new` half an hour before it."""
    panel = next(p for p in dashboards.QUEUES.panels if p.title == "JobSets completed and failed (last hour)")
    expr = panel.queries[index][0]
    counter = "jobset_completed_total" if index == 0 else "jobset_failed_total"
    series = [
        {"series": f'{counter}{{jobset_name="old", namespace="team-a"}}', "values": "1x180"},
        {"series": f'{counter}{{jobset_name="new", namespace="team-a"}}', "values": "_x149 1x30"},
    ]
    assert _evaluate(tmp_path, series, expr, "180m", 1) == ""


def test_no_jobset_finishing_in_the_last_hour_reads_zero(tmp_path: Path) -> None:
    panel = next(p for p in dashboards.QUEUES.panels if p.title == "JobSets completed and failed (last hour)")
    series = [{"series": 'jobset_completed_total{jobset_name="old", namespace="team-a"}', "values": "1x180"}]
    assert _evaluate(tmp_path, series, panel.queries[0][0], "180m", 0) == ""

"""The shipped rule groups under Debian's promtool: they parse, every alert fires on its
synthetic series and stays quiet on the healthy ones, and every metric they name exists."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
from obs_support import onprem_rule_groups, run_promtool, write_rules

from promql_names import metric_names, unknown_metrics

UNIT_TESTS = Path(__file__).with_name("alerts.test.yaml")


def _without_annotations(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    stripped = copy.deepcopy(groups)
    for group in stripped:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    return stripped


def _unit_test(tmp_path: Path, groups: list[dict[str, Any]]) -> str:
    write_rules(tmp_path, _without_annotations(groups))
    shutil.copy(UNIT_TESTS, tmp_path / UNIT_TESTS.name)
    result = run_promtool("test", "rules", UNIT_TESTS.name, cwd=tmp_path)
    return result.stdout + result.stderr if result.returncode else ""


def _alert(groups: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(rule for group in groups for rule in group["rules"] if rule.get("alert") == name)


def test_the_rule_file_passes_promtool_check_rules(tmp_path: Path) -> None:
    path = write_rules(tmp_path, onprem_rule_groups())
    result = run_promtool("check", "rules", path.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_broken_expression_fails_promtool_check_rules(tmp_path: Path) -> None:
    groups = onprem_rule_groups()
    _alert(groups, "GpuXidError")["expr"] = "DCGM_FI_DEV_XID_ERRORS != != 0"
    result = run_promtool("check", "rules", write_rules(tmp_path, groups).name, cwd=tmp_path)
    assert result.returncode != 0 and "GpuXidError" in result.stdout + result.stderr


def test_every_alert_fires_and_stays_quiet_in_promtool_unit_tests(tmp_path: Path) -> None:
    assert _unit_test(tmp_path, onprem_rule_groups()) == ""


def test_every_alert_has_a_unit_test() -> None:
    tested = set(UNIT_TESTS.read_text().split("alertname: ")[1:])
    names = {chunk.split(",")[0].split()[0] for chunk in tested}
    alerts = {rule["alert"] for group in onprem_rule_groups() for rule in group["rules"] if "alert" in rule}
    assert alerts - names == set()


@pytest.mark.parametrize(
    ("alert", "wrong"),
    [
        ("GpuFellOffTheBus", 'DCGM_EXP_XID_ERRORS_COUNT{xid="13"} > 0'),
        # The last-XID gauge never returns to 0: alerts on it never resolve.
        ("GpuFellOffTheBus", "DCGM_FI_DEV_XID_ERRORS == 79"),
        ("GpuXidError", "DCGM_FI_DEV_XID_ERRORS != 0 and DCGM_FI_DEV_XID_ERRORS != 79"),
        # Without the exporter's namespace excluded, an unallocated GPU counts as an idle pod's.
        ("GpuAllocatedButIdle", 'max by (namespace, pod) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{pod!=""}) < 0.01'),
        ("NodeNotReady", 'kube_node_status_condition{condition="Ready", status="true"} == 1'),
        ("TrainingJobStalled", "(time() - trainer_last_step_timestamp_seconds) > 10 * 3600"),
        # Alerting on every job the gate probed, not only those it failed.
        ("TrainingOnFailedFabricCheck", "max by (namespace, jobset, check, transport) (trainer_fabric_check_passed) >= 0"),
    ],
)
def test_a_wrong_expression_fails_the_unit_tests(tmp_path: Path, alert: str, wrong: str) -> None:
    groups = onprem_rule_groups()
    _alert(groups, alert)["expr"] = wrong
    assert alert in _unit_test(tmp_path, groups)


def test_goodput_over_process_wall_time_misses_the_time_between_attempts(tmp_path: Path) -> None:
    groups = onprem_rule_groups()
    [record] = [r for g in groups for r in g["rules"] if r.get("record") == "job:trainer_goodput:ratio1h"]
    by = "namespace, jobset"
    record["expr"] = (f"sum by ({by}) (increase(trainer_committed_seconds_total[1h]))"
                      f" / sum by ({by}) (increase(trainer_wall_seconds_total[1h]))")
    assert 'jobset="restarts"' in _unit_test(tmp_path, groups)


def test_every_rule_names_only_published_metrics() -> None:
    rules = [rule for group in onprem_rule_groups() for rule in group["rules"]]
    recorded = [rule["record"] for rule in rules if "record" in rule]
    assert unknown_metrics([rule["expr"] for rule in rules], recorded) == []


def test_a_misspelt_metric_name_is_reported() -> None:
    assert unknown_metrics(["rate(DCGM_FI_DEV_ECC_DBE_VOLTOTAL[5m]) > 0"]) == ["DCGM_FI_DEV_ECC_DBE_VOLTOTAL"]


def test_metric_names_skip_functions_labels_keywords_and_groupings() -> None:
    expr = 'sum by (le, cluster_queue) (rate(kueue_x_bucket{priority_class="a b"}[1h])) > 3 and on(pod) up offset 5m'
    assert metric_names(expr) == {"kueue_x_bucket", "up"}


def test_an_expression_that_is_not_promql_is_refused() -> None:
    with pytest.raises(ValueError):
        metric_names("rate(DCGM_FI_DEV_XID_ERRORS[5m] > 0")

"""The outputs of a simulation: jobs.csv, segments.csv, summary.json and report.md with its plots,
checked on a small hand-computed run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from sim_support import job, pool, queue, stack

from infra.tools.simulate import engine, report


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # One always-on 8-slot node at $10/h for a team with 8 slots: s1 runs 0-3600, e1 waits and
    # runs 3600-5400, and a 2-node job is rejected. The horizon is 5400 s: 1.5 node-hours, $15.
    sim = stack([pool(min_nodes=1, max_nodes=1, autoscaled=False)], [queue("a", {"p": 8}, cohort=None)])
    trace = [
        job("s1", 0, "a", duration=3600),
        job("e1", 0, "a", "best-effort", duration=1800),
        job("big", 60, "a", nodes=2),
    ]
    out = tmp_path_factory.mktemp("simulate")
    report.write(engine.simulate(sim, trace), sim, out)
    return out


def rows(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_jobs_csv_has_one_row_per_job_with_the_issue_columns(written: Path) -> None:
    assert (written / "jobs.csv").read_text().splitlines()[0] == (
        "id,team,tier,pool,submit_s,first_start_s,end_s,wait_s,preemptions,interruptions,lost_gpu_s,status"
    )
    assert rows(written / "jobs.csv") == [
        {"id": "s1", "team": "a", "tier": "standard", "pool": "p", "submit_s": "0", "first_start_s": "0", "end_s": "3600",
         "wait_s": "0", "preemptions": "0", "interruptions": "0", "lost_gpu_s": "0", "status": "finished"},
        {"id": "e1", "team": "a", "tier": "best-effort", "pool": "p", "submit_s": "0", "first_start_s": "3600",
         "end_s": "5400", "wait_s": "3600", "preemptions": "0", "interruptions": "0", "lost_gpu_s": "0", "status": "finished"},
        {"id": "big", "team": "a", "tier": "standard", "pool": "p", "submit_s": "60", "first_start_s": "", "end_s": "",
         "wait_s": "", "preemptions": "0", "interruptions": "0", "lost_gpu_s": "0", "status": "rejected"},
    ]


def test_segments_csv_has_one_row_per_stretch_run(written: Path) -> None:
    assert (written / "segments.csv").read_text().splitlines() == [
        "id,pool,start_s,end_s,gpus,end_reason",
        "s1,p,0,3600,8,finished",
        "e1,p,3600,5400,8,finished",
    ]


def test_summary_has_waits_gpu_hours_and_cost_per_team_tier_and_pool(written: Path) -> None:
    summary = json.loads((written / "summary.json").read_text())
    assert summary["tiers"]["best-effort"]["wait_s"] == {"p50": 3600, "p95": 3600, "max": 3600}
    assert summary["teams"]["a"]["gpu_hours"] == 12  # 8 GPUs x 1 h + 8 GPUs x 0.5 h
    assert summary["teams"]["a"]["rejected"] == 1
    assert summary["pools"]["p"] == {
        "node_hours": 1.5, "gpu_utilization": 1, "cost_usd": 15, "usd_per_node_hour": 10.0, "peak_nodes": 1
    }
    assert (summary["totals"]["cost_usd"], summary["totals"]["jobs"], summary["horizon_s"]) == (15, 3, 5400)


def test_report_names_the_rejected_jobs_and_links_plots_that_exist(written: Path) -> None:
    text = (written / "report.md").read_text()
    assert "- `big`: needs 2 nodes; pool p has at most 1" in text
    for name in ("pool-p.png", "wait-cdf.png"):
        assert f"]({name})" in text
        assert (written / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_numbers_are_bare_when_whole_and_to_the_millisecond_otherwise() -> None:
    assert [report.number(v) for v in (3600.0, 1.5, 2 / 3, None)] == ["3600", "1.5", "0.667", ""]


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]
    assert (report.percentile(values, 50), report.percentile(values, 95), report.percentile([7.0], 95)) == (10, 19, 7)

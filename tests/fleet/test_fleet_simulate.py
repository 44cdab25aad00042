"""`gpu-platform simulate fleet`: the example trace replayed with MultiKueue's dispatch over
prod-aws and prod-gcp, against each worker alone, through the real command."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO

from infra import cli
from infra.tools.simulate import fleet_read, fleet_report

EXAMPLE = REPO / "examples" / "traces" / "fleet-burst.csv"
WORKERS = ("prod-aws", "prod-gcp")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("simulate")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = cli.main(["simulate", "fleet", "--trace", str(EXAMPLE), "--out", str(out)])
    assert code == 0
    return out / "fleet", buffer.getvalue()


def comparison(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "comparison.json").read_text())["runs"]


def jobs(folder: Path) -> list[dict[str, str]]:
    with (folder / "jobs.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_the_fleet_waits_less_at_p95_than_either_worker_alone(run: tuple[Path, str]) -> None:
    runs = comparison(run[0])
    fleet_p95 = runs["fleet"]["all"]["wait_p95_s"]
    for worker in WORKERS:
        assert runs[worker]["all"]["started"] == runs["fleet"]["all"]["started"]
        assert fleet_p95 < runs[worker]["all"]["wait_p95_s"], worker


def test_each_worker_alone_is_the_single_stack_simulation_of_the_same_jobs(run: tuple[Path, str], tmp_path: Path) -> None:
    assert cli.main(["simulate", "prod-gcp", "--trace", str(_as_pools(tmp_path)), "--out", str(tmp_path)]) == 0
    alone = (run[0] / fleet_report.ALONE_DIR / "prod-gcp" / "jobs.csv").read_text()
    assert alone == (tmp_path / "prod-gcp" / "jobs.csv").read_text()


def _as_pools(tmp_path: Path) -> Path:
    """The example with each GPU model named by prod-gcp's pool of it."""
    pools = {"H100-80GB": "h100-train", "H200-141GB": "h200-train", "L4": "l4-eval"}
    text = EXAMPLE.read_text()
    for model, pool in pools.items():
        text = text.replace(f",{model},", f",{pool},")
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


def test_a_job_reaches_the_second_worker_only_after_a_dispatch_round(run: tuple[Path, str]) -> None:
    second = [j for j in jobs(run[0]) if j["pool"].startswith("prod-gcp.")]
    assert second
    assert all(float(j["wait_s"]) >= fleet_read.ROUND_S for j in second)


def test_a_job_the_first_worker_admits_at_once_runs_there(run: tuple[Path, str]) -> None:
    first = jobs(run[0])[0]
    assert first["pool"] == "prod-aws.h100-train"


def test_the_command_prints_the_comparison_and_writes_each_worker_alone(run: tuple[Path, str]) -> None:
    folder, out = run
    assert out.startswith(f"fleet: {len(EXAMPLE.read_text().splitlines()) - 1} jobs over prod-aws, prod-gcp (dispatch step 1")
    assert "the fleet against each worker alone" in out
    assert {"jobs.csv", "summary.json", "report.md", "comparison.json"} <= {p.name for p in folder.iterdir()}
    for worker in WORKERS:
        assert (folder / fleet_report.ALONE_DIR / worker / "summary.json").is_file()


def test_a_trace_naming_an_unknown_gpu_model_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("id,submit_s,team,tier,pool,nodes,gpus_per_node,duration_s\na,0,research,standard,B200,1,8,3600\n")
    assert cli.main(["simulate", "fleet", "--trace", str(trace), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"{trace}:2: column pool: unknown pool 'B200'")


def test_the_manager_reclaims_its_quota_from_a_borrowing_team(tmp_path: Path) -> None:
    """applied's 10-hour best-effort jobs hold every H100 GPU of the manager's quota (some run,
    the others queue on the workers), borrowing research's; research's jobs that follow fit its
    nominal quota on the manager, which preempts applied's latest reservations
    (reclaimWithinCohort Any) instead of holding research back until applied's jobs end."""
    rows = ["id,submit_s,team,tier,pool,nodes,gpus_per_node,duration_s,checkpoint_every_s"]
    rows += [f"fill-{i:02d},0,applied,best-effort,H100-80GB,1,8,36000,1800" for i in range(16)]
    rows += [f"claim-{i},3600,research,production,H100-80GB,1,8,3600,1800" for i in range(4)]
    trace = tmp_path / "reclaim.csv"
    trace.write_text("\n".join(rows) + "\n")
    assert cli.main(["simulate", "fleet", "--trace", str(trace), "--out", str(tmp_path)]) == 0
    done = {j["id"]: j for j in jobs(tmp_path / "fleet")}
    assert all(float(done[f"claim-{i}"]["wait_s"]) < 3600 for i in range(4))

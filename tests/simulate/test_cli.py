"""`gpu-platform simulate`: the example trace runs on its stack and writes every output; bad input
is exit 2 with one line per problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import REPO

from infra import cli

EXAMPLE = REPO / "examples" / "traces" / "prod-aws-week.csv"


def test_the_example_trace_simulates_on_its_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["simulate", "prod-aws", "--trace", str(EXAMPLE), "--out", str(tmp_path), "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"prod-aws: {len(EXAMPLE.read_text().splitlines()) - 1} jobs, seed 3")
    assert "team      tier" in out and "total:" in out
    written = {p.name for p in (tmp_path / "prod-aws").iterdir()}
    assert {"jobs.csv", "segments.csv", "summary.json", "report.md", "wait-cdf.png", "pool-h100-train.png"} <= written
    summary = json.loads((tmp_path / "prod-aws" / "summary.json").read_text())
    assert summary["seed"] == 3 and set(summary["pools"]) == {"h100-train", "h200-train", "l4-eval"}


def test_every_problem_with_the_flags_and_the_trace_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text(
        "id,submit_s,team,tier,pool,nodes,gpus_per_node,duration_s\n"
        "a,0,research,standard,h100-train,1,8,3600\n"
        "b,x,ops,standard,h100-train,1,8,3600\n"
    )
    argv = ["simulate", "prod-aws", "--trace", str(trace), "--out", str(tmp_path)]
    code = cli.main([*argv, "--spot-rate", "gpu=1", "--scale-up-s", "h100-train=soon"])
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        "--spot-rate gpu=1: no pool 'gpu'; pools: h100-train, h200-train, l4-eval",
        "--scale-up-s h100-train=soon: expected h100-train=NUMBER, a number >= 0",
        f"{trace}:3: column team: unknown team 'ops'; teams: applied, research",
        f"{trace}:3: column submit_s: expected seconds from the trace's start (a number >= 0, at most 31622400), got 'x'",
    ]
    assert not (tmp_path / "prod-aws").exists()

"""A run always ends: preemption cycles between queues take the clock with them, and a job
admitted past the bound on admissions stops the run with an error naming its pool."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import REPO
from sim_support import job, outcomes, pool, queue, stack

from infra import cli
from infra.tools.simulate import engine, model, state


def reclaiming_queues() -> list:
    # prod-gcp's shape on its H200 pool: two teams of 16 slots, a 32-slot pool, reclaim Any.
    return [queue("a", {"p": 16}, reclaim="Any"), queue("b", {"p": 16}, reclaim="Any")]


def test_a_preemption_of_a_job_admitted_that_instant_waits_instead_of_cycling() -> None:
    # Each team runs a production job on 8 of its 16 slots; a-std (16 slots) borrows b's idle 8
    # at 50. At 100 b-opp reclaims them (preempting a-std), and b-std would preempt b-opp within
    # its queue while borrowing, but b-opp was admitted at 100: that preemption waits
    # PREEMPTION_S. At 101 a-opp fits in a's own quota. Without the wait, b-std would preempt
    # b-opp, a-opp reclaim from b-std, a-std preempt a-opp, b-opp reclaim from a-std, ... at one
    # instant, forever. At 110 b-std, after preempting b-opp, would still not fit: nothing moves
    # until b-opp and a-opp end at 1100.
    sim = stack([pool(min_nodes=4, max_nodes=4)], reclaiming_queues())
    trace = [
        job("a-run", 0, "a", "production", gpus=8, duration=10_000),
        job("b-run", 0, "b", "production", gpus=8, duration=10_000),
        job("a-std", 50, "a", nodes=2, gpus=8, duration=1000),
        job("b-opp", 100, "b", "opportunistic", gpus=8, duration=1000),
        job("b-std", 100, "b", nodes=2, gpus=8, duration=1000),
        job("a-opp", 101, "a", "opportunistic", gpus=8, duration=1000),
    ]
    result = engine.simulate(sim, trace)
    assert {j.status for j in result.jobs} == {"finished"}
    held = sorted((r.start, r.end, r.job) for r in result.reservations if r.job not in ("a-run", "b-run"))
    assert held == [
        (50, 100, "a-std"),
        (100, 1100, "b-opp"),
        (101, 1100, "a-opp"),
        (1100, 2100, "a-std"),
        (2100, 3100, "a-opp"),
        (3100, 4100, "b-std"),
    ]
    assert model.PREEMPTION_S == 10.0


def test_a_job_admitted_past_the_bound_stops_the_run_naming_its_pool_and_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    # One whole-GPU node and two 4-slot jobs: j2 is admitted at 0, times out waiting for a node,
    # is admitted again at 1860, times out again, and would be admitted a third time at 3780.
    monkeypatch.setattr(engine, "MAX_ADMISSIONS_PER_JOB", 2)
    sim = stack([pool(min_nodes=1, max_nodes=1, autoscaled=False)], [queue("a", {"p": 8}, cohort=None)])
    trace = [job("j1", 0, "a", gpus=4, duration=5000), job("j2", 0, "a", gpus=4, duration=5000)]
    with pytest.raises(state.BoundExceeded, match=r"pool p: job j2 reached the bound of 2 admissions per job at t=3780s"):
        engine.simulate(sim, trace)


def test_the_same_run_under_the_default_bound_finishes() -> None:
    sim = stack([pool(min_nodes=1, max_nodes=1, autoscaled=False)], [queue("a", {"p": 8}, cohort=None)])
    trace = [job("j1", 0, "a", gpus=4, duration=5000), job("j2", 0, "a", gpus=4, duration=5000)]
    assert outcomes(engine.simulate(sim, trace))["j2"].status == "finished"


def test_the_command_reports_a_run_past_the_bound_as_one_line_exit_1(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(engine, "MAX_ADMISSIONS_PER_JOB", 1)
    trace = REPO / "examples" / "traces" / "prod-aws-week.csv"
    assert cli.main(["simulate", "prod-aws", "--trace", str(trace), "--out", str(tmp_path)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert re.fullmatch(r"error: simulate prod-aws: pool [a-z0-9-]+: job job-\d{4} reached the bound of 1 admissions per job .*", line)

"""Traces: a valid CSV reads as jobs; every problem of an invalid one is one line naming the
line and the column."""

from __future__ import annotations

import csv
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import REPO

from infra.tools.simulate import trace

NAMES = trace.StackNames(teams={"research", "applied"}, tiers={"production", "standard"}, pools={"l4-train"})
HEADER = "id,submit_s,team,tier,pool,nodes,gpus_per_node,duration_s"


def problems_of(text: str) -> list[str]:
    with pytest.raises(trace.TraceError) as caught:
        trace.parse([line.split(",") for line in text.strip().splitlines()], "t.csv", NAMES)
    return caught.value.problems


def test_a_valid_trace_reads_as_jobs_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        f"{HEADER},checkpoint_every_s\n"
        "b,60,research,production,l4-train,2,4,3600,600\n"
        "a,0.5,applied,standard,l4-train,1,1,90.25,\n"
    )
    jobs = trace.read(path, NAMES)
    assert jobs == [
        trace.TraceJob("b", 60.0, "research", "production", "l4-train", 2, 4, 3600.0, 600.0, line=2),
        trace.TraceJob("a", 0.5, "applied", "standard", "l4-train", 1, 1, 90.25, None, line=3),
    ]


def test_the_checkpoint_column_is_optional() -> None:
    jobs = trace.parse([HEADER.split(","), "a,0,research,standard,l4-train,1,1,10".split(",")], "t.csv", NAMES)
    assert jobs[0].checkpoint_every_s is None


def test_unknown_team_tier_and_pool_are_one_line_each_naming_line_and_column() -> None:
    assert problems_of(f"{HEADER}\na,0,ops,urgent,h100,1,1,10") == [
        "t.csv:2: column team: unknown team 'ops'; teams: applied, research",
        "t.csv:2: column tier: unknown tier 'urgent'; tiers: production, standard",
        "t.csv:2: column pool: unknown pool 'h100'; pools: l4-train",
    ]


def test_bad_numbers_name_the_column_and_what_was_expected() -> None:
    assert problems_of(f"{HEADER}\na,-1,research,standard,l4-train,1.5,0,abc") == [
        "t.csv:2: column submit_s: expected seconds from the trace's start (a number >= 0, at most 31622400), got '-1'",
        "t.csv:2: column duration_s: expected the run time in seconds (a number > 0, at most 31622400), got 'abc'",
        "t.csv:2: column nodes: expected a whole number from 1 to 5000, got '1.5'",
        "t.csv:2: column gpus_per_node: expected a whole number from 1 to 768, got '0'",
    ]


def test_a_zero_or_infinite_duration_is_invalid() -> None:
    problems = problems_of(f"{HEADER}\na,0,research,standard,l4-train,1,1,0\nb,0,research,standard,l4-train,1,1,inf")
    assert [p.split(": column ")[0] for p in problems] == ["t.csv:2", "t.csv:3"]


def test_a_bad_checkpoint_interval_is_reported() -> None:
    assert problems_of(f"{HEADER},checkpoint_every_s\na,0,research,standard,l4-train,1,1,10,0") == [
        "t.csv:2: column checkpoint_every_s: expected seconds between checkpoints (a number > 0, at most 31622400, or empty for none), got '0'"
    ]


def test_a_missing_column_is_reported_once_against_the_header() -> None:
    assert problems_of("id,submit_s,team,tier,pool,nodes,gpus_per_node\na,0,research,standard,l4-train,1,1") == [
        "t.csv:1: column duration_s: missing from the header"
    ]


def test_an_unknown_or_repeated_column_is_an_error() -> None:
    assert problems_of(f"{HEADER},owner,team\na,0,research,standard,l4-train,1,1,10,x,research") == [
        "t.csv:1: column 'owner': unknown column; columns: id, submit_s, team, tier, pool, nodes, gpus_per_node, duration_s, checkpoint_every_s",
        "t.csv:1: column team: appears more than once",
    ]


def test_a_row_of_the_wrong_width_is_reported() -> None:
    assert problems_of(f"{HEADER}\na,0,research,standard,l4-train,1,1") == ["t.csv:2: expected 8 cells, got 7"]


def test_duplicate_ids_name_the_first_line() -> None:
    assert problems_of(f"{HEADER}\na,0,research,standard,l4-train,1,1,10\na,5,research,standard,l4-train,1,1,10") == [
        "t.csv:3: column id: 'a' is also the id on line 2"
    ]


def test_every_problem_of_every_row_is_listed_at_once() -> None:
    problems = problems_of(f"{HEADER}\na,0,ops,standard,l4-train,1,1,10\nb,x,research,standard,l4-train,1,1,10")
    assert problems == [
        "t.csv:2: column team: unknown team 'ops'; teams: applied, research",
        "t.csv:3: column submit_s: expected seconds from the trace's start (a number >= 0, at most 31622400), got 'x'",
    ]


def test_an_empty_file_asks_for_the_header(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("")
    with pytest.raises(trace.TraceError) as caught:
        trace.read(path, NAMES)
    assert caught.value.problems == [f"{path}:1: empty file; expected a header: {HEADER}"]


def test_a_missing_file_is_one_problem(tmp_path: Path) -> None:
    with pytest.raises(trace.TraceError) as caught:
        trace.read(tmp_path / "nope.csv", NAMES)
    assert len(caught.value.problems) == 1 and "cannot read the trace" in caught.value.problems[0]


@pytest.mark.skipif(shutil.which("jq") is None, reason="needs the jq command")
def test_the_documented_jq_program_turns_finished_workloads_into_a_trace() -> None:
    # tests/simulate/workloads.json: two finished Kueue Workloads (v1beta2) and a running one.
    program = REPO / "examples" / "traces" / "workloads-to-trace.jq"
    workloads = Path(__file__).with_name("workloads.json")
    done = subprocess.run(["jq", "-r", "-f", str(program), str(workloads)], capture_output=True, text=True, check=True)
    rows = list(csv.reader(done.stdout.splitlines()))
    names = trace.StackNames(
        teams={"research", "applied"}, tiers={"production", "standard"}, pools={"h100-train", "l4-eval"}
    )
    assert trace.parse(rows, "workloads", names) == [
        trace.TraceJob("applied/eval-b", 0, "applied", "standard", "l4-eval", 1, 1, 1200, None, line=2),
        trace.TraceJob("research/train-a", 1800, "research", "production", "h100-train", 2, 8, 7800, None, line=3),
    ]


@pytest.mark.parametrize("column", ["submit_s", "duration_s"])
def test_times_past_the_horizon_are_refused(column: str) -> None:
    row = {"submit_s": "0", "duration_s": "60"} | {column: "1e308"}
    (line,) = problems_of(f"{HEADER}\nj,{row['submit_s']},research,production,l4-train,1,1,{row['duration_s']}")
    assert line.startswith(f"t.csv:2: column {column}: expected ") and f"at most {trace.MAX_TRACE_S}" in line


@pytest.mark.parametrize("nodes", ["5001", "9" * 5000])
def test_counts_beyond_a_cluster_are_refused(nodes: str) -> None:
    assert problems_of(f"{HEADER}\nj,0,research,production,l4-train,{nodes},1,60") == [
        f"t.csv:2: column nodes: expected a whole number from 1 to {trace.MAX_NODES}, got {nodes!r}"
    ]

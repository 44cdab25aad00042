"""`review --trace`: the Capacity impact section compares waits and cost of one trace on what the
base and the head of each stack deploy."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import pytest

from infra import cli, synth
from infra.tools.simulate import impact

Synthesized = Callable[[str], synth.Synthesis]
HEADER = "id,submit_s,team,tier,pool,nodes,gpus_per_node,duration_s"
# Four one-node jobs on dev-aws's l4-train pool (two nodes at most), all at once.
ROWS = [HEADER.split(",")] + [f"j{i},0,research,standard,l4-train,1,4,3600".split(",") for i in range(4)]


def snapshot(synthesized: Synthesized, stack: str, max_nodes: int | None = None) -> dict[str, Any]:
    result = synthesized(stack)
    resources = copy.deepcopy(result.resources)
    if max_nodes is not None:
        group = next(r for r in resources if r["type"] == "aws:eks/nodeGroup:NodeGroup" and r["name"].endswith("l4-train"))
        group["inputs"]["scalingConfig"]["maxSize"] = max_nodes
    return {"resources": resources, "outputs": result.outputs}


def test_a_smaller_pool_shows_longer_waits_and_lower_cost(synthesized: Synthesized) -> None:
    text = impact.markdown(
        ROWS, "t.csv", {"dev-aws": snapshot(synthesized, "dev-aws")}, {"dev-aws": snapshot(synthesized, "dev-aws", max_nodes=1)}
    )
    lines = text.splitlines()
    assert lines[0] == "## Capacity impact" and "### `dev-aws`" in lines
    # Base: two nodes run two jobs at a time; head: one node runs one.
    research = next(line for line in lines if line.startswith("| p95 wait, team `research`"))
    assert research == "| p95 wait, team `research` | 1.1h | 3.1h | +2.0h |"
    assert any(line.startswith("| jobs finished | 4 | 4 |") for line in lines)
    assert next(line for line in lines if line.startswith("| cost (USD)")).split("|")[4].strip().startswith("-")


def test_a_stack_the_trace_does_not_fit_is_named_with_its_first_problem(synthesized: Synthesized) -> None:
    text = impact.markdown(ROWS, "t.csv", {"prod-aws": snapshot(synthesized, "prod-aws")}, {"prod-aws": snapshot(synthesized, "prod-aws")})
    assert "- `prod-aws`: not simulated: the trace does not fit: t.csv:2: column pool: unknown pool 'l4-train'" in text
    assert "(and 3 more)" in text


def test_a_stack_added_by_the_pull_request_has_only_a_head(synthesized: Synthesized) -> None:
    text = impact.markdown(ROWS, "t.csv", {}, {"dev-aws": snapshot(synthesized, "dev-aws")})
    assert "The base is not simulated: no such stack." in text
    assert "| p95 wait, team `research` | - | 1.1h | - |" in text


def test_review_with_an_unreadable_trace_is_exit_2_before_synthesizing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.csv"
    assert cli.main(["review", "--base", "HEAD", "--trace", str(missing)]) == 2
    assert f"{missing}: cannot read the trace" in capsys.readouterr().err

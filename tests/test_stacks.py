"""Every checked-in stack file is valid and synthesizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra import stackfile

STACKS = stackfile.all_stacks(Path(__file__).resolve().parents[1])


def test_the_example_stacks_are_the_ones_teams_start_from() -> None:
    assert STACKS == ["dev-aws", "dev-gcp", "onprem", "prod-aws", "prod-gcp"]


@pytest.mark.parametrize("stack", STACKS)
def test_stack_synthesizes(stack: str, synthesized) -> None:
    result = synthesized(stack)
    assert result.stack == stack
    assert result.outputs["clusterName"]

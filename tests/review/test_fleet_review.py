"""`gpu-platform review` on the fleet manager stack: its synthesized diff, the fleet's own checks
on the working tree, and `--trace` simulated with MultiKueue's dispatch on both sides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import REPO
from test_review_git import copy_of_this_repository, edit_stack

from infra import cli

TRACE = REPO / "examples" / "traces" / "fleet-burst.csv"
GCP_FIRST = ["organization/gpu-platform/prod-gcp", "organization/gpu-platform/prod-aws"]


def gcp_first_from_another_range(platform: dict[str, Any]) -> None:
    platform["fleet"]["order"] = GCP_FIRST
    platform["fleet"]["managerCidrs"] = ["203.0.113.0/24"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    repo = copy_of_this_repository(tmp_path_factory.mktemp("fleet-review"))
    edit_stack(repo, "fleet", gcp_first_from_another_range)
    out = repo / "review.md"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(repo)
        assert cli.main(["review", "--base", "HEAD", "fleet", "--trace", str(TRACE), "--out", str(out)]) == 0
    return out.read_text()


def test_the_fleet_stack_is_reviewed_with_its_synthesized_changes(report: str) -> None:
    assert "### `fleet`: changed" in report
    assert "MultiKueueConfig::fleet-fleet`: updated" in report
    assert '| `spec.clusters[0]` | `"prod-aws"` | `"prod-gcp"` |' in report


def test_the_fleet_s_own_checks_run_on_the_working_tree(report: str) -> None:
    policy = report.split("**Policy** (working tree)", 1)[1].split("**Components**", 1)[0]
    assert "`fleet-worker-reachable`" in policy


def test_the_trace_is_dispatched_over_the_workers_on_both_sides(report: str) -> None:
    impact = report.split("## Capacity impact", 1)[1]
    fleet = impact.split("### `fleet`", 1)[1]
    cost = next(line for line in fleet.splitlines() if line.startswith("| cost (USD)"))
    _, _, base, head, change, _ = (cell.strip() for cell in cost.split("|"))
    # prod-gcp's H100 and H200 are dearer than prod-aws's: sending it every job first costs more.
    assert float(head.replace(",", "")) > float(base.replace(",", "")) and change.startswith("+")

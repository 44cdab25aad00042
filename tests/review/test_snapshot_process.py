"""How `review` spreads its syntheses over processes: a snapshot process synthesizes a fleet
manager over the workers it already synthesized (and, for a base whose synthesize_fleet takes
no `known`, over its own syntheses of them, to the same snapshot), a manager goes to the
process that holds its workers, and the costliest policy rules start first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components.checks import pod_security_admission
from infra.tools.review import trees

REPO = Path(__file__).resolve().parents[2]
FLEET = "stacks/Pulumi.fleet.yaml"
WORKERS = ["stacks/Pulumi.prod-aws.yaml", "stacks/Pulumi.prod-gcp.yaml"]

# The snapshot script, with each synth.run counted (by stack) into the file $RUNS; with
# $NO_KNOWN, infra.offline.synthesize_fleet is the one from before it took `known`.
COUNTED = """
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from infra import offline, synth
runs = []
real_run = synth.run
def counted(program, project, stack, *rest):
    runs.append(stack)
    return real_run(program, project, stack, *rest)
synth.run = counted
if os.environ.get("NO_KNOWN"):
    real_fleet = offline.synthesize_fleet
    def synthesize_fleet(ref, root=None):
        return real_fleet(ref, root)
    offline.synthesize_fleet = synthesize_fleet
try:
    exec(compile(os.environ["SNAPSHOT"], "<snapshot>", "exec"), {"__name__": "__main__"})
finally:
    Path(os.environ["RUNS"]).write_text(json.dumps(runs))
"""


def snapshot(tmp_path: Path, rels: list[str], no_known: bool) -> tuple[dict[str, Any], list[str]]:
    """The snapshot of `rels` of this checkout, in one process as `review` runs it, and the
    stacks synth.run ran for it."""
    out, runs = tmp_path / "out.json", tmp_path / "runs.json"
    env = {**os.environ, "SNAPSHOT": trees._SNAPSHOT, "RUNS": str(runs), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("NO_KNOWN", None)
    if no_known:
        env["NO_KNOWN"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", COUNTED, str(REPO), json.dumps(rels), str(out)], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), json.loads(runs.read_text())


@pytest.fixture(scope="module")
def with_known(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[str]]:
    # The manager first, as `review` lists the stack files: the script still synthesizes it last.
    return snapshot(tmp_path_factory.mktemp("known"), [FLEET, *WORKERS], no_known=False)


def test_a_fleet_manager_reuses_the_workers_its_process_synthesized(with_known: tuple[dict[str, Any], list[str]]) -> None:
    result, runs = with_known
    assert sorted(runs) == ["fleet", "prod-aws", "prod-gcp"]
    assert sorted(result["fleet"]["workers"]) == ["organization/gpu-platform/prod-aws", "organization/gpu-platform/prod-gcp"]
    assert result["fleet"]["workers"]["organization/gpu-platform/prod-aws"]["resources"] == result["prod-aws"]["resources"]


def test_a_base_whose_synthesize_fleet_takes_no_known_synthesizes_the_workers_again_to_the_same_snapshot(
    tmp_path: Path, with_known: tuple[dict[str, Any], list[str]]
) -> None:
    result, runs = snapshot(tmp_path, [FLEET, *WORKERS], no_known=True)
    assert sorted(runs) == ["fleet", "prod-aws", "prod-aws", "prod-gcp", "prod-gcp"]
    assert json.dumps(result, sort_keys=True) == json.dumps(with_known[0], sort_keys=True)


def test_a_fleet_manager_goes_to_the_process_that_synthesizes_its_workers() -> None:
    rels = sorted(str(p.relative_to(REPO)) for p in (REPO / "stacks").glob("Pulumi.*.yaml"))
    # Four cores for one tree: a process per cloud (aws, gcp, existing), and the manager joins
    # one holding a worker rather than synthesizing both workers in a fourth.
    parts = trees._split({"working": rels}, {"working": REPO}, 4)
    assert sorted(rel for _, part in parts for rel in part) == rels
    (manager,) = [part for _, part in parts if FLEET in part]
    assert set(manager) & set(WORKERS)


def test_the_stack_with_admission_policies_has_its_policy_rules_started_first() -> None:
    def head(resources: int, policies: int) -> dict[str, Any]:
        return {"resources": [{"type": pod_security_admission.POLICY}] * policies + [{"type": "aws:ec2/vpc:Vpc"}] * resources}

    items = [("big", None, head(200, 0)), ("gcp", None, head(150, 4)), ("small", None, head(50, 0)), ("removed", None, None)]
    assert [name for name, _, _ in sorted(items, key=trees._policy_cost, reverse=True)] == ["gcp", "big", "small", "removed"]

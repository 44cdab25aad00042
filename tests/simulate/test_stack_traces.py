"""Every shipped stack simulates a week of its own trace to the end: the example trace on the
prod stacks and on prod-aws with its H200 pool on a Capacity Block, and a trace of the same shape
per other stack (examples/traces). The runs keep the simulator's invariants and end settled: no
job admitted over and over, production work all done. How long each takes is benchmarks/."""

from __future__ import annotations

import json

from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from helpers import REPO
from test_properties import lendable, peak

from infra import cli, synth
from infra.tools.simulate import build, engine, model, state, trace

Synthesized = Callable[[str], synth.Synthesis]
TRACES = REPO / "examples" / "traces"
CAPACITY_BLOCK = REPO / "tests" / "data" / "stacks" / "Pulumi.prod-aws-capacity-block.yaml"
RUNS = {
    "prod-aws": ("prod-aws", "prod-aws-week.csv"),
    "prod-gcp": ("prod-gcp", "prod-aws-week.csv"),
    "prod-aws-capacity-block": (str(CAPACITY_BLOCK), "prod-aws-week.csv"),
    "dev-aws": ("dev-aws", "dev-aws-week.csv"),
    "dev-gcp": ("dev-gcp", "dev-gcp-week.csv"),
    "onprem": ("onprem", "onprem-week.csv"),
}
Run = tuple[model.StackModel, list[trace.TraceJob], state.Result]


@pytest.fixture(scope="module")
def runs(synthesized: Synthesized) -> dict[str, Run]:
    out: dict[str, Run] = {}
    for name, (ref, trace_file) in RUNS.items():
        result = synthesized(ref)
        stack_model = build.stack_model(name, result.resources, result.outputs)
        names = trace.StackNames(teams=stack_model.teams, tiers=stack_model.tiers, pools=[p.name for p in stack_model.pools])
        jobs = trace.read(TRACES / trace_file, names)
        out[name] = (stack_model, jobs, engine.simulate(stack_model, jobs))
    return out


@pytest.mark.parametrize("name", RUNS)
def test_the_week_ends_with_every_job_accounted_for(runs: dict[str, Run], name: str) -> None:
    _, jobs, result = runs[name]
    assert len(jobs) == 565 and [j.id for j in result.jobs] == [j.id for j in jobs]
    statuses = [j.status for j in result.jobs]
    assert statuses.count("finished") >= 0.9 * len(jobs)
    assert all(j.status == "finished" for j in result.jobs if j.tier == "production")
    # Ended when the work did, not at the run cap.
    assert result.horizon < max(j.submit_s for j in jobs) + 14 * 86400


@pytest.mark.parametrize("name", RUNS)
def test_no_job_is_admitted_twice_at_one_instant(runs: dict[str, Run], name: str) -> None:
    # A job admitted at an instant is preempted at most once then (the engine's module doc): a
    # preemption cycle at one instant would admit it again and again without the clock moving.
    _, _, result = runs[name]
    starts: dict[tuple[str, float], int] = defaultdict(int)
    for r in result.reservations:
        starts[(r.job, r.start)] += 1
    assert max(starts.values()) == 1


@pytest.mark.parametrize("name", RUNS)
def test_running_slots_stay_within_each_pool_and_each_queues_reach(runs: dict[str, Run], name: str) -> None:
    stack_model, jobs, result = runs[name]
    nodes = {j.id: j.nodes for j in jobs}
    for p in stack_model.pools:
        segments = [s for s in result.segments if s.pool == p.name]
        assert segments, f"nothing ran on {p.name}"
        assert peak((s.start, s.end, s.gpus) for s in segments) <= p.max_slots
        if p.whole_nodes:
            assert peak((s.start, s.end, nodes[s.job]) for s in segments) <= p.max_nodes
        for q in stack_model.queues:
            held = [(r.start, r.end, r.slots) for r in result.reservations if r.queue == q.name and r.pool == p.name]
            assert peak(held) <= q.nominal.get(p.name, 0) + lendable(stack_model, q, p.name)


@pytest.mark.parametrize("name", RUNS)
def test_finished_jobs_ran_their_duration_plus_their_lost_work(runs: dict[str, Run], name: str) -> None:
    _, jobs, result = runs[name]
    ran: dict[str, float] = defaultdict(float)
    for s in result.segments:
        ran[s.job] += s.end - s.start
    specs = {j.id: j for j in jobs}
    finished = [j for j in result.jobs if j.status == "finished"]
    for job in finished:
        assert ran[job.id] == pytest.approx(specs[job.id].duration_s + job.lost_gpu_s / job.slots, abs=1e-6)


def test_the_capacity_block_pool_is_read_from_its_launch_template(runs: dict[str, Run], synthesized: Synthesized) -> None:
    stack_model = runs["prod-aws-capacity-block"][0]
    assert stack_model.pool("h200-train").instance_type == "p5en.48xlarge"
    assert stack_model.pool("h200-train").slots_per_node == 8
    group = next(
        r for r in synthesized(str(CAPACITY_BLOCK)).resources if r["type"] == "aws:eks/nodeGroup:NodeGroup" and "h200" in r["name"]
    )
    # As EKS requires of a Capacity Block node group: no instance types of its own.
    assert not group["inputs"].get("instanceTypes")


def test_a_node_group_without_an_instance_type_anywhere_is_a_model_error(synthesized: Synthesized) -> None:
    result = synthesized(str(CAPACITY_BLOCK))
    resources: list[dict[str, Any]] = [
        r for r in result.resources if r["type"] != "aws:ec2/launchTemplate:LaunchTemplate" or "h200" not in r["name"]
    ]
    with pytest.raises(model.ModelError, match=r"h200-train: one instance type expected, got \[\]"):
        build.stack_model("cb", resources, result.outputs)


def test_a_stack_with_fair_sharing_simulates_and_names_its_strategies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.prod-aws.yaml").read_text())
    document["config"]["gpu-platform:platform"]["scheduling"]["fairSharing"] = {"enabled": True, "weights": {"research": 2}}
    stack_file = tmp_path / "Pulumi.fair.yaml"
    stack_file.write_text(yaml.safe_dump(document))
    # Cut before day 3: from t=226,985 s applied's job-0219 and research's job-0198 preempt each
    # other once an eviction (docs/capacity-planning.md) and the whole week exceeds the bound.
    argv = ["simulate", str(stack_file), "--trace", str(TRACES / "prod-aws-week.csv"), "--out", str(tmp_path)]
    code = cli.main([*argv, "--horizon-s", "200000"])
    assert code == 0, capsys.readouterr().err
    summary = json.loads((tmp_path / "fair" / "summary.json").read_text())
    assert summary["parameters"]["kueue"]["fair_sharing"] == {
        "preemption_strategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
        "weights": {"applied": 1.0, "research": 2.0},
    }


def test_the_capacity_block_stack_simulates_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", str(CAPACITY_BLOCK), "--trace", str(TRACES / "prod-aws-week.csv"), "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out.startswith("prod-aws-capacity-block: 565 jobs")

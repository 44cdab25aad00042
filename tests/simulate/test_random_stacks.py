"""A stack the spec accepts either simulates or is refused with a documented name: random
variants of the shipped stacks (pools kept or dropped, their sizes, capacity and quotas, fair
sharing on or off), seeded, each synthesized and simulated on a short random trace."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import REPO
from test_properties import random_trace

from components.spec import SpecError
from infra import offline, stackfile
from infra.tools.simulate import build, engine, model

STACKS = ("dev-aws", "dev-gcp", "prod-aws", "prod-gcp", "onprem")
CASES = 10


def variant(rng: random.Random) -> dict[str, Any]:
    """A shipped stack file with its pools, quotas and fair sharing drawn at random; pools only
    grow, quotas only shrink, so most variants stay within what the spec accepts."""
    document = yaml.safe_load((REPO / "stacks" / f"Pulumi.{rng.choice(STACKS)}.yaml").read_text())
    platform = document["config"]["gpu-platform:platform"]
    pools = [p for p in platform["nodePools"] if rng.random() < 0.7] or platform["nodePools"][:1]
    for pool in pools:
        if platform["cloud"] == "existing":
            pool["minNodes"] = pool["maxNodes"] = pool["maxNodes"] + rng.randint(0, 2)
            continue
        pool["maxNodes"] += rng.randint(0, 3)
        if "provisioning" not in pool:
            pool["minNodes"] = rng.choice([0, 0, 1])
        if "capacity" in pool:
            pool["capacity"] = rng.choice(["on-demand", "spot"])
        if platform["cloud"] == "aws" and pool["instanceType"].startswith("p5") and rng.random() < 0.5:
            # An EC2 Capacity Block (docs/aws.md): on-demand only, in the block's zone.
            pool.pop("capacity", None)
            pool.update(provisioning="capacity-block", reservation="cr-0fedcba9876543210", zones=["us-east-1c"], minNodes=0)
            platform.setdefault("aws", {})["zones"] = ["us-east-1a", "us-east-1b", "us-east-1c"]
    platform["nodePools"] = pools
    names = {p["name"] for p in pools}
    for team in platform["scheduling"]["teams"]:
        team["quotas"] = {name: rng.choice([0, q // 2, q]) for name, q in team["quotas"].items() if name in names}
    if rng.random() < 0.3:
        platform["scheduling"]["fairSharing"] = {"enabled": True}
    return document


def outcome(document: dict[str, Any], path: Path, seed: int) -> str:
    """`simulated`, `refused: NAME`, or `invalid` when the spec does not accept the stack."""
    path.write_text(yaml.safe_dump(document))
    try:
        _, _, result = offline.synthesize(str(path), REPO)
    except (SpecError, stackfile.StackFileError):
        return "invalid"
    try:
        stack_model = build.stack_model(path.stem, result.resources, result.outputs)
        jobs = random_trace(stack_model, random.Random(seed), 40)
        engine.simulate(stack_model, jobs, seed=seed)
    except model.Refused as exc:
        return f"refused: {exc.reason}"
    return "simulated"


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[dict[str, Any], str]]:
    # A seed whose draws cover every cloud, Capacity Blocks and fair sharing.
    rng = random.Random(44)
    folder = tmp_path_factory.mktemp("stacks")
    documents = [variant(rng) for _ in range(CASES)]
    return [(d, outcome(d, folder / f"Pulumi.random-{i}.yaml", i)) for i, d in enumerate(documents)]


def test_every_accepted_stack_simulates_or_is_refused_by_a_documented_name(drawn: list[tuple[dict[str, Any], str]]) -> None:
    accepted = [o for _, o in drawn if o != "invalid"]
    assert len(accepted) >= CASES // 2, accepted
    documented = {f"refused: {name}" for name in model.REFUSALS}
    assert set(accepted) <= {"simulated"} | documented


def test_the_random_stacks_simulate_with_fair_sharing_and_capacity_blocks(drawn: list[tuple[dict[str, Any], str]]) -> None:
    outcomes = [o for _, o in drawn]
    assert "simulated" in outcomes, outcomes
    fair = [o for d, o in drawn if d["config"]["gpu-platform:platform"]["scheduling"].get("fairSharing")]
    assert "simulated" in fair, fair
    blocks = [o for d, o in drawn if "capacity-block" in yaml.safe_dump(d)]
    assert "simulated" in blocks, blocks


def test_a_model_error_that_is_no_refusal_fails_the_property() -> None:
    # The property tells refusals from faults: a ModelError without a name is not one.
    assert not isinstance(model.ModelError("x"), model.Refused)
    with pytest.raises(AssertionError, match="undocumented refusal"):
        model.Refused("no-such-reason", "x")


def test_variants_are_drawn_the_same_for_a_seed() -> None:
    assert variant(random.Random(3)) == variant(random.Random(3))
    assert variant(random.Random(4)) != variant(random.Random(5))

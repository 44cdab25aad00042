"""The simulation model of Karpenter pools, read from the synthesized NodePools: their limits,
capacity types and weights, and Karpenter's scale-up and scale-down profile."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from helpers import REPO, prod_aws_karpenter_config

from infra import cli, offline, synth
from infra.tools.simulate import model, read_nodepools
from infra.tools.simulate.build import stack_model

Synthesized = Callable[[str], synth.Synthesis]
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
EXAMPLE = REPO / "examples" / "traces" / "prod-aws-week.csv"


@pytest.fixture(scope="module")
def variant_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("karpenter") / "Pulumi.prod-aws-karpenter.yaml"
    path.write_text(yaml.safe_dump({"config": prod_aws_karpenter_config()}))
    return path


@pytest.fixture(scope="module")
def variant(variant_file: Path) -> synth.Synthesis:
    return offline.synthesize(str(variant_file), REPO)[2]


def build(result: synth.Synthesis, edit: Callable[[list[dict[str, Any]]], None] = lambda _: None) -> model.StackModel:
    resources = copy.deepcopy(result.resources)
    edit(resources)
    return stack_model(result.stack, resources, result.outputs)


def node_pool(resources: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(r for r in resources if r["type"] == NODE_POOL and r["inputs"]["metadata"]["name"] == name)


def test_a_node_pool_s_nodes_are_its_instance_type_up_to_its_gpu_limit_from_zero(variant: synth.Synthesis) -> None:
    pool = build(variant).pool("l40s-reserved")
    assert (pool.instance_type, pool.gpus_per_node, pool.min_nodes, pool.max_nodes, pool.spot) == ("g6e.12xlarge", 4, 0, 2, False)


def test_karpenter_scale_up_skips_the_autoscaler_loop_and_adds_its_batch_window(variant: synth.Synthesis) -> None:
    assert build(variant).pool("l4-eval").scale_up_s == model.SCALE_UP_S[("aws", "g6")] - 30 + 10


def test_a_spot_capacity_type_makes_a_spot_pool(variant: synth.Synthesis) -> None:
    def spot(resources: list[dict[str, Any]]) -> None:
        node_pool(resources, "l4-eval")["inputs"]["spec"]["template"]["spec"]["requirements"][1]["values"] = ["spot"]

    pool = build(variant, spot).pool("l4-eval")
    assert pool.spot and pool.interruptions_per_node_day == model.SPOT_INTERRUPTIONS_PER_NODE_DAY


def test_of_two_node_pools_for_one_flavor_the_heavier_serves_it(variant: synth.Synthesis) -> None:
    def second(resources: list[dict[str, Any]]) -> None:
        heavier = copy.deepcopy(node_pool(resources, "l4-eval"))
        heavier["name"] += "-heavier"
        heavier["inputs"]["metadata"]["name"] = "l4-eval-heavier"
        heavier["inputs"]["spec"]["weight"] = 50
        heavier["inputs"]["spec"]["template"]["spec"]["requirements"][0]["values"] = ["g6.12xlarge"]
        resources.append(heavier)

    assert build(variant, second).pool("l4-eval").instance_type == "g6.12xlarge"


def test_a_node_pool_without_a_gpu_limit_is_not_modeled(variant: synth.Synthesis) -> None:
    def unlimited(resources: list[dict[str, Any]]) -> None:
        del node_pool(resources, "l4-eval")["inputs"]["spec"]["limits"]

    with pytest.raises(model.ModelError, match="NodePool l4-eval: no nvidia.com/gpu limit"):
        build(variant, unlimited)


def test_the_run_parameters_say_what_each_node_pool_gave(variant: synth.Synthesis) -> None:
    assert build(variant).parameters["karpenter_node_pools"]["l40s-reserved"] == {
        "weight": 30,
        "capacity_types": ["reserved"],
        "limit_gpus": "8",
        "consolidate_after": "15m",
    }


def test_beside_node_groups_the_cluster_autoscaler_s_timings_hold(variant: synth.Synthesis) -> None:
    autoscaler = build(variant).autoscaler
    assert autoscaler is not None and autoscaler.source.startswith("cluster-autoscaler")


def test_an_all_karpenter_stack_scales_down_after_consolidate_after_with_no_delay(synthesized: Synthesized) -> None:
    result = synthesized("dev-aws-karpenter")
    autoscaler = stack_model("dev-aws-karpenter", result.resources, result.outputs).autoscaler
    assert autoscaler is not None
    assert (autoscaler.unneeded_s, autoscaler.delay_after_add_s, autoscaler.expendable_below) == (900.0, 0.0, read_nodepools.NO_CUTOFF)


def test_simulate_runs_the_example_trace_on_the_karpenter_variant(variant_file: Path, tmp_path: Path) -> None:
    assert cli.main(["simulate", str(variant_file), "--trace", str(EXAMPLE), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "prod-aws-karpenter" / "report.md").is_file()

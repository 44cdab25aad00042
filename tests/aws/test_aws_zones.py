"""GPU pools go only where EC2 offers their instance type: offerings looked up at deploy time
(the offline synth answers from infra.mock_outputs.INSTANCE_TYPE_ZONES)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from aws_support import variant
from helpers import stack_config

from infra import cli, mock_outputs, program, synth
from infra.synth import Synthesis
from infra.yamlfile import shown

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def subnets(result: Synthesis, group: str) -> list[str]:
    return result.one(NODE_GROUP, group)["inputs"]["subnetIds"]


def test_the_mock_offers_p5_in_two_of_three_zones() -> None:
    assert mock_outputs.INSTANCE_TYPE_ZONES["p5.48xlarge"] == "bc"


def test_an_efa_pool_goes_to_the_first_zone_that_offers_its_type(prod: Synthesis) -> None:
    # The cluster's zones are us-east-1a..c; p5.48xlarge is offered in b and c, p5en in c only.
    assert subnets(prod, "ml-prod-h100-train") == ["ml-prod-network-private-us-east-1b-id"]
    assert subnets(prod, "ml-prod-h200-train") == ["ml-prod-network-private-us-east-1c-id"]


def test_a_pool_spans_only_the_zones_that_offer_its_type(tmp_path: Path) -> None:
    def p5_without_efa(platform: dict[str, Any]) -> None:
        platform["nodePools"].append({"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 2})

    result = variant(tmp_path, p5_without_efa)
    assert subnets(result, "ml-dev-h100") == ["ml-dev-network-private-us-west-2b-id", "ml-dev-network-private-us-west-2c-id"]


def test_a_pool_of_a_type_offered_everywhere_spans_every_zone(prod: Synthesis) -> None:
    assert len(subnets(prod, "ml-prod-l4-eval")) == 3


def refused(tmp_path: Path, change: Any, capsys: pytest.CaptureFixture[str]) -> list[str]:
    config = stack_config("dev-aws")
    change(config["gpu-platform:platform"])
    path = tmp_path / "Pulumi.zones.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    assert cli.main(["synth", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.splitlines()


def test_no_zone_of_the_cluster_offering_the_type_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def p5en_in_a_and_b(platform: dict[str, Any]) -> None:
        platform["aws"] = {"zones": ["us-west-2a", "us-west-2b"]}
        platform["nodePools"].append({"name": "h200", "instanceType": "p5en.48xlarge", "maxNodes": 2, "efa": True})

    source = shown(tmp_path / "Pulumi.zones.yaml")
    assert refused(tmp_path, p5en_in_a_and_b, capsys) == [
        f"{source}: platform.nodePools[2].instanceType: EC2 offers p5en.48xlarge in none of the cluster's zones"
        " (us-west-2a, us-west-2b; instance type offerings): list zones that offer it in platform.aws.zones"
    ]


def test_a_named_zone_without_the_type_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def p5_in_a(platform: dict[str, Any]) -> None:
        platform["aws"] = {"zones": ["us-west-2a", "us-west-2b", "us-west-2c"]}
        platform["nodePools"].append(
            {"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 2, "efa": True, "zones": ["us-west-2a"]}
        )

    source = shown(tmp_path / "Pulumi.zones.yaml")
    assert refused(tmp_path, p5_in_a, capsys) == [
        f"{source}: platform.nodePools[2].zones[0]: EC2 does not offer p5.48xlarge in us-west-2a (instance type"
        " offerings); zones of the cluster that do: us-west-2b, us-west-2c"
    ]


def test_under_pulumi_the_problem_ends_the_program_as_a_run_error(tmp_path: Path) -> None:
    """The language host prints a RunError's message alone, with no traceback."""
    config = stack_config("dev-aws")
    config["gpu-platform:platform"]["aws"] = {"zones": ["us-west-2a", "us-west-2b"]}
    config["gpu-platform:platform"]["nodePools"].append({"name": "h200", "instanceType": "p5en.48xlarge", "maxNodes": 1})
    flat = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    with pytest.raises(pulumi.RunError) as raised:
        synth.run(program.main, "gpu-platform", "zones", flat)
    assert str(raised.value).startswith("stacks/Pulumi.zones.yaml: platform.nodePools[2].instanceType: EC2 offers")

"""Every problem of a stack file at once: shape and rule problems together, rules judged only on
what parsed, and the config keys around the spec in the same list."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import REPO, platform_of, stack_config

from components.spec import SpecError, parse_spec
from infra import stackfile

SOURCE = "stacks/Pulumi.test.yaml"


def lines(raw: Any, region: str | None = "us-east-1") -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, SOURCE, region)
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


def paths(raw: Any, region: str | None = "us-east-1") -> list[str]:
    return [line.split(": ", 1)[0] for line in lines(raw, region)]


@pytest.fixture
def prod() -> dict[str, Any]:
    return platform_of("prod-aws")


def test_a_type_error_does_not_hide_a_rule_problem_elsewhere(prod: dict[str, Any]) -> None:
    prod["nodePools"][0]["maxNodes"] = "4"
    prod["nodePools"][1]["instanceType"] = "p5.48xlarg"
    assert lines(prod) == [
        "platform.nodePools[0].maxNodes: expected a whole number, got '4'",
        "platform.nodePools[1].instanceType: 'p5.48xlarg' is not an NVIDIA GPU type in the aws catalog"
        " (did you mean 'p5.48xlarge'?)",
    ]


def test_ten_typos_in_ten_places_are_ten_lines(prod: dict[str, Any]) -> None:
    for i in range(3):
        prod["nodePools"][i]["maxNode"] = 2
        prod["nodePools"][i]["instanceTyp"] = "x"
    prod["clustr"] = {}
    prod["scheduling"]["teams"][0]["quota"] = {}
    prod["scheduling"]["teams"][1]["nme"] = "x"
    prod["monitoring"] = {"dcgn": True}
    assert len(lines(prod)) == 10


def test_a_rule_is_skipped_where_its_input_failed_to_parse(prod: dict[str, Any]) -> None:
    # minNodes is not a number: judging maxNodes >= minNodes on the default would be a guess.
    prod["nodePools"][2]["minNodes"] = "one"
    prod["nodePools"][2]["maxNodes"] = 0
    assert paths(prod) == ["platform.nodePools[2].minNodes"]


def test_a_rule_that_reads_another_section_is_skipped_when_that_section_failed(prod: dict[str, Any]) -> None:
    # The quotas must fit the pools, but pool 0's size is unknown: no quota verdict.
    prod["nodePools"][0]["maxNodes"] = "8"
    prod["scheduling"]["teams"][0]["quotas"]["h100-train"] = 1000
    assert paths(prod) == ["platform.nodePools[0].maxNodes"]


def test_a_misspelt_key_does_not_let_its_default_be_judged(prod: dict[str, Any]) -> None:
    prod["nodePools"][2]["minNodes"] = 2
    prod["nodePools"][2]["maxNode"] = 3
    # maxNodes falls back to 1 < minNodes 2: that is the typo's doing, not a second problem.
    assert paths(prod) == ["platform.nodePools[2].maxNode"]


def test_rules_name_pools_by_their_place_in_the_file_after_a_broken_pool(prod: dict[str, Any]) -> None:
    prod["nodePools"][0]["name"] = 7
    prod["nodePools"][2]["instanceType"] = "g6.2xlarg"
    assert paths(prod) == ["platform.nodePools[0].name", "platform.nodePools[2].instanceType"]


def test_a_top_level_setting_that_failed_skips_only_the_rules_that_read_it(prod: dict[str, Any]) -> None:
    prod["devicePlugin"] = "nvdia"
    prod["scheduling"]["teams"][0]["name"] = "Research"
    assert paths(prod) == ["platform.scheduling.teams[0].name", "platform.devicePlugin"]


def test_an_unrepairable_spec_reports_its_shape_problems_alone(prod: dict[str, Any]) -> None:
    prod["cloud"] = "azure"
    prod["nodePools"][0]["instanceType"] = "nosuch"
    assert paths(prod) == ["platform.cloud"]


def _stack(tmp_path: Path, config: dict[str, Any]) -> stackfile.StackFile:
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    return stackfile.read(str(path), REPO)


def test_config_keys_and_spec_problems_come_in_one_list(tmp_path: Path) -> None:
    config = stack_config("prod-aws")
    del config["aws:region"]
    config["gpu-platform:platfrom"] = {}
    config["gpu-platform:platform"]["nodePools"][0]["maxNodes"] = "8"
    config["gpu-platform:platform"]["nodePools"][1]["instanceType"] = "p5.48xlarg"
    with pytest.raises(SpecError) as caught:
        _stack(tmp_path, config).spec()
    assert [p.path for p in caught.value.problems] == [
        "gpu-platform:platfrom",
        "aws:region",
        "platform.nodePools[0].maxNodes",
        "platform.nodePools[1].instanceType",
    ]


def test_an_unknown_region_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    config = stack_config("prod-aws")
    config["aws:region"] = "us-east1"
    with pytest.raises(SpecError) as caught:
        _stack(tmp_path, config).spec()
    (problem,) = caught.value.problems
    assert problem.path == "aws:region"
    assert problem.message.startswith("'us-east1' is not a region of aws (did you mean 'us-east-1'?); regions: ")


def test_a_region_no_cloud_has_gets_no_zones_of_its_own(tmp_path: Path) -> None:
    config = stack_config("dev-gcp")
    config["gcp:region"] = "mars-north1"
    with pytest.raises(SpecError) as caught:
        _stack(tmp_path, config).spec()
    assert [p.path for p in caught.value.problems] == ["gcp:region"]


def test_every_example_stack_names_a_known_region() -> None:
    for name in stackfile.all_stacks(REPO):
        stackfile.read(name, REPO).spec()


def test_the_problems_keep_stack_file_order_and_all_come_back(prod: dict[str, Any]) -> None:
    broken = copy.deepcopy(prod)
    broken["monitoring"] = {"dcgm": "yes please"}
    broken["nodePools"][1]["capacity"] = "preemptible"
    broken["nodePools"][2]["instanceType"] = "g6.2xlarg"
    assert paths(broken) == [
        "platform.nodePools[1].capacity",
        "platform.nodePools[2].instanceType",
        "platform.monitoring.dcgm",
    ]

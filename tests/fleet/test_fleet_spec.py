"""The manager stack file: its keys, workers and order, each error naming its field."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helpers import REPO, stack_config

from components.spec import SpecError
from components.spec.fleet import parse_fleet_spec
from infra import offline, stackfile

SOURCE = "stacks/Pulumi.fleet.yaml"


def fleet_platform() -> dict[str, Any]:
    return copy.deepcopy(stack_config("fleet")["gpu-platform:platform"])


def paths(platform: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_fleet_spec(platform, SOURCE)
    return [p.path for p in caught.value.problems]


def test_the_example_fleet_stack_is_valid() -> None:
    spec = parse_fleet_spec(fleet_platform(), SOURCE)
    assert spec.fleet.workers == ["organization/gpu-platform/prod-aws", "organization/gpu-platform/prod-gcp"]


def test_fleet_stacks_are_listed_apart_from_cluster_stacks() -> None:
    assert stackfile.fleet_stacks(REPO) == ["fleet"]
    assert "fleet" not in stackfile.all_stacks(REPO)


def test_an_unknown_key_names_the_keys_allowed_there() -> None:
    platform = fleet_platform()
    platform["fleet"]["ordr"] = []
    with pytest.raises(SpecError) as caught:
        parse_fleet_spec(platform, SOURCE)
    [problem] = caught.value.problems
    assert problem.path == "platform.fleet.ordr"
    assert "allowed keys: managerCidrs, order, quotas, workers" in problem.message


def test_an_order_must_list_every_worker_once() -> None:
    platform = fleet_platform()
    platform["fleet"]["order"] = ["organization/gpu-platform/prod-aws"]
    assert paths(platform) == ["platform.fleet.order"]


def test_a_worker_must_be_a_fully_qualified_stack_name() -> None:
    platform = fleet_platform()
    platform["fleet"]["workers"][1] = "prod-gcp"
    assert paths(platform) == ["platform.fleet.workers[1]"]


def test_the_manager_needs_a_kubeconfig_context() -> None:
    platform = fleet_platform()
    del platform["cluster"]["context"]
    assert paths(platform) == ["platform.cluster.context"]


def test_a_worker_without_fleet_worker_is_refused_naming_the_manager_s_field(tmp_path: Any) -> None:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    (stacks / "Pulumi.fleet.yaml").write_text((REPO / "stacks" / "Pulumi.fleet.yaml").read_text())
    (stacks / "Pulumi.prod-aws.yaml").write_text((REPO / "stacks" / "Pulumi.prod-aws.yaml").read_text().replace("worker: true", "worker: false"))
    (stacks / "Pulumi.prod-gcp.yaml").write_text((REPO / "stacks" / "Pulumi.prod-gcp.yaml").read_text())
    with pytest.raises(SpecError) as caught:
        offline.synthesize_fleet(str(stacks / "Pulumi.fleet.yaml"), tmp_path)
    assert [p.path for p in caught.value.problems] == ["platform.fleet.workers[0]"]
    assert "does not set platform.fleet.worker: true" in caught.value.problems[0].message


def test_the_manager_s_egress_ranges_are_required() -> None:
    platform = fleet_platform()
    del platform["fleet"]["managerCidrs"]
    assert paths(platform) == ["platform.fleet.managerCidrs"]


def test_a_manager_range_that_is_not_a_cidr_names_its_item() -> None:
    platform = fleet_platform()
    platform["fleet"]["managerCidrs"] = ["198.51.100.0/24", "fleet-nat"]
    assert paths(platform) == ["platform.fleet.managerCidrs[1]"]

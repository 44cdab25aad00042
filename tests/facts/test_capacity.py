"""How capacity can be had: the table of ways per instance family, and the spec's refusals."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
from helpers import REPO, platform_of

from components.facts import capacity, catalog
from components.spec import SpecError, parse_spec
from infra import cli, stackfile
from infra.synth import Synthesis
from infra.tools import summary
from infra.yamlfile import shown

SOURCE = "stacks/Pulumi.test.yaml"
REGIONS = {"aws": "us-east-1", "gcp": "us-central1"}


def lines(raw: dict[str, Any]) -> list[str]:
    """The lines `gpu-platform` prints for `raw` (empty when it is valid)."""
    try:
        parse_spec(raw, SOURCE, REGIONS.get(raw["cloud"]))
    except SpecError as exc:
        return exc.render().splitlines()
    return []


def gcp_pool(**fields: Any) -> dict[str, Any]:
    raw = platform_of("dev-gcp")
    raw["nodePools"] = [{"name": "train", "minNodes": 0, "maxNodes": 2, **fields}]
    raw["scheduling"] = {}
    return raw


def aws_pool(**fields: Any) -> dict[str, Any]:
    raw = platform_of("dev-aws")
    raw["nodePools"] = [{"name": "train", "minNodes": 0, "maxNodes": 2, **fields}]
    raw["scheduling"] = {}
    return raw


@pytest.mark.parametrize("name", sorted(catalog.INSTANCE_TYPES))
def test_every_catalog_type_has_ways_to_get_it(name: str) -> None:
    shape = catalog.INSTANCE_TYPES[name]
    assert capacity.ways(name, shape.cloud)


def test_a3_ultra_and_a4_are_not_sold_on_demand() -> None:
    for name in ("a3-ultragpu-8g", "a4-highgpu-8g"):
        assert capacity.ways(name, "gcp") == ("spot", "reservation", "flex-start", "queued")


def test_the_longest_prefix_decides_between_a3_high_sizes() -> None:
    assert "on-demand" in capacity.ways("a3-highgpu-8g", "gcp")
    assert "on-demand" not in capacity.ways("a3-highgpu-4g", "gcp")


def test_capacity_blocks_only_for_the_types_ec2_reserves_that_way() -> None:
    assert "capacity-block" in capacity.ways("p5.48xlarge", "aws")
    assert "capacity-block" not in capacity.ways("g6.xlarge", "aws")


def test_a_way_the_machine_is_not_sold_by_is_refused_with_the_ways_that_work() -> None:
    assert lines(gcp_pool(instanceType="a3-ultragpu-8g")) == [
        f"{SOURCE}: platform.nodePools[0].provisioning: pool 'train': a3-ultragpu-8g is not sold as on-demand"
        " (the default); ways that work: spot, reservation, flex-start, queued (set provisioning)"
    ]


def test_the_refusal_names_the_key_that_asked() -> None:
    assert lines(gcp_pool(instanceType="a3-ultragpu-8g", capacity="on-demand")) == [
        f"{SOURCE}: platform.nodePools[0].capacity: pool 'train': a3-ultragpu-8g is not sold as on-demand;"
        " ways that work: spot, reservation, flex-start, queued (set provisioning)"
    ]


def test_a_way_of_the_other_cloud_is_refused() -> None:
    assert lines(aws_pool(instanceType="g6.xlarge", provisioning="flex-start")) == [
        f"{SOURCE}: platform.nodePools[0].provisioning: pool 'train': g6.xlarge is not sold as flex-start;"
        " ways that work: on-demand, spot, reservation (set provisioning)"
    ]


def test_capacity_and_provisioning_together_are_refused() -> None:
    assert lines(gcp_pool(instanceType="g2-standard-8", capacity="spot", provisioning="spot")) == [
        f"{SOURCE}: platform.nodePools[0].capacity: the older spelling of provisioning (on-demand or spot):"
        " keep only provisioning"
    ]


def test_capacity_spot_still_means_spot() -> None:
    raw = gcp_pool(instanceType="g2-standard-8", capacity="spot")
    assert parse_spec(raw, SOURCE, "us-central1").node_pools[0].way == "spot"


def test_a_named_reservation_alone_means_consuming_it() -> None:
    raw = gcp_pool(instanceType="a3-ultragpu-8g", reservation="h200s")
    assert parse_spec(raw, SOURCE, "us-central1").node_pools[0].way == "reservation"


def test_a_reservation_way_needs_the_reservation() -> None:
    assert lines(gcp_pool(instanceType="a3-ultragpu-8g", provisioning="reservation")) == [
        f"{SOURCE}: platform.nodePools[0].reservation: required with provisioning: reservation:"
        " the reservation the nodes consume"
    ]


def test_flex_start_holds_no_standing_nodes() -> None:
    assert lines(gcp_pool(instanceType="a3-ultragpu-8g", provisioning="flex-start", minNodes=1)) == [
        f"{SOURCE}: platform.nodePools[0].minNodes: provisioning flex-start gets nodes only on request (GKE"
        " flex-start (Dynamic Workload Scheduler): nodes when capacity frees up, for at most 7 days): no node can be"
        " held standing, set minNodes: 0, got 1"
    ]


def test_existing_nodes_take_no_provisioning() -> None:
    raw = platform_of("onprem")
    raw["nodePools"][0]["provisioning"] = "spot"
    assert f"{SOURCE}: platform.nodePools[0].provisioning: existing nodes are already there: leave it unset" in lines(raw)


def test_the_cli_refuses_a_way_not_sold_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (REPO / "stacks" / "Pulumi.prod-gcp.yaml").read_text()
    stack_file = tmp_path / "Pulumi.bad.yaml"
    start = text.index("      - name: h200-train")
    end = text.index("      - name: l4-eval")
    pool = (
        "      - name: h200-train\n        instanceType: a3-ultragpu-8g\n        maxNodes: 4\n"
        "        zones: [us-central1-b]\n        multiGpuTraining: true\n"
    )
    stack_file.write_text(text[:start] + pool + text[end:])
    assert cli.main(["synth", str(stack_file), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"{shown(stack_file)}: platform.nodePools[1].provisioning: pool 'h200-train': a3-ultragpu-8g is not sold as"
        " on-demand (the default); ways that work: spot, reservation, flex-start, queued (set provisioning)"
    ]


def test_the_summary_counts_a_queued_pool_on_request_not_in_the_total() -> None:
    spec = stackfile.read("prod-gcp", REPO).spec()
    table = {row[0]: row for row in summary.rows(spec)}
    assert table["h200-train"][4] == "32 on request"
    assert table["total"][4] == "67"  # h100-train 64 + l4-eval 3
    assert table["on request"][4] == "32"


def test_a_stack_without_on_request_pools_has_no_on_request_row(synthesized: Callable[[str], Synthesis]) -> None:
    spec = stackfile.read("prod-aws", REPO).spec()
    assert [row[0] for row in summary.rows(spec)][-1] == "total"
    assert "on request" not in summary.markdown(spec, "prod-aws", synthesized("prod-aws"))

"""Reserved capacity on AWS: On-Demand Capacity Reservations and Capacity Blocks for ML, as the
spec takes them and as the launch template, node group and autoscaler tags declare them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_support import synthesize_variant, variant
from helpers import REPO, platform_of

from components.aws import plan
from components.pools import derive_pool
from components.spec import NodePoolSpec, SpecError, parse_spec
from infra.synth import Synthesis
from infra.tools import check

SOURCE = "stacks/Pulumi.test.yaml"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
ASG_TAG = "aws:autoscaling/tag:Tag"
BLOCK = "cr-0123456789abcdef0"
GROUP_ARN = "arn:aws:resource-groups:us-west-2:111122223333:group/h100-reservations"


def h100_pool(**fields: Any) -> dict[str, Any]:
    return {"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 2, "efa": True, **fields}


def with_pool(pool: dict[str, Any]) -> Any:
    def change(platform: dict[str, Any]) -> None:
        platform["aws"] = {"zones": ["us-west-2a", "us-west-2b"]}
        platform["nodePools"].append(pool)

    return change


def lines(pool: dict[str, Any]) -> list[str]:
    raw = platform_of("dev-aws")
    with_pool(pool)(raw)
    try:
        parse_spec(raw, SOURCE, "us-west-2")
    except SpecError as exc:
        return exc.render().splitlines()
    return []


@pytest.fixture(scope="module")
def block(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    pool = h100_pool(provisioning="capacity-block", reservation=BLOCK, zones=["us-west-2b"])
    return variant(tmp_path_factory.mktemp("block"), with_pool(pool))


@pytest.fixture(scope="module")
def odcr(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    pool = h100_pool(provisioning="reservation", reservation=GROUP_ARN)
    return variant(tmp_path_factory.mktemp("odcr"), with_pool(pool))


def template(result: Synthesis) -> dict[str, Any]:
    return result.one(LAUNCH_TEMPLATE, "ml-dev-h100")["inputs"]


def group(result: Synthesis) -> dict[str, Any]:
    return result.one(NODE_GROUP, "ml-dev-h100")["inputs"]


def test_a_capacity_block_node_group_has_capacity_type_capacity_block(block: Synthesis) -> None:
    assert group(block)["capacityType"] == "CAPACITY_BLOCK"


def test_a_capacity_block_template_targets_the_block_with_market_type_capacity_block(block: Synthesis) -> None:
    inputs = template(block)
    assert inputs["capacityReservationSpecification"] == {"capacityReservationTarget": {"capacityReservationId": BLOCK}}
    assert inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}


def test_a_capacity_block_names_its_instance_type_in_the_template_only(block: Synthesis) -> None:
    assert template(block)["instanceType"] == "p5.48xlarge"
    assert "instanceTypes" not in group(block)


def test_a_capacity_block_pool_runs_in_the_blocks_zone(block: Synthesis) -> None:
    assert group(block)["subnetIds"] == ["ml-dev-network-private-us-west-2b-id"]


def test_reserved_efa_pools_get_no_placement_group_of_their_own(block: Synthesis, odcr: Synthesis) -> None:
    for result in (block, odcr):
        assert not [g for g in result.by_type(PLACEMENT_GROUP) if g["name"] == "ml-dev-h100"]
        assert "placement" not in template(result)


def test_an_odcr_pool_is_on_demand_and_launches_only_into_the_reservation(odcr: Synthesis) -> None:
    assert group(odcr)["capacityType"] == "ON_DEMAND"
    assert group(odcr)["instanceTypes"] == ["p5.48xlarge"]
    assert template(odcr)["capacityReservationSpecification"] == {
        "capacityReservationPreference": "capacity-reservations-only",
        "capacityReservationTarget": {"capacityReservationResourceGroupArn": GROUP_ARN},
    }
    assert "instanceMarketOptions" not in template(odcr)


def test_the_scale_from_zero_template_carries_the_capacity_type_eks_labels_nodes_with(block: Synthesis) -> None:
    tags = {
        r["inputs"]["tag"]["key"]: r["inputs"]["tag"]["value"]
        for r in block.by_type(ASG_TAG)
        if r["parent"] == "gpu-platform:aws:GpuNodeGroup::ml-dev-h100"
    }
    assert tags["k8s.io/cluster-autoscaler/node-template/label/eks.amazonaws.com/capacityType"] == "CAPACITY_BLOCK"
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "8"


def test_the_autoscaler_prefers_reserved_pools() -> None:
    pool = derive_pool(NodePoolSpec.model_validate(h100_pool(provisioning="reservation", reservation=BLOCK)))
    assert plan.pool_priority(pool) > plan.SPOT_PRIORITY > plan.ON_DEMAND_PRIORITY


def test_a_capacity_block_needs_a_reservation_id() -> None:
    assert lines(h100_pool(provisioning="capacity-block", reservation=GROUP_ARN, zones=["us-west-2a"])) == [
        f"{SOURCE}: platform.nodePools[2].reservation: expected the Capacity Block's reservation id"
        f" (cr-0123456789abcdef0), got '{GROUP_ARN}'"
    ]


def test_a_reservation_must_be_an_id_or_a_resource_group() -> None:
    assert lines(h100_pool(provisioning="reservation", reservation="my-h100s")) == [
        f"{SOURCE}: platform.nodePools[2].reservation: expected an On-Demand Capacity Reservation id"
        " (cr-0123456789abcdef0) or the ARN of a resource group of reservations"
        " (arn:aws:resource-groups:<region>:<account>:group/<name>), got 'my-h100s'"
    ]


def test_a_reservation_by_id_names_its_one_zone() -> None:
    assert lines(h100_pool(provisioning="reservation", reservation=BLOCK)) == [
        f"{SOURCE}: platform.nodePools[2].zones: An On-Demand Capacity Reservation lives in one availability zone"
        " and takes instances only from there: set zones to that one zone"
    ]


def test_a_capacity_block_holds_no_standing_nodes() -> None:
    assert lines(h100_pool(provisioning="capacity-block", reservation=BLOCK, zones=["us-west-2a"], minNodes=1)) == [
        f"{SOURCE}: platform.nodePools[2].minNodes: provisioning capacity-block gets nodes only on request (an EC2"
        " Capacity Block for ML: reserved instances for a fixed window): no node can be held standing, set minNodes: 0,"
        " got 1"
    ]


def test_spot_with_a_reservation_is_refused() -> None:
    assert lines(h100_pool(capacity="spot", reservation=BLOCK, zones=["us-west-2a"])) == [
        f"{SOURCE}: platform.nodePools[2].reservation: spot capacity cannot consume a specific reservation"
        " (GKE refuses Spot VMs that target one, cluster-toolkit gke-node-pool; EC2 never runs Spot Instances in a"
        " Capacity Reservation): drop the reservation or set provisioning: reservation"
    ]


def test_capacity_blocks_only_for_the_types_sold_that_way() -> None:
    assert lines({"name": "l4", "instanceType": "g6.xlarge", "provisioning": "capacity-block", "reservation": BLOCK,
                  "zones": ["us-west-2a"]}) == [
        f"{SOURCE}: platform.nodePools[2].provisioning: pool 'l4': g6.xlarge is not sold as capacity-block;"
        " ways that work: on-demand, spot, reservation (set provisioning)"
    ]


def test_a_capacity_block_in_its_zone_is_valid() -> None:
    assert lines(h100_pool(provisioning="capacity-block", reservation=BLOCK, zones=["us-west-2b"])) == []


def test_a_capacity_block_stack_checks_clean(tmp_path: Path) -> None:
    """The policy rules and the fit proof find the block's instance type in its launch template."""
    pool = h100_pool(provisioning="capacity-block", reservation=BLOCK, zones=["us-west-2b"])
    spec, result = synthesize_variant(tmp_path, with_pool(pool))
    report = check.check_synthesis(spec, result)
    assert report.lines() == []


def test_the_documented_reserved_pools_are_valid() -> None:
    text = (REPO / "docs" / "aws.md").read_text()
    section = text[text.index("## Reserved capacity") :]
    snippet = section[section.index("```yaml") + len("```yaml") : section.index("```\n", section.index("```yaml"))]
    pools = yaml.safe_load(snippet)["nodePools"]
    raw = platform_of("prod-aws")
    raw["nodePools"] = pools
    raw["aws"] = {"zones": ["us-east-1a", "us-east-1b", "us-east-1c"], "publicEndpoint": False}
    raw["scheduling"] = {}
    assert [p.way for p in parse_spec(raw, SOURCE, "us-east-1").node_pools] == ["reservation", "capacity-block"]

"""GKE provisioning modes: flex-start and queued node pools, and the Kueue admission check that
makes a job on a queued pool wait until GKE grants all its nodes at once."""

from __future__ import annotations

from typing import Any

import pytest
from gcp_support import node_pool, platform, problems_of, spec_of, synthesize

from components.gcp import plan
from components.spec import NodePoolSpec
from infra.synth import Synthesis

POOL0 = "platform.nodePools[0]"


def with_pool(**pool: Any) -> dict[str, Any]:
    raw = platform()
    raw["nodePools"] = [{"name": "h200", "instanceType": "a3-ultragpu-8g", "maxNodes": 4, **pool}]
    raw["scheduling"] = {"teams": [{"name": "research", "quotas": {"h200": 16}}, {"name": "applied", "quotas": {"h200": 8}}]}
    return raw


@pytest.fixture(scope="module")
def queued() -> Synthesis:
    return synthesize(with_pool(provisioning="queued"))


@pytest.fixture(scope="module")
def flex() -> Synthesis:
    return synthesize(with_pool(provisioning="flex-start"))


def test_a_flex_start_pool_sets_flex_start_and_consumes_no_reservation(flex: Synthesis) -> None:
    config = node_pool(flex, "h200")["inputs"]["nodeConfig"]
    assert config["flexStart"] is True
    assert config["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert "spot" not in config or config["spot"] is False


def test_flex_start_and_queued_pools_have_no_auto_repair_and_take_capacity_anywhere(flex: Synthesis, queued: Synthesis) -> None:
    for result in (flex, queued):
        inputs = node_pool(result, "h200")["inputs"]
        assert inputs["management"]["autoRepair"] is False
        assert inputs["autoscaling"]["locationPolicy"] == "ANY"
        assert inputs["autoscaling"]["totalMinNodeCount"] == 0


def test_a_flex_start_pool_is_not_queued(flex: Synthesis) -> None:
    assert "queuedProvisioning" not in node_pool(flex, "h200")["inputs"]


def test_a_queued_pool_enables_queued_provisioning_on_flex_start(queued: Synthesis) -> None:
    inputs = node_pool(queued, "h200")["inputs"]
    assert inputs["queuedProvisioning"] == {"enabled": True}
    assert inputs["nodeConfig"]["flexStart"] is True


def test_a_reservation_pool_consumes_its_specific_reservation() -> None:
    p = plan.reservation_affinity(spec_pool(provisioning="reservation", reservation="h200-block"))
    assert p == ("SPECIFIC_RESERVATION", "h200-block")


def spec_pool(**pool: Any) -> NodePoolSpec:
    return spec_of(with_pool(**pool)).node_pools[0]


def messages(raw: dict[str, Any]) -> list[str]:
    return [f"{p.path}: {p.message}" for p in problems_of(raw)]


def test_spot_with_a_specific_reservation_is_refused() -> None:
    assert messages(with_pool(capacity="spot", reservation="h200-block")) == [
        f"{POOL0}.reservation: spot capacity cannot consume a specific reservation (GKE refuses Spot VMs that target"
        " one, cluster-toolkit gke-node-pool; EC2 never runs Spot Instances in a Capacity Reservation): drop the"
        " reservation or set provisioning: reservation"
    ]


def test_flex_start_consumes_no_reservation() -> None:
    assert messages(with_pool(provisioning="flex-start", reservation="h200-block")) == [
        f"{POOL0}.reservation: only with provisioning: reservation; provisioning flex-start consumes no reservation"
    ]


def test_queued_pools_take_no_compact_placement() -> None:
    assert messages(with_pool(provisioning="queued", compactPlacement=True, zones=["us-central1-a"])) == [
        f"{POOL0}.compactPlacement: not with provisioning: queued: queued provisioning places the nodes itself and GKE"
        " takes no COMPACT placement policy on such a pool (cluster-toolkit gke-node-pool)"
    ]


def test_a_reservation_name_must_be_a_compute_engine_name() -> None:
    assert messages(with_pool(provisioning="reservation", reservation="H200 block")) == [
        f"{POOL0}.reservation: expected a Compute Engine reservation name, or projects/<project>/reservations/<name>,"
        " got 'H200 block'"
    ]


def test_a_shared_reservation_of_another_project_is_accepted() -> None:
    assert messages(with_pool(provisioning="reservation", reservation="projects/ml-shared/reservations/h200")) == []


def test_capacity_spot_keeps_making_spot_pools() -> None:
    assert [p.way for p in spec_of(platform()).node_pools] == ["spot", "spot"]


def test_a_spot_pool_stays_a_spot_node_pool() -> None:
    assert plan.reservation_affinity(spec_pool(capacity="spot")) is None


def test_flex_start_needs_gke_1_32() -> None:
    raw = with_pool(provisioning="flex-start")
    raw["cluster"]["kubernetesVersion"] = "1.31"
    assert messages(raw) == [f"{POOL0}.provisioning: flex-start needs GKE 1.32.2 or later; cluster.kubernetesVersion is 1.31"]

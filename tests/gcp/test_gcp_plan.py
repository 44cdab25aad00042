"""The GKE plan: what each spec pool becomes on GKE, decided without Pulumi."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from gcp_support import platform, spec_of

from components.gcp import plan
from components.pools import derive_pool
from components.spec import PlatformSpec


def pool_plan(raw: dict[str, Any], index: int = 0) -> plan.GpuPoolPlan:
    spec = spec_of(raw)
    assert spec.gcp is not None
    spec_pool = spec.node_pools[index]
    return plan.gpu_pool_plan(spec, spec.gcp, spec_pool, derive_pool(spec_pool))


def with_pool(**pool: Any) -> dict[str, Any]:
    """dev-gcp with one pool, `gpu`, on-demand and unshared unless `pool` says otherwise (and no
    teams, whose quotas would name the stack's own pools)."""
    raw = platform()
    raw["nodePools"] = [{"name": "gpu", "minNodes": 0, "maxNodes": 2, **pool}]
    raw.pop("scheduling", None)
    return raw


def gcp_spec(raw: dict[str, Any]) -> tuple[PlatformSpec, Any]:
    spec = spec_of(raw)
    assert spec.gcp is not None
    return spec, spec.gcp


@pytest.mark.parametrize(
    ("machine", "gpus", "accelerator", "count"),
    [
        ("g2-standard-8", None, "nvidia-l4", 1),
        ("g2-standard-48", None, "nvidia-l4", 4),
        ("a2-highgpu-8g", None, "nvidia-tesla-a100", 8),
        ("a2-ultragpu-1g", None, "nvidia-a100-80gb", 1),
        ("a3-highgpu-8g", None, "nvidia-h100-80gb", 8),
        ("a3-megagpu-8g", None, "nvidia-h100-mega-80gb", 8),
        ("a3-ultragpu-8g", None, "nvidia-h200-141gb", 8),
        ("n1-standard-8", None, "nvidia-tesla-t4", 1),
        ("n1-standard-16", 4, "nvidia-tesla-t4", 4),
    ],
)
def test_accelerator_type_and_count_come_from_the_machine_type(
    machine: str, gpus: int | None, accelerator: str, count: int
) -> None:
    # Spot: every machine here is sold that way (A3 Mega and Ultra are not sold on-demand).
    pool = {"instanceType": machine, "capacity": "spot"} | ({"gpusPerNode": gpus} if gpus else {})
    p = pool_plan(with_pool(**pool))
    assert (p.machine_type, p.accelerator, p.accelerator_count) == (machine, accelerator, count)


def test_gke_installs_its_default_driver_unless_told_otherwise() -> None:
    assert pool_plan(with_pool(instanceType="g2-standard-8")).driver_version == "DEFAULT"


def test_the_latest_driver_is_a_pool_choice() -> None:
    assert pool_plan(with_pool(instanceType="g2-standard-8", driverVersion="LATEST")).driver_version == "LATEST"


@pytest.mark.parametrize(("mode", "strategy"), [("time-slicing", "TIME_SHARING"), ("mps", "MPS")])
def test_sharing_uses_gkes_native_strategy_with_replicas_as_clients(mode: str, strategy: str) -> None:
    p = pool_plan(with_pool(instanceType="g2-standard-8", sharing={"mode": mode, "replicas": 6}))
    assert p.sharing == plan.Sharing(strategy, 6)


def test_an_unshared_pool_has_no_sharing_config() -> None:
    assert pool_plan(with_pool(instanceType="g2-standard-8")).sharing is None


def test_mig_partitions_each_gpu_and_shares_nothing() -> None:
    p = pool_plan(with_pool(instanceType="a2-highgpu-1g", sharing={"mode": "mig", "profile": "2g.10gb"}))
    assert (p.partition_size, p.sharing) == ("2g.10gb", None)


def test_only_mig_pools_are_partitioned() -> None:
    p = pool_plan(with_pool(instanceType="g2-standard-8", sharing={"mode": "time-slicing", "replicas": 2}))
    assert p.partition_size is None


def test_device_plugin_none_opts_the_pool_out_of_gkes_plugin_and_sharing() -> None:
    raw = with_pool(instanceType="g2-standard-8", sharing={"mode": "time-slicing", "replicas": 4})
    raw["devicePlugin"] = "none"
    p = pool_plan(raw)
    assert (p.labels[plan.NO_GKE_DEVICE_PLUGIN_LABEL], p.sharing) == ("true", None)


def test_gkes_plugin_runs_where_it_is_the_device_plugin() -> None:
    assert plan.NO_GKE_DEVICE_PLUGIN_LABEL not in pool_plan(with_pool(instanceType="g2-standard-8")).labels


def test_spot_pools_take_capacity_in_any_zone() -> None:
    p = pool_plan(with_pool(instanceType="g2-standard-8", capacity="spot"))
    assert (p.spot, p.location_policy) == (True, "ANY")


def test_on_demand_pools_balance_across_zones() -> None:
    p = pool_plan(with_pool(instanceType="g2-standard-8", capacity="on-demand"))
    assert (p.spot, p.location_policy) == (False, "BALANCED")


def test_autoscaling_limits_are_pool_totals() -> None:
    p = pool_plan(with_pool(instanceType="g2-standard-8", minNodes=1, maxNodes=5))
    assert (p.total_min_nodes, p.total_max_nodes) == (1, 5)


@pytest.mark.parametrize(("min_nodes", "zones", "per_zone"), [(0, 3, 0), (1, 3, 1), (3, 3, 1), (4, 3, 2), (2, 1, 2)])
def test_a_new_pool_starts_with_at_least_its_minimum(min_nodes: int, zones: int, per_zone: int) -> None:
    raw = with_pool(instanceType="g2-standard-8", minNodes=min_nodes, maxNodes=8)
    raw["nodePools"][0]["zones"] = [f"us-central1-{z}" for z in "abc"[:zones]]
    assert pool_plan(raw).initial_node_count == per_zone


def test_a_pool_runs_in_the_clusters_zones_by_default() -> None:
    raw = with_pool(instanceType="g2-standard-8")
    raw["gcp"]["zones"] = ["us-central1-a", "us-central1-c"]
    assert pool_plan(raw).zones == ["us-central1-a", "us-central1-c"]


def test_a_pool_may_narrow_its_zones() -> None:
    raw = with_pool(instanceType="g2-standard-8", zones=["us-central1-c"])
    raw["gcp"]["zones"] = ["us-central1-a", "us-central1-c"]
    assert pool_plan(raw).zones == ["us-central1-c"]


def test_nodes_carry_the_pool_labels_the_kubernetes_layer_selects_on() -> None:
    labels = pool_plan(with_pool(instanceType="a3-highgpu-8g")).labels
    assert labels == {
        "gpu-platform.io/pool": "gpu",
        "gpu-platform.io/gpu-model": "H100-80GB",
        "nvidia.com/device-plugin.config": "none",
    }


def test_gpu_nodes_are_tainted_in_gke_spelling() -> None:
    p = pool_plan(with_pool(instanceType="g2-standard-8"))
    assert (p.taint_key, p.taint_value, p.taint_effect) == ("nvidia.com/gpu", "present", "NO_SCHEDULE")


def test_reservation_and_compact_placement_pass_through() -> None:
    raw = with_pool(instanceType="a3-highgpu-8g", reservation="h100-block", compactPlacement=True, zones=["us-central1-a"])
    p = pool_plan(raw)
    assert (p.reservation_affinity, p.compact_placement) == (("SPECIFIC_RESERVATION", "h100-block"), True)


def test_a_regional_cluster_lives_in_the_region_with_its_zones_as_node_locations() -> None:
    _, gcp = gcp_spec(platform("prod-gcp"))
    assert plan.cluster_location(gcp, "us-central1") == "us-central1"
    assert plan.cluster_node_locations(gcp) == ["us-central1-a", "us-central1-b", "us-central1-c"]


def test_a_zonal_cluster_lives_in_its_first_zone_and_lists_only_the_others() -> None:
    raw = platform()
    raw["gcp"]["zones"] = ["us-central1-a", "us-central1-b"]
    _, gcp = gcp_spec(raw)
    assert plan.cluster_location(gcp, "us-central1") == "us-central1-a"
    assert plan.cluster_node_locations(gcp) == ["us-central1-b"]


def test_the_trainer_identity_serves_every_team_namespace() -> None:
    raw = platform()
    raw["scheduling"] = {"teams": [{"name": "vision"}, {"name": "nlp"}]}
    spec, _ = gcp_spec(raw)
    assert plan.trainer_namespaces(spec) == ["nlp", "vision"]


def test_without_teams_the_trainer_runs_in_default() -> None:
    raw = platform()
    raw.pop("scheduling", None)
    spec, _ = gcp_spec(raw)
    assert plan.trainer_namespaces(spec) == ["default"]


def test_workload_identity_member_names_the_trainer_service_account() -> None:
    assert plan.workload_identity_member("my-proj", "nlp") == "serviceAccount:my-proj.svc.id.goog[nlp/trainer]"


def test_auto_provisioning_limits_list_cpu_memory_and_each_accelerator() -> None:
    raw = platform()
    raw["gcp"]["nodeAutoProvisioning"] = {
        "enabled": True,
        "maxCpu": 96,
        "maxMemoryGib": 512,
        "gpuLimits": {"nvidia-tesla-a100": 2, "nvidia-l4": 8},
    }
    _, gcp = gcp_spec(raw)
    assert plan.nap_resource_limits(gcp.node_auto_provisioning) == [
        ("cpu", 96),
        ("memory", 512),
        ("nvidia-l4", 8),
        ("nvidia-tesla-a100", 2),
    ]


def test_without_auto_provisioning_there_are_no_limits() -> None:
    _, gcp = gcp_spec(platform())
    assert plan.nap_resource_limits(gcp.node_auto_provisioning) == []


def test_kubeconfig_authenticates_with_the_gke_auth_plugin() -> None:
    config = yaml.safe_load(plan.kubeconfig("gke_p_us-central1_ml", "10.0.0.2", "Q0E="))
    assert config["current-context"] == "gke_p_us-central1_ml"
    assert config["clusters"][0]["cluster"] == {"server": "https://10.0.0.2", "certificate-authority-data": "Q0E="}
    assert config["users"][0]["user"]["exec"]["command"] == "gke-gcloud-auth-plugin"


def test_kubeconfig_context_matches_gcloud_get_credentials() -> None:
    assert plan.kubeconfig_context("my-proj", "us-central1", "ml-prod") == "gke_my-proj_us-central1_ml-prod"

"""The spec's GCP-only rules: what a GKE stack must say, and what other clouds may not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from gcp_support import messages_at, platform, problems_of, spec_of

from components.spec import SpecError
from infra import stackfile

POOL0 = "platform.nodePools[0]"


def test_the_example_gcp_stacks_are_valid() -> None:
    assert spec_of(platform("dev-gcp")).gcp is not None
    assert spec_of(platform("prod-gcp")).gcp is not None


def test_gcp_section_is_required_on_gcp() -> None:
    raw = platform()
    del raw["gcp"]
    assert messages_at(raw, "platform.gcp") == ["required for cloud: gcp (at least `zones`: where the GPU nodes run)"]


def aws_platform(**pool: object) -> dict[str, Any]:
    return {
        "cloud": "aws",
        "environment": "dev",
        "cluster": {"name": "ml-dev"},
        "nodePools": [{"name": "l4", "instanceType": "g6.xlarge", **pool}],
    }


def test_gcp_section_is_refused_on_aws() -> None:
    raw = {**aws_platform(), "gcp": {"zones": ["us-central1-a"]}}
    assert messages_at(raw, "platform.gcp", region="us-west-2") == ["only for cloud: gcp, not aws"]


@pytest.mark.parametrize(
    ("key", "value"),
    [("driverVersion", "LATEST"), ("compactPlacement", True), ("multiGpuTraining", True)],
)
def test_gcp_pool_fields_are_refused_on_aws(key: str, value: object) -> None:
    assert messages_at(aws_platform(**{key: value}), f"{POOL0}.{key}", region="us-west-2") == [
        "only for cloud: gcp, not aws"
    ]


def test_aws_pools_without_gcp_fields_pass() -> None:
    assert problems_of(aws_platform(), region="us-west-2") == []


def test_zones_are_required() -> None:
    raw = platform()
    raw["gcp"]["zones"] = []
    assert messages_at(raw, "platform.gcp.zones") == [
        "required: the zones the nodes run in; pick zones that offer the pools' GPUs"
    ]


def test_a_cluster_zone_must_belong_to_the_region() -> None:
    raw = platform()
    raw["gcp"]["zones"] = ["europe-west4-a"]
    assert messages_at(raw, "platform.gcp.zones[0]") == [
        "zone europe-west4-a is not in the stack's region us-central1 (gcp:region)"
    ]


def test_a_pool_zone_must_belong_to_the_region() -> None:
    raw = platform()
    raw["nodePools"][0]["zones"] = ["us-central1-b", "us-east1-c"]
    assert messages_at(raw, f"{POOL0}.zones[1]") == ["zone us-east1-c is not in the stack's region us-central1 (gcp:region)"]


def test_a_zone_must_look_like_a_gcp_zone() -> None:
    raw = platform()
    raw["nodePools"][0]["zones"] = ["us-central1a"]
    assert messages_at(raw, f"{POOL0}.zones[0]") == ["expected a GCP zone like us-central1-a, got 'us-central1a'"]


def test_zones_are_not_checked_against_an_unknown_region() -> None:
    raw = platform()
    raw["gcp"]["zones"] = ["europe-west4-a"]
    assert problems_of(raw, region=None) == []


def test_the_stack_files_gcp_region_reaches_the_zone_rules(tmp_path: Path) -> None:
    raw = platform()
    raw["gcp"]["zones"] = ["us-east1-b"]
    stack = stackfile.StackFile(tmp_path / "Pulumi.t.yaml", "t", {"gcp:project": "p", "gcp:region": "us-central1", "gpu-platform:platform": raw})
    with pytest.raises(SpecError) as error:
        stack.spec()
    assert [p.path for p in error.value.problems] == ["platform.gcp.zones[0]"]


def test_compact_placement_needs_exactly_one_zone() -> None:
    raw = platform("prod-gcp")
    raw["nodePools"][0]["zones"] = []
    assert messages_at(raw, f"{POOL0}.compactPlacement") == [
        "needs the pool in exactly one zone (set the pool's zones to one), got us-central1-a, us-central1-b, us-central1-c"
    ]


def test_a_gpudirect_rdma_pool_needs_exactly_one_zone_for_its_roce_vpc() -> None:
    raw = platform("prod-gcp")
    raw["nodePools"][1]["zones"] = []
    assert messages_at(raw, "platform.nodePools[1].zones") == [
        "a3-ultragpu-8g with multiGpuTraining gets GPUDirect RDMA, whose RoCE VPC belongs to one zone (VPC docs, "
        "RDMA RoCE network profile): set the pool's zones to exactly one, got us-central1-a, us-central1-b, us-central1-c"
    ]


def test_the_cluster_s_ranges_stay_clear_of_the_gpu_subnets_where_gpudirect_pools_exist() -> None:
    raw = platform("prod-gcp")
    raw["gcp"]["network"] = {"cidrs": {"nodes": "192.168.64.0/20", "pods": "10.16.0.0/14", "services": "10.20.0.0/20"}}
    assert messages_at(raw, "platform.gcp.network.cidrs.nodes") == [
        "192.168.64.0/20 overlaps 192.168.0.0/16, where the GPUDirect pools' GPU subnets are; pick another range"
    ]


def test_an_rdma_shape_without_multi_gpu_training_may_span_zones() -> None:
    raw = platform("prod-gcp")
    raw["nodePools"][1]["zones"] = []
    raw["nodePools"][1]["multiGpuTraining"] = False
    assert messages_at(raw, "platform.nodePools[1].zones") == []


def test_gke_sharing_is_refused_on_a_multi_gpu_training_pool() -> None:
    raw = platform()
    raw["nodePools"][0]["multiGpuTraining"] = True
    assert messages_at(raw, f"{POOL0}.sharing.mode") == [
        "time-slicing through GKE's device plugin gives each pod at most one GPU, but this pool is marked "
        "multiGpuTraining; drop the sharing or the mark"
    ]


def test_the_standalone_nvidia_device_plugin_is_refused_on_gke() -> None:
    raw = platform()
    raw["devicePlugin"] = "nvidia"
    assert [f"{p.path}: {p.message}" for p in problems_of(raw)] == [
        "platform.devicePlugin: not on gcp: NVIDIA's standalone device plugin needs the NVIDIA container toolkit on "
        "the node, which GKE's Container-Optimized OS nodes do not have (GKE runs its own device plugin there); use "
        "managed (the default on gcp)"
    ]


def test_the_refusal_is_one_line_naming_the_stack_file_and_field() -> None:
    raw = platform()
    raw["devicePlugin"] = "nvidia"
    with pytest.raises(SpecError) as raised:
        spec_of(raw)
    assert raised.value.render().splitlines() == [
        "stacks/Pulumi.test.yaml: platform.devicePlugin: not on gcp: NVIDIA's standalone device plugin needs the "
        "NVIDIA container toolkit on the node, which GKE's Container-Optimized OS nodes do not have (GKE runs its "
        "own device plugin there); use managed (the default on gcp)"
    ]


def test_gke_shares_a_gpu_between_at_most_48_pods() -> None:
    raw = platform()
    raw["nodePools"][0]["sharing"] = {"mode": "time-slicing", "replicas": 49}
    assert messages_at(raw, f"{POOL0}.sharing.replicas") == ["GKE shares a GPU between at most 48 pods, got 49"]


def test_prod_requires_authorized_networks() -> None:
    raw = platform("prod-gcp")
    raw["gcp"]["authorizedNetworks"] = []
    assert messages_at(raw, "platform.gcp.authorizedNetworks") == [
        "required in prod: the CIDR blocks that may reach the control plane (your office, VPN, CI)"
    ]


def test_prod_refuses_the_whole_internet_as_authorized_network() -> None:
    raw = platform("prod-gcp")
    raw["gcp"]["authorizedNetworks"] = [{"cidr": "0.0.0.0/0", "name": "anyone"}]
    assert messages_at(raw, "platform.gcp.authorizedNetworks[0].cidr") == [
        "0.0.0.0/0 opens the control plane to the whole internet; not in prod"
    ]


def test_dev_may_leave_the_control_plane_open() -> None:
    raw = platform()
    raw["gcp"]["authorizedNetworks"] = [{"cidr": "0.0.0.0/0", "name": "anyone"}]
    assert problems_of(raw) == []


def test_an_authorized_network_must_be_a_cidr_block() -> None:
    raw = platform()
    raw["gcp"]["authorizedNetworks"] = [{"cidr": "10.0.0.1/8", "name": "vpn"}]
    assert messages_at(raw, "platform.gcp.authorizedNetworks[0].cidr") == [
        "expected an IPv4 CIDR block like 10.0.0.0/20, got '10.0.0.1/8'"
    ]


def test_created_network_ranges_must_not_overlap() -> None:
    raw = platform()
    raw["gcp"]["network"] = {"cidrs": {"nodes": "10.0.0.0/16", "pods": "10.0.128.0/17", "services": "10.20.0.0/20"}}
    assert messages_at(raw, "platform.gcp.network.cidrs.pods") == ["10.0.128.0/17 overlaps cidrs.nodes (10.0.0.0/16)"]


def test_created_network_ranges_must_be_private() -> None:
    raw = platform()
    raw["gcp"]["network"] = {"cidrs": {"services": "34.1.0.0/20"}}
    assert messages_at(raw, "platform.gcp.network.cidrs.services") == [
        "expected a private (RFC 1918) range, got 34.1.0.0/20"
    ]


def test_an_existing_network_brings_its_own_ranges() -> None:
    raw = platform()
    raw["gcp"]["network"] = {
        "existing": {"network": "shared", "subnetwork": "gke", "podsRange": "pods", "servicesRange": "svc"},
        "cidrs": {"nodes": "10.0.0.0/20"},
    }
    assert messages_at(raw, "platform.gcp.network.cidrs") == [
        "only when the wing creates the network; an existing one brings its own ranges"
    ]


def test_an_existing_network_needs_all_four_names() -> None:
    raw = platform()
    raw["gcp"]["network"] = {"existing": {"network": "shared", "subnetwork": "gke", "podsRange": "pods"}}
    assert messages_at(raw, "platform.gcp.network.existing.servicesRange") == ["required field is missing"]


def test_auto_provisioning_needs_cpu_and_memory_limits() -> None:
    raw = platform()
    raw["gcp"]["nodeAutoProvisioning"] = {"enabled": True, "gpuLimits": {"nvidia-l4": 4, "nvidia-tesla-a100": 2}}
    problems = {p.path: p.message for p in problems_of(raw)}
    assert problems == {
        "platform.gcp.nodeAutoProvisioning.maxCpu": "required with enabled: true (a cluster total GKE needs for auto-provisioning)",
        "platform.gcp.nodeAutoProvisioning.maxMemoryGib": "required with enabled: true (a cluster total GKE needs for auto-provisioning)",
    }


def test_auto_provisioning_limits_must_cover_the_declared_pools() -> None:
    raw = platform()
    # dev-gcp at its maximum: 4 x g2-standard-8 (8 vCPUs, 32 GiB, 1 L4) and
    # 2 x a2-highgpu-1g (12 vCPUs, 85 GiB, 1 A100): 56 vCPUs, 298 GiB, 4 L4s, 2 A100s.
    raw["gcp"]["nodeAutoProvisioning"] = {
        "enabled": True,
        "maxCpu": 55,
        "maxMemoryGib": 297,
        "gpuLimits": {"nvidia-l4": 3},
    }
    at = "platform.gcp.nodeAutoProvisioning"
    why = "GKE counts the GPU pools at their maximum against it"
    assert {p.path: p.message for p in problems_of(raw)} == {
        f"{at}.maxCpu": f"at least 56 vCPUs: {why}, got 55",
        f"{at}.maxMemoryGib": f"at least 298 GiB: {why}, got 297",
        f"{at}.gpuLimits.nvidia-l4": f"at least 4: {why}, got 3",
        f"{at}.gpuLimits.nvidia-tesla-a100": f"at least 2: {why}, got 0",
    }


def test_auto_provisioning_limits_that_cover_the_pools_pass() -> None:
    raw = platform()
    raw["gcp"]["nodeAutoProvisioning"] = {
        "enabled": True,
        "maxCpu": 56,
        "maxMemoryGib": 298,
        "gpuLimits": {"nvidia-l4": 4, "nvidia-tesla-a100": 2},
    }
    assert problems_of(raw) == []


def test_auto_provisioning_gpu_limits_name_gke_accelerator_types() -> None:
    raw = platform()
    raw["gcp"]["nodeAutoProvisioning"] = {"gpuLimits": {"nvidia-l4x": 4}}
    [message] = messages_at(raw, "platform.gcp.nodeAutoProvisioning.gpuLimits.nvidia-l4x")
    assert message.startswith("unknown GKE accelerator type (did you mean 'nvidia-l4'?); one of nvidia-a100-80gb, ")


def test_auto_provisioning_limits_need_it_enabled() -> None:
    raw = platform()
    raw["gcp"]["nodeAutoProvisioning"] = {"maxCpu": 64}
    assert messages_at(raw, "platform.gcp.nodeAutoProvisioning.maxCpu") == ["only with enabled: true"]


def test_gke_cluster_names_leave_room_for_service_account_ids() -> None:
    raw = platform()
    raw["cluster"]["name"] = "a" * 23
    assert messages_at(raw, "platform.cluster.name") == [
        "on gcp: start with a letter and use at most 22 characters "
        f"(service account ids '<name>-trainer' must fit in 30), got {'a' * 23!r}"
    ]


def test_gke_cluster_names_start_with_a_letter() -> None:
    raw = platform()
    raw["cluster"]["name"] = "1ml"
    assert len(messages_at(raw, "platform.cluster.name")) == 1


def test_system_is_the_cpu_pools_name() -> None:
    raw = platform()
    raw["nodePools"][0]["name"] = "system"
    assert messages_at(raw, f"{POOL0}.name") == ["'system' is the GKE name of the platform's CPU pool; pick another"]


def test_gke_pool_names_have_at_most_40_characters() -> None:
    raw = platform()
    raw["nodePools"][0]["name"] = "l" * 41
    assert messages_at(raw, f"{POOL0}.name") == [
        f"on gcp: start with a letter and use at most 40 characters (GKE node pool names), got {'l' * 41!r}"
    ]


def test_system_nodes_max_must_not_be_below_min() -> None:
    raw = platform()
    raw["gcp"]["systemNodes"] = {"minNodes": 2, "maxNodes": 1}
    assert messages_at(raw, "platform.gcp.systemNodes.maxNodes") == ["must be >= minNodes (2), got 1"]


def test_unknown_gcp_keys_are_errors() -> None:
    raw = platform()
    raw["gcp"]["releaseChanel"] = "STABLE"
    [message] = messages_at(raw, "platform.gcp.releaseChanel")
    assert message.startswith("unknown key (did you mean 'releaseChannel'?)")


def test_every_gcp_problem_is_reported_at_once() -> None:
    raw = platform("prod-gcp")
    raw["gcp"]["authorizedNetworks"] = []
    raw["gcp"]["zones"].append("us-east1-b")
    raw["nodePools"][0]["zones"] = []
    assert [p.path for p in problems_of(raw)] == [
        "platform.gcp.zones[3]",
        "platform.gcp.authorizedNetworks",
        f"{POOL0}.compactPlacement",
    ]


@pytest.mark.parametrize("key", ["gcp:project", "gcp:region"])
def test_the_stack_file_must_set_the_gcp_provider_settings(tmp_path: Path, key: str) -> None:
    config = {"gcp:project": "p", "gcp:region": "us-central1", "gpu-platform:platform": platform()}
    del config[key]
    with pytest.raises(SpecError) as error:
        stackfile.StackFile(tmp_path / "Pulumi.t.yaml", "t", config).spec()
    assert [p.path for p in error.value.problems] == [key]

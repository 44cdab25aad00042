"""Every count a stack file sets is bounded by what the cloud or Kubernetes documents
(components.facts.limits): a stack never synthesizes a number no API accepts."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import platform_of

from components.facts import limits
from components.spec import SpecError, parse_spec

HUGE = 10**30
REGIONS = {"aws": "us-east-1", "gcp": "us-central1", "existing": None}


def problems(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, "stacks/Pulumi.test.yaml", REGIONS[raw["cloud"]])
    return [f"{p.path}: {p.message}" for p in caught.value.problems]


def paths(raw: dict[str, Any]) -> list[str]:
    return [line.split(": ", 1)[0] for line in problems(raw)]


def test_an_eks_node_group_holds_at_most_450_nodes() -> None:
    prod = platform_of("prod-aws")
    prod["nodePools"][0]["maxNodes"] = limits.EKS_NODES_PER_NODE_GROUP + 1
    prod["policy"] = {"maxNodesPerPool": limits.INT32_MAX, "maxGpus": limits.INT32_MAX}
    assert problems(prod) == [
        "platform.nodePools[0].maxNodes: at most 450 nodes per EKS managed node group"
        " (service quota 'Nodes per managed node group'), got 451"
    ]


def test_an_eks_node_group_of_450_nodes_is_accepted() -> None:
    prod = platform_of("prod-aws")
    prod["nodePools"][0]["maxNodes"] = limits.EKS_NODES_PER_NODE_GROUP
    prod["policy"] = {"maxNodesPerPool": limits.INT32_MAX, "maxGpus": limits.INT32_MAX}
    parse_spec(prod, "stacks/Pulumi.test.yaml", "us-east-1")


def test_an_eks_node_group_cannot_have_a_maximum_of_zero() -> None:
    dev = platform_of("dev-aws")
    dev["nodePools"][0]["minNodes"] = 0
    dev["nodePools"][0]["maxNodes"] = 0
    dev["scheduling"] = {}
    with pytest.raises(SpecError) as caught:
        parse_spec(dev, "stacks/Pulumi.test.yaml", "us-west-2")
    assert caught.value.render().splitlines() == [
        "stacks/Pulumi.test.yaml: platform.nodePools[0].maxNodes: an EKS managed node group's maximum size is at"
        " least 1, got 0"
    ]


def test_a_huge_node_count_is_refused_not_synthesized() -> None:
    for stack in ("prod-aws", "prod-gcp", "onprem"):
        raw = platform_of(stack)
        raw["nodePools"][0]["maxNodes"] = HUGE
        assert "platform.nodePools[0].maxNodes" in paths(raw) or "platform.nodePools" in paths(raw), stack


def test_an_eks_cluster_holds_at_most_29_gpu_pools() -> None:
    dev = platform_of("dev-aws")
    template = dev["nodePools"][0]
    dev["nodePools"] = [{**template, "name": f"pool-{i}"} for i in range(limits.EKS_NODE_GROUPS_PER_CLUSTER)]
    assert "platform.nodePools" in paths(dev)
    dev["nodePools"] = dev["nodePools"][: limits.EKS_NODE_GROUPS_PER_CLUSTER - 1]
    assert "platform.nodePools" not in _paths_or_none(dev)


def _paths_or_none(raw: dict[str, Any]) -> list[str]:
    try:
        parse_spec(raw, "stacks/Pulumi.test.yaml", REGIONS[raw["cloud"]])
    except SpecError as exc:
        return [p.path for p in exc.problems]
    return []


def test_a_gke_pool_holds_1000_nodes_per_zone_it_runs_in() -> None:
    dev = platform_of("dev-gcp")
    dev["nodePools"][0]["maxNodes"] = 1001
    assert problems(dev)[0] == (
        "platform.nodePools[0].maxNodes: at most 1000 nodes: GKE allows 1000 per node pool and zone, "
        "in 1 zone(s) here; got 1001"
    )
    dev["gcp"]["zones"] = ["us-central1-a", "us-central1-b"]
    assert "platform.nodePools[0].maxNodes" not in _paths_or_none(dev)


def test_a_gke_cluster_holds_at_most_65000_nodes() -> None:
    dev = platform_of("dev-gcp")
    dev["gcp"]["zones"] = ["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"]
    template = dev["nodePools"][0]
    dev["nodePools"] = [{**template, "name": f"pool-{i}", "maxNodes": 4000} for i in range(17)]
    dev["scheduling"]["teams"] = [{"name": "research", "quotas": {}}]
    assert any(line.startswith("platform.nodePools: the pools and system nodes reach 68003 nodes;") for line in problems(dev))


def test_an_existing_cluster_counts_at_most_5000_nodes() -> None:
    onprem = platform_of("onprem")
    onprem["nodePools"][0]["minNodes"] = 4
    onprem["nodePools"][0]["maxNodes"] = 4999
    assert any(line.startswith("platform.nodePools: the pools count 5001 nodes") for line in problems(onprem))


def test_an_existing_node_has_at_most_16_gpus() -> None:
    onprem = platform_of("onprem")
    onprem["nodePools"][0]["gpusPerNode"] = 17
    assert "platform.nodePools[0].gpusPerNode: at most 16 GPUs per node (the largest NVIDIA systems), got 17" in problems(onprem)


def test_an_mps_gpu_serves_at_most_48_clients() -> None:
    onprem = platform_of("onprem")
    onprem["nodePools"][1]["sharing"] = {"mode": "mps", "replicas": 49}
    assert (
        "platform.nodePools[1].sharing.replicas: at most 48 for mode mps (CUDA MPS's limit of clients per GPU), got 49"
        in problems(onprem)
    )


def test_a_time_sliced_gpu_serves_at_most_the_pods_a_node_runs() -> None:
    onprem = platform_of("onprem")
    onprem["nodePools"][1]["sharing"] = {"mode": "time-slicing", "replicas": 111}
    assert (
        "platform.nodePools[1].sharing.replicas: at most 110 for mode time-slicing"
        " (kubelet's default limit of pods per node), got 111" in problems(onprem)
    )


@pytest.mark.parametrize("key", ["maxNodesPerPool", "maxGpus"])
def test_policy_limits_fit_a_kubernetes_integer(key: str) -> None:
    dev = platform_of("dev-aws")
    dev["policy"] = {key: HUGE}
    assert paths(dev) == [f"platform.policy.{key}"]


def test_auto_provisioning_limits_fit_a_kubernetes_integer() -> None:
    dev = platform_of("dev-gcp")
    dev["gcp"]["nodeAutoProvisioning"] = {"enabled": True, "maxCpu": HUGE, "maxMemoryGib": 64, "gpuLimits": {"nvidia-l4": HUGE}}
    assert paths(dev) == ["platform.gcp.nodeAutoProvisioning.maxCpu", "platform.gcp.nodeAutoProvisioning.gpuLimits.nvidia-l4"]

"""Kueue Topology-Aware Scheduling: one Topology per cluster with its cloud's node labels, named
by the flavors of multi-node fabric pools whose nodes Kueue can count, and the jobs' placement
annotation per `--topology`."""

from __future__ import annotations

from typing import Any, Callable

import copy

import pytest
from test_k8s_queued_provisioning import validate

from components.jobs import renderer
from components.kubernetes.queues import queue_plan
from components.pools import derive_pools
from components.spec import parse_spec
from infra import stackfile
from infra.synth import Synthesis
from k8s_support import REPO

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
REQUEST = dict(gpus_per_node=8, team="research", tier="production", image="ghcr.io/acme/trainer:1.0.0")


def flavor_names(platform: dict[str, Any]) -> dict[str, str]:
    spec = parse_spec(platform, "stacks/Pulumi.prod-gcp.yaml")
    return queue_plan(spec, derive_pools(spec)).flavors


def objects(result: Synthesis, kind: str) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["metadata"]["name"]: r["inputs"] for r in result.by_type(f"{KUEUE}{kind}")}


TRAINER_ARGS = ["--preset", "small", "--max-steps", "10", "--checkpoint-every", "5", "--global-batch-size", "16",
                "--seq-len", "512", "--seed", "1", "--data", "/data/datasets/corpus"]


def pod_annotations(stack: str, pool: str, nodes: int, topology: str | None = None) -> dict[str, str]:
    args = ["--preset", "small", "--max-steps", "10", "--checkpoint-every", "5", "--global-batch-size", str(8 * nodes),
            "--seq-len", "512", "--seed", "1", "--data", "/data/datasets/corpus"]
    request = renderer.JobRequest(pool=pool, nodes=nodes, trainer_args=args, topology=topology, **REQUEST)  # type: ignore[arg-type]
    jobset = renderer.render(stackfile.read(stack, REPO).spec(), request)
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"].get("annotations", {})


@pytest.mark.parametrize(
    ("stack", "levels"),
    [
        ("prod-gcp", ["cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
                      "cloud.google.com/gce-topology-host", "kubernetes.io/hostname"]),
        ("prod-aws", ["topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
                      "topology.k8s.aws/network-node-layer-3", "kubernetes.io/hostname"]),
    ],
)
def test_each_cloud_s_topology_lists_its_node_labels_and_validates(
    synthesized: Callable[[str], Synthesis], stack: str, levels: list[str]
) -> None:
    [topology] = objects(synthesized(stack), "Topology").values()
    validate(topology)
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == levels


def test_stacks_without_multi_node_fabric_pools_declare_no_topology(synthesized: Callable[[str], Synthesis]) -> None:
    assert objects(synthesized("onprem"), "Topology") == {}


def test_a_queued_fabric_pool_s_flavor_names_the_topology(synthesized: Callable[[str], Synthesis]) -> None:
    flavors = objects(synthesized("prod-gcp"), "ResourceFlavor")
    validate(flavors["h200-train-tas"])
    assert flavors["h200-train-tas"]["spec"]["topologyName"] == "gpu-fabric"


def test_cluster_queues_and_the_cohort_name_the_tas_flavor_by_its_own_name(synthesized: Callable[[str], Synthesis]) -> None:
    result = synthesized("prod-gcp")
    declared = set(objects(result, "ResourceFlavor"))
    for kind in ("ClusterQueue", "Cohort"):
        for queue in objects(result, kind).values():
            named = {f["name"] for group in queue["spec"]["resourceGroups"] for f in group["flavors"]}
            assert "h200-train-tas" in named and named <= declared


def test_a_pool_leaving_queued_provisioning_gets_a_new_flavor_not_an_update_kueue_refuses() -> None:
    # Kueue v0.19.2 refuses changes to a TAS flavor's nodeLabels, tolerations and topologyName
    # (apis/kueue/v1beta2/resourceflavor_types.go): the switch the prod-gcp stack suggests
    # (queued -> reservation) must land on another ResourceFlavor name.
    platform = copy.deepcopy(stackfile.read("prod-gcp", REPO).config["gpu-platform:platform"])
    queued = flavor_names(platform)
    [pool] = [p for p in platform["nodePools"] if p["name"] == "h200-train"]
    pool.update(provisioning="reservation", reservation="a3-ultra-block")
    assert queued["h200-train"] == "h200-train-tas" and flavor_names(platform)["h200-train"] == "h200-train"


@pytest.mark.parametrize(("stack", "pool"), [("prod-gcp", "h100-train"), ("prod-aws", "h100-train"), ("prod-gcp", "l4-eval")])
def test_flavors_of_pools_scaling_from_zero_or_without_fabric_place_by_no_topology(
    synthesized: Callable[[str], Synthesis], stack: str, pool: str
) -> None:
    assert "topologyName" not in objects(synthesized(stack), "ResourceFlavor")[pool]["spec"]


def test_multi_node_jobs_on_a_topology_flavor_prefer_one_block() -> None:
    # The GPU interfaces a 2-node job on this GPUDirect pool also carries: docs/gcp.md, GPUDirect.
    two = {k: v for k, v in pod_annotations("prod-gcp", "h200-train", 2).items() if not k.startswith("networking.gke.io/")}
    assert two == {
        **{k: v for k, v in pod_annotations("prod-gcp", "h200-train", 1).items()},
        "kueue.x-k8s.io/podset-preferred-topology": "cloud.google.com/gce-topology-block",
    }


def test_single_node_jobs_carry_no_topology_request() -> None:
    assert not any(k.startswith("kueue.x-k8s.io/podset") for k in pod_annotations("prod-gcp", "h200-train", 1))


def test_topology_required_asks_kueue_for_one_block() -> None:
    # A reservation whose nodes all stand ready: a TAS flavor without queued provisioning.
    platform = copy.deepcopy(stackfile.read("prod-gcp", REPO).config["gpu-platform:platform"])
    [pool] = [p for p in platform["nodePools"] if p["name"] == "h200-train"]
    pool.update(provisioning="reservation", reservation="a3-ultra-block", minNodes=4)
    spec = parse_spec(platform, "stacks/Pulumi.prod-gcp.yaml")
    request = renderer.JobRequest(pool="h200-train", nodes=2, trainer_args=TRAINER_ARGS, topology="required", **REQUEST)  # type: ignore[arg-type]
    template = renderer.render(spec, request)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    annotations = template["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/podset-required-topology"] == "cloud.google.com/gce-topology-block"
    assert "kueue.x-k8s.io/podset-preferred-topology" not in annotations


def test_topology_required_on_a_queued_pool_is_refused_with_the_reason() -> None:
    with pytest.raises(renderer.JobError) as caught:
        pod_annotations("prod-gcp", "h200-train", 2, "required")
    [problem] = caught.value.problems
    assert problem.startswith("--topology required: pool h200-train gets its nodes by queued provisioning")
    assert problem.endswith("use --topology preferred")


def test_topology_none_leaves_placement_to_the_pool() -> None:
    assert not any(k.startswith("kueue.x-k8s.io/podset") for k in pod_annotations("prod-gcp", "h200-train", 2, "none"))


def test_placement_on_a_pool_without_topology_is_an_error() -> None:
    with pytest.raises(renderer.JobError) as caught:
        pod_annotations("prod-aws", "h100-train", 2, "preferred")
    assert caught.value.problems[0].startswith("--topology preferred: pool h100-train's Kueue flavor places by no topology")

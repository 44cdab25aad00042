"""The platform spec: what a stack file may say, and how each mistake is reported."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from helpers import platform_of

from components.spec import PlatformSpec, SpecError, parse_spec

SOURCE = "stacks/Pulumi.test.yaml"


def aws_platform(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "cloud": "aws",
        "environment": "dev",
        "cluster": {"name": "ml-dev", "kubernetesVersion": "1.33"},
        "nodePools": [
            {
                "name": "l4-shared",
                "instanceType": "g6.xlarge",
                "minNodes": 0,
                "maxNodes": 4,
                "capacity": "spot",
                "sharing": {"mode": "time-slicing", "replicas": 4},
            }
        ],
    }
    base.update(changes)
    return base


def existing_platform() -> dict[str, Any]:
    return {
        "cloud": "existing",
        "environment": "staging",
        "cluster": {"name": "lab", "context": "lab-admin@lab"},
        "nodePools": [
            {
                "name": "a100",
                "gpuModel": "A100-80GB",
                "gpusPerNode": 8,
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                "minNodes": 2,
                "maxNodes": 2,
            }
        ],
    }


def problems(raw: Any) -> list[str]:
    """The reported lines for an invalid spec; fails the test if the spec is accepted."""
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, SOURCE)
    return caught.value.render().splitlines()


def pool(raw: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return raw["nodePools"][index]


# --- valid specs and defaults ---------------------------------------------------------------


def test_minimal_aws_spec_is_accepted_with_documented_defaults() -> None:
    spec = parse_spec(
        {"cloud": "aws", "environment": "dev", "cluster": {"name": "c"}, "nodePools": [{"name": "p", "instanceType": "g6.xlarge"}]},
        SOURCE,
    )
    assert isinstance(spec, PlatformSpec)
    assert spec.cluster.kubernetes_version == "1.35"
    only = spec.node_pools[0]
    assert (only.min_nodes, only.max_nodes, only.capacity, only.sharing.mode) == (0, 1, "on-demand", "none")


def test_existing_cluster_spec_is_accepted() -> None:
    spec = parse_spec(existing_platform(), SOURCE)
    assert spec.node_pools[0].gpu_model == "A100-80GB"


@pytest.mark.parametrize(("cloud", "expected"), [("aws", "nvidia"), ("existing", "nvidia"), ("gcp", "managed")])
def test_device_plugin_defaults_by_cloud(cloud: str, expected: str) -> None:
    raw = existing_platform() if cloud == "existing" else aws_platform(cloud=cloud)
    if cloud == "gcp":
        pool(raw)["instanceType"] = "g2-standard-8"
        raw["gcp"] = {"zones": ["us-central1-a"]}
    assert parse_spec(raw, SOURCE).device_plugin == expected


def test_gcp_n1_machine_may_attach_several_t4s() -> None:
    raw = aws_platform(cloud="gcp", gcp={"zones": ["us-central1-a"]})
    pool(raw).update(instanceType="n1-standard-8", gpusPerNode=4)
    assert parse_spec(raw, SOURCE).node_pools[0].gpus_per_node == 4


# --- required fields, types, unknown keys -------------------------------------------------------


@pytest.mark.parametrize("field", ["cloud", "environment", "cluster", "nodePools"])
def test_required_top_level_field_missing_is_reported(field: str) -> None:
    raw = aws_platform()
    del raw[field]
    assert problems(raw) == [f"{SOURCE}: platform.{field}: required field is missing"]


def test_cluster_name_is_required() -> None:
    raw = aws_platform(cluster={"kubernetesVersion": "1.33"})
    assert problems(raw) == [f"{SOURCE}: platform.cluster.name: required field is missing"]


def test_missing_platform_key_is_reported() -> None:
    assert problems(None) == [f"{SOURCE}: platform: missing: set `gpu-platform:platform`"]


def test_environment_is_never_guessed() -> None:
    (line,) = problems(aws_platform(environment="production"))
    assert line.startswith(f"{SOURCE}: platform.environment: expected 'dev', 'staging' or 'prod'")


def test_unknown_cloud_is_rejected() -> None:
    (line,) = problems(aws_platform(cloud="azure"))
    assert "platform.cloud: expected 'aws', 'gcp' or 'existing', got 'azure'" in line


def test_wrong_type_is_reported_without_coercion() -> None:
    raw = aws_platform()
    pool(raw)["maxNodes"] = "4"
    assert problems(raw) == [f"{SOURCE}: platform.nodePools[0].maxNodes: expected a whole number, got '4'"]


def test_unquoted_kubernetes_version_is_explained() -> None:
    raw = aws_platform(cluster={"name": "ml-dev", "kubernetesVersion": 1.3})
    (line,) = problems(raw)
    assert "platform.cluster.kubernetesVersion: expected a string, got 1.3" in line
    assert 'quote versions: "1.33"' in line


def test_unknown_key_is_an_error_with_a_suggestion() -> None:
    raw = aws_platform()
    pool(raw)["maxNode"] = 3
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.nodePools[0].maxNode: unknown key (did you mean 'maxNodes'?)")
    assert "allowed keys:" in line


def test_unknown_nested_key_is_an_error() -> None:
    raw = aws_platform()
    pool(raw)["sharing"]["replica"] = 2
    (line,) = problems(raw)
    assert "platform.nodePools[0].sharing.replica: unknown key (did you mean 'replicas'?)" in line


def test_several_problems_are_all_reported_at_once() -> None:
    raw = aws_platform(environment="qa")
    pool(raw)["maxNodes"] = -1
    pool(raw)["capacity"] = "preemptible"
    lines = problems(raw)
    assert len(lines) == 3
    assert {line.split(": ")[1] for line in lines} == {
        "platform.environment",
        "platform.nodePools[0].maxNodes",
        "platform.nodePools[0].capacity",
    }


def test_empty_pool_list_is_rejected() -> None:
    (line,) = problems(aws_platform(nodePools=[]))
    assert line.startswith(f"{SOURCE}: platform.nodePools: ")
    assert "at least 1" in line


# --- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ML-Dev", "ml_dev", "-ml", "ml-", "a" * 64])
def test_cluster_name_must_be_a_dns_label(name: str) -> None:
    raw = aws_platform(cluster={"name": name})
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.cluster.name: expected a DNS-1123 label")


def test_empty_pool_name_is_rejected() -> None:
    raw = aws_platform()
    pool(raw)["name"] = ""
    assert problems(raw) == [f"{SOURCE}: platform.nodePools[0].name: must not be empty"]


def test_pool_name_must_be_a_dns_label() -> None:
    raw = aws_platform()
    pool(raw)["name"] = "L4_shared"
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.nodePools[0].name: expected a DNS-1123 label")


def test_duplicate_pool_names_are_rejected() -> None:
    raw = aws_platform()
    raw["nodePools"].append(copy.deepcopy(pool(raw)))
    lines = problems(raw)
    assert f"{SOURCE}: platform.nodePools[1].name: duplicate pool name 'l4-shared': pool names must be unique" in lines


def test_cluster_and_pool_name_together_must_fit_a_resource_name() -> None:
    raw = aws_platform(cluster={"name": "c" * 29})
    pool(raw)["name"] = "p" * 34
    (line,) = problems(raw)
    assert "platform.nodePools[0].name:" in line and "longer than 63 characters" in line


# --- scale ------------------------------------------------------------------------------------


def test_max_nodes_below_min_nodes_is_rejected() -> None:
    raw = aws_platform()
    pool(raw).update(minNodes=3, maxNodes=2)
    assert problems(raw) == [f"{SOURCE}: platform.nodePools[0].maxNodes: must be >= minNodes (3), got 2"]


@pytest.mark.parametrize("field", ["minNodes", "maxNodes"])
def test_negative_node_counts_are_rejected(field: str) -> None:
    raw = aws_platform()
    pool(raw)[field] = -1
    lines = problems(raw)
    assert any(line.startswith(f"{SOURCE}: platform.nodePools[0].{field}: input should be greater than or equal to 0") for line in lines)


# --- sharing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["time-slicing", "mps"])
def test_sharing_needs_at_least_two_replicas(mode: str) -> None:
    raw = aws_platform()
    pool(raw)["sharing"] = {"mode": mode, "replicas": 1}
    assert problems(raw) == [
        f"{SOURCE}: platform.nodePools[0].sharing.replicas: expected at least 2 for mode {mode}, got 1"
    ]


def test_sharing_replicas_are_required_for_time_slicing() -> None:
    raw = aws_platform()
    pool(raw)["sharing"] = {"mode": "time-slicing"}
    assert problems(raw) == [
        f"{SOURCE}: platform.nodePools[0].sharing.replicas: required for mode time-slicing (at least 2)"
    ]


def test_replicas_without_a_sharing_mode_are_rejected() -> None:
    raw = aws_platform()
    pool(raw)["sharing"] = {"mode": "none", "replicas": 4}
    assert problems(raw) == [
        f"{SOURCE}: platform.nodePools[0].sharing.replicas: only for time-slicing and mps, not mode none"
    ]


def gcp_mig(machine: str, profile: str) -> dict[str, Any]:
    """dev-gcp with one pool of `machine` partitioned into `profile` (GKE creates the instances)."""
    raw = platform_of("dev-gcp")
    raw["nodePools"] = [{"name": "mig", "instanceType": machine, "capacity": "spot", "sharing": {"mode": "mig", "profile": profile}}]
    raw["scheduling"] = {}
    return raw


def test_mig_on_a_gpu_without_mig_is_rejected() -> None:
    assert problems(gcp_mig("g2-standard-8", "1g.10gb")) == [
        f"{SOURCE}: platform.nodePools[0].sharing.mode: L4 GPUs have no MIG; use time-slicing or mps"
    ]


def test_mig_profile_must_exist_on_the_gpu() -> None:
    (line,) = problems(gcp_mig("a2-highgpu-1g", "1g.10gb"))
    assert line.startswith(f"{SOURCE}: platform.nodePools[0].sharing.profile: A100-40GB has no MIG profile '1g.10gb'")
    assert "1g.5gb" in line


def test_mig_with_a_valid_profile_is_accepted_on_gke() -> None:
    assert parse_spec(gcp_mig("a3-highgpu-8g", "1g.10gb"), SOURCE).node_pools[0].sharing.profile == "1g.10gb"


def test_mig_on_aws_is_refused_for_want_of_a_mig_manager() -> None:
    raw = aws_platform()
    pool(raw).update(instanceType="p5.48xlarge", capacity="on-demand", sharing={"mode": "mig", "profile": "1g.10gb"})
    assert problems(raw) == [
        f"{SOURCE}: platform.nodePools[0].sharing.mode: mig on aws needs the GPU Operator's MIG manager to create the"
        " MIG instances, which this platform does not install: the pool would advertise GPU slots that never appear;"
        " use time-slicing or mps, or a GKE pool (GKE partitions GPUs itself)"
    ]


def test_mig_on_an_existing_cluster_is_refused_for_want_of_a_mig_manager() -> None:
    raw = existing_platform()
    pool(raw)["sharing"] = {"mode": "mig", "profile": "1g.10gb"}
    assert problems(raw) == [
        f"{SOURCE}: platform.nodePools[0].sharing.mode: mig on existing needs the GPU Operator's MIG manager to create"
        " the MIG instances, which this platform does not install: the pool would advertise GPU slots that never"
        " appear; use time-slicing or mps, or a GKE pool (GKE partitions GPUs itself)"
    ]


# --- instance types -------------------------------------------------------------------------------


def test_unknown_instance_type_gets_a_suggestion() -> None:
    raw = aws_platform()
    pool(raw)["instanceType"] = "g6.xlarg"
    assert problems(raw) == [
        f"{SOURCE}: platform.nodePools[0].instanceType: 'g6.xlarg' is not an NVIDIA GPU type in the aws catalog"
        " (did you mean 'g6.xlarge'?)"
    ]


@pytest.mark.parametrize(("instance_type", "reason"), [("g4ad.xlarge", "AMD"), ("inf2.xlarge", "Inferentia"), ("trn1.32xlarge", "Trainium")])
def test_non_nvidia_instance_types_are_rejected(instance_type: str, reason: str) -> None:
    raw = aws_platform()
    pool(raw)["instanceType"] = instance_type
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.nodePools[0].instanceType: {instance_type} has ")
    assert reason in line


def test_instance_type_of_the_other_cloud_is_rejected() -> None:
    raw = aws_platform()
    pool(raw)["instanceType"] = "a3-highgpu-8g"
    assert problems(raw) == [
        f"{SOURCE}: platform.nodePools[0].instanceType: a3-highgpu-8g is a gcp type, but this stack's cloud is aws"
    ]


def test_instance_type_is_required_on_a_cloud() -> None:
    raw = aws_platform()
    del pool(raw)["instanceType"]
    assert problems(raw) == [f"{SOURCE}: platform.nodePools[0].instanceType: required field is missing"]


def test_gpu_count_must_fit_the_machine() -> None:
    raw = aws_platform()
    pool(raw)["gpusPerNode"] = 2
    assert problems(raw) == [f"{SOURCE}: platform.nodePools[0].gpusPerNode: g6.xlarge carries 1 GPUs, got 2"]


# --- Kubernetes version ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.28", "1.40", "latest"])
def test_kubernetes_version_outside_the_supported_range_is_rejected(version: str) -> None:
    raw = aws_platform(cluster={"name": "ml-dev", "kubernetesVersion": version})
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.cluster.kubernetesVersion: expected one of 1.31,")


# --- existing clusters -----------------------------------------------------------------------------


def test_existing_cluster_needs_a_context() -> None:
    raw = existing_platform()
    del raw["cluster"]["context"]
    assert problems(raw) == [
        f"{SOURCE}: platform.cluster.context: required for cloud: existing (the kubeconfig context to use)"
    ]


def test_context_is_only_for_existing_clusters() -> None:
    raw = aws_platform(cluster={"name": "ml-dev", "context": "x"})
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.cluster.context: only for cloud: existing")


def test_existing_pool_describes_its_nodes() -> None:
    raw = existing_platform()
    for key in ("gpuModel", "gpusPerNode", "nodeSelector"):
        del pool(raw)[key]
    lines = problems(raw)
    assert {line.split(": ")[1] for line in lines} == {
        "platform.nodePools[0].gpuModel",
        "platform.nodePools[0].gpusPerNode",
        "platform.nodePools[0].nodeSelector",
    }


def test_existing_pool_gpu_model_comes_from_the_catalog() -> None:
    raw = existing_platform()
    pool(raw)["gpuModel"] = "A100"
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.nodePools[0].gpuModel: unknown GPU model 'A100'")


def test_existing_nodes_have_a_fixed_count() -> None:
    raw = existing_platform()
    pool(raw)["maxNodes"] = 3
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.nodePools[0].maxNodes: existing nodes do not scale")


def test_existing_pool_has_no_instance_type() -> None:
    raw = existing_platform()
    pool(raw)["instanceType"] = "p5.48xlarge"
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.nodePools[0].instanceType: not for cloud: existing")


def test_cloud_pool_does_not_take_existing_node_fields() -> None:
    raw = aws_platform()
    pool(raw)["gpuModel"] = "L4"
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.nodePools[0].gpuModel: only for cloud: existing")


# --- trainer image --------------------------------------------------------------------------------


@pytest.mark.parametrize("image", ["build", "ghcr.io/acme/trainer:1.2.0", "123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer:sha-abc"])
def test_trainer_image_is_build_or_a_reference(image: str) -> None:
    assert parse_spec(aws_platform(trainer={"image": image}), SOURCE).trainer.image == image


def test_trainer_image_must_look_like_a_reference() -> None:
    (line,) = problems(aws_platform(trainer={"image": "not an image"}))
    assert line.startswith(f"{SOURCE}: platform.trainer.image: expected `build` or an image reference")


def test_building_the_trainer_needs_a_cloud_registry() -> None:
    raw = existing_platform()
    raw["trainer"] = {"image": "build"}
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.trainer.image: `build` pushes to the stack's registry")


def test_deletion_protection_is_refused_on_an_existing_cluster() -> None:
    raw = existing_platform()
    raw["cluster"]["deletionProtection"] = True
    assert problems(raw) == [
        f"{SOURCE}: platform.cluster.deletionProtection: only for cloud: aws or gcp; an existing cluster is not the"
        " stack's to delete"
    ]

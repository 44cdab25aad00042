"""The GCP wing as synthesized on dev-gcp, prod-gcp and variants: resolved values, as sent."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from gcp_support import REGION, accelerator, cluster, node_pool, platform, synthesize

from infra.synth import Synthesis

PLATFORM = "gpu-platform:gcp:GcpPlatform"
PROVIDER = "pulumi:providers:kubernetes"


@pytest.fixture(scope="module")
def dev(synthesized: Callable[[str], Synthesis]) -> Synthesis:
    return synthesized("dev-gcp")


@pytest.fixture(scope="module")
def prod(synthesized: Callable[[str], Synthesis]) -> Synthesis:
    return synthesized("prod-gcp")


@pytest.fixture(scope="module")
def variant() -> Synthesis:
    """dev-gcp without GKE's device plugin (the operator brings one), an existing network,
    auto-provisioning, teams and a reserved, LATEST-driver training pool: the paths the example
    stacks do not take."""
    raw = platform()
    raw["devicePlugin"] = "none"
    raw["scheduling"] = {"teams": [{"name": "vision"}, {"name": "nlp"}]}
    raw["gcp"]["network"] = {
        "existing": {"network": "shared-vpc", "subnetwork": "gke-nodes", "podsRange": "gke-pods", "servicesRange": "gke-svc"}
    }
    raw["gcp"]["nodeAutoProvisioning"] = {
        "enabled": True,
        "maxCpu": 512,
        "maxMemoryGib": 4096,
        "gpuLimits": {"nvidia-l4": 16, "nvidia-tesla-a100": 4, "nvidia-h100-80gb": 16},
    }
    raw["nodePools"].append(
        {
            "name": "h100-train",
            "instanceType": "a3-highgpu-8g",
            "maxNodes": 2,
            "driverVersion": "LATEST",
            "reservation": "h100-block",
            "multiGpuTraining": True,
        }
    )
    return synthesize(raw)


def test_every_gcp_resource_belongs_to_the_platform_component(dev: Synthesis) -> None:
    owned = [r for r in dev.resources if r["type"].startswith("gcp:")]
    assert owned and all(r["parent"] == f"{PLATFORM}::ml-dev" for r in owned)


def test_each_pool_gets_the_accelerator_of_its_machine_type(prod: Synthesis) -> None:
    shapes = {
        pool: (node_pool(prod, pool)["inputs"]["nodeConfig"]["machineType"], accelerator(prod, pool)["type"], accelerator(prod, pool)["count"])
        for pool in ("h100-train", "h200-train", "l4-eval")
    }
    assert shapes == {
        "h100-train": ("a3-highgpu-8g", "nvidia-h100-80gb", 8),
        "h200-train": ("a3-ultragpu-8g", "nvidia-h200-141gb", 8),
        "l4-eval": ("g2-standard-8", "nvidia-l4", 1),
    }


def test_gke_installs_the_driver_the_pool_asks_for(dev: Synthesis, variant: Synthesis) -> None:
    assert accelerator(dev, "l4-shared")["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "DEFAULT"}
    assert accelerator(variant, "h100-train")["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}


def test_only_the_time_sliced_pool_gets_a_sharing_config(dev: Synthesis) -> None:
    assert accelerator(dev, "l4-shared")["gpuSharingConfig"] == {
        "gpuSharingStrategy": "TIME_SHARING",
        "maxSharedClientsPerGpu": 4,
    }
    assert "gpuSharingConfig" not in accelerator(dev, "a100-mig")


def test_the_mig_pool_is_partitioned_by_its_profile(dev: Synthesis) -> None:
    assert accelerator(dev, "a100-mig")["gpuPartitionSize"] == "1g.5gb"


def test_no_pool_shares_through_gke_without_its_plugin(variant: Synthesis) -> None:
    assert all("gpuSharingConfig" not in accelerator(variant, pool) for pool in ("l4-shared", "a100-mig", "h100-train"))


def test_device_plugin_none_labels_every_pool_out_of_gkes(variant: Synthesis) -> None:
    labels = [node_pool(variant, pool)["inputs"]["nodeConfig"]["labels"] for pool in ("l4-shared", "a100-mig", "h100-train")]
    assert all(label["gke-no-default-nvidia-gpu-device-plugin"] == "true" for label in labels)


def test_spot_pools_are_spot_vms_scaled_in_any_zone(dev: Synthesis) -> None:
    pool = node_pool(dev, "l4-shared")["inputs"]
    assert pool["nodeConfig"]["spot"] is True
    assert pool["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 4, "locationPolicy": "ANY"}


def test_on_demand_pools_are_balanced(prod: Synthesis) -> None:
    pool = node_pool(prod, "l4-eval")["inputs"]
    assert pool["nodeConfig"]["spot"] is False
    assert pool["autoscaling"] == {"totalMinNodeCount": 1, "totalMaxNodeCount": 3, "locationPolicy": "BALANCED"}


def test_the_autoscaler_owns_every_pools_node_count(prod: Synthesis) -> None:
    pools = prod.by_type("gcp:container/nodePool:NodePool")
    assert len(pools) == 4
    assert all(r["options"]["ignoreChanges"] == ["initialNodeCount", "nodeCount"] for r in pools)


def test_gpu_pools_declare_the_gpu_taint_and_pool_labels(dev: Synthesis) -> None:
    config = node_pool(dev, "l4-shared")["inputs"]["nodeConfig"]
    assert config["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
    assert config["labels"] == {
        "gpu-platform.io/pool": "l4-shared",
        "gpu-platform.io/gpu-model": "L4",
        "nvidia.com/device-plugin.config": "time-slicing-4",
    }


def test_the_system_pool_is_untainted_and_without_gpus(prod: Synthesis) -> None:
    config = node_pool(prod, "system")["inputs"]["nodeConfig"]
    assert (config["machineType"], "taints" in config, "guestAccelerators" in config) == ("e2-standard-4", False, False)


def test_pool_zones_lie_in_the_stacks_region(dev: Synthesis, prod: Synthesis) -> None:
    zones = [
        zone
        for synthesis in (dev, prod)
        for r in synthesis.by_type("gcp:container/nodePool:NodePool")
        for zone in r["inputs"].get("nodeLocations", [])
    ]
    assert zones and all(zone.rsplit("-", 1)[0] == REGION for zone in zones)


def test_gpu_pools_upgrade_without_surge_capacity(prod: Synthesis) -> None:
    assert node_pool(prod, "h100-train")["inputs"]["upgradeSettings"] == {
        "strategy": "SURGE",
        "maxSurge": 0,
        "maxUnavailable": 1,
    }


def test_compact_placement_where_the_spec_asks(prod: Synthesis) -> None:
    assert node_pool(prod, "h100-train")["inputs"]["placementPolicy"] == {"type": "COMPACT"}
    assert "placementPolicy" not in node_pool(prod, "h200-train")["inputs"]


def test_a_reserved_pool_consumes_its_reservation(variant: Synthesis) -> None:
    assert node_pool(variant, "h100-train")["inputs"]["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["h100-block"],
    }


def test_prod_nodes_are_private_and_the_control_plane_is_limited(prod: Synthesis) -> None:
    inputs = cluster(prod)["inputs"]
    assert inputs["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": False}
    assert inputs["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [
            {"cidrBlock": "203.0.113.0/24", "displayName": "office-vpn"},
            {"cidrBlock": "198.51.100.0/24", "displayName": "fleet-manager"},
        ]
    }


def test_prod_cluster_and_bucket_are_protected(prod: Synthesis) -> None:
    assert cluster(prod)["inputs"]["deletionProtection"] is True
    protected = sorted(r["type"] for r in prod.resources if r["options"]["protect"])
    assert protected == ["gcp:container/cluster:Cluster", "gcp:storage/bucket:Bucket"]


def test_dev_can_be_torn_down(dev: Synthesis) -> None:
    assert cluster(dev)["inputs"]["deletionProtection"] is False
    assert not any(r["options"]["protect"] for r in dev.resources)


def test_the_cluster_runs_gke_standard_as_the_spec_says(prod: Synthesis) -> None:
    inputs = cluster(prod)["inputs"]
    assert {k: inputs[k] for k in ("location", "minMasterVersion", "releaseChannel", "removeDefaultNodePool")} == {
        "location": "us-central1",
        "minMasterVersion": "1.35",
        "releaseChannel": {"channel": "STABLE"},
        "removeDefaultNodePool": True,
    }
    assert (inputs["datapathProvider"], inputs["workloadIdentityConfig"]) == (
        "ADVANCED_DATAPATH",
        {"workloadPool": "my-ml-prod.svc.id.goog"},
    )


def test_a_zonal_dev_cluster_lives_in_its_zone(dev: Synthesis) -> None:
    assert cluster(dev)["inputs"]["location"] == "us-central1-a"


def test_the_autoscaler_optimizes_utilization(dev: Synthesis) -> None:
    assert cluster(dev)["inputs"]["clusterAutoscaling"] == {"enabled": False, "autoscalingProfile": "OPTIMIZE_UTILIZATION"}


def test_auto_provisioning_limits_gpus_by_accelerator_type(variant: Synthesis) -> None:
    autoscaling = cluster(variant)["inputs"]["clusterAutoscaling"]
    limits = {limit["resourceType"]: limit["maximum"] for limit in autoscaling["resourceLimits"]}
    assert autoscaling["enabled"] is True
    assert limits == {"cpu": 512, "memory": 4096, "nvidia-h100-80gb": 16, "nvidia-l4": 16, "nvidia-tesla-a100": 4}


def test_dcgm_metrics_go_to_managed_prometheus(dev: Synthesis) -> None:
    """With the managed backend (the default on gcp) GKE's kube state and kubelet packages too
    (docs/observability.md)."""
    assert cluster(dev)["inputs"]["monitoringConfig"] == {
        "enableComponents": [
            "SYSTEM_COMPONENTS", "DCGM", "POD", "DAEMONSET", "DEPLOYMENT", "STATEFULSET", "JOBSET", "KUBELET", "CADVISOR"
        ],
        "managedPrometheus": {"enabled": True},
    }


def test_without_dcgm_gke_collects_no_gpu_metrics() -> None:
    raw = platform()
    raw["monitoring"] = {"dcgm": False}
    assert "DCGM" not in cluster(synthesize(raw))["inputs"]["monitoringConfig"]["enableComponents"]


def test_without_dcgm_or_a_managed_prometheus_gke_collects_nothing() -> None:
    raw = platform()
    raw["monitoring"] = {"dcgm": False}
    raw["observability"] = {"prometheus": "none"}
    assert "monitoringConfig" not in cluster(synthesize(raw))["inputs"]


def test_a_new_network_has_pod_and_service_ranges_and_nat(dev: Synthesis) -> None:
    subnet = dev.one("gcp:compute/subnetwork:Subnetwork", "ml-dev-subnet")["inputs"]
    assert subnet["secondaryIpRanges"] == [
        {"rangeName": "ml-dev-pods", "ipCidrRange": "10.16.0.0/14"},
        {"rangeName": "ml-dev-services", "ipCidrRange": "10.20.0.0/20"},
    ]
    assert cluster(dev)["inputs"]["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": "ml-dev-pods",
        "servicesSecondaryRangeName": "ml-dev-services",
    }
    assert dev.one("gcp:compute/routerNat:RouterNat", "ml-dev-nat")["inputs"]["natIpAllocateOption"] == "AUTO_ONLY"


def test_an_existing_network_is_used_as_it_is(variant: Synthesis) -> None:
    inputs = cluster(variant)["inputs"]
    assert (inputs["network"], inputs["subnetwork"], inputs["ipAllocationPolicy"]) == (
        "shared-vpc",
        "gke-nodes",
        {"clusterSecondaryRangeName": "gke-pods", "servicesSecondaryRangeName": "gke-svc"},
    )
    # The stack makes no network of its own; the GPUDirect pool's GPU networks are not the cluster's.
    made = [r["inputs"].get("name") for r in variant.resources if r["type"].startswith("gcp:compute/")]
    assert made and all(str(name).startswith("ml-dev-h100-train-gpu-") for name in made)


def test_the_bucket_is_private_versioned_and_expires_old_versions(dev: Synthesis) -> None:
    bucket = dev.one("gcp:storage/bucket:Bucket", "ml-dev-dev-training")["inputs"]
    assert (bucket["uniformBucketLevelAccess"], bucket["publicAccessPrevention"], bucket["versioning"]) == (
        True,
        "enforced",
        {"enabled": True},
    )
    assert [rule["action"]["type"] for rule in bucket["lifecycleRules"]] == ["Delete", "AbortIncompleteMultipartUpload"]
    assert bucket["location"] == "US-CENTRAL1"


def test_a_team_s_trainer_may_use_its_own_folder_and_read_datasets_only(dev: Synthesis) -> None:
    [team] = [t["name"] for t in platform()["scheduling"]["teams"]][:1]
    trainer = f"serviceAccount:ml-dev-t-{team}@my-ml-dev.iam.gserviceaccount.com"
    grants = sorted(
        (r["type"], r["inputs"].get("bucket"), r["inputs"].get("managedFolder"), r["inputs"]["role"])
        for r in dev.resources
        if r["inputs"].get("member") == trainer
    )
    folder = "gcp:storage/managedFolderIamMember:ManagedFolderIamMember"
    assert grants == [
        (folder, "ml-dev-dev-training", "datasets/", "roles/storage.objectViewer"),
        (folder, "ml-dev-dev-training", f"teams/{team}/", "roles/storage.objectUser"),
    ]


def test_without_teams_one_trainer_may_use_objects_in_that_bucket_only() -> None:
    raw = platform()
    raw.pop("scheduling")
    result = synthesize(raw)
    trainer = "serviceAccount:ml-dev-trainer@my-ml-dev.iam.gserviceaccount.com"
    grants = [(r["type"], r["inputs"].get("bucket"), r["inputs"]["role"]) for r in result.resources if r["inputs"].get("member") == trainer]
    assert grants == [("gcp:storage/bucketIAMMember:BucketIAMMember", "ml-dev-dev-training", "roles/storage.objectUser")]
    assert result.outputs["trainerServiceAccount"] == "ml-dev-trainer@my-ml-dev.iam.gserviceaccount.com"


def test_each_team_namespace_s_trainer_acts_as_its_team_s_identity(variant: Synthesis) -> None:
    bindings = variant.by_type("gcp:serviceaccount/iAMMember:IAMMember")
    assert sorted((r["inputs"]["member"], r["inputs"]["serviceAccountId"]) for r in bindings) == [
        (
            "serviceAccount:my-ml-dev.svc.id.goog[nlp/trainer]",
            "projects/my-ml-dev/serviceAccounts/ml-dev-t-nlp@my-ml-dev.iam.gserviceaccount.com",
        ),
        (
            "serviceAccount:my-ml-dev.svc.id.goog[vision/trainer]",
            "projects/my-ml-dev/serviceAccounts/ml-dev-t-vision@my-ml-dev.iam.gserviceaccount.com",
        ),
    ]
    assert {r["inputs"]["role"] for r in bindings} == {"roles/iam.workloadIdentityUser"}


def test_workload_identity_bindings_wait_for_the_cluster(dev: Synthesis) -> None:
    bindings = dev.by_type("gcp:serviceaccount/iAMMember:IAMMember")
    assert bindings and all("gcp:container/cluster:Cluster::ml-dev" in r["options"]["dependsOn"] for r in bindings)


def test_nodes_run_as_their_own_service_account(dev: Synthesis) -> None:
    nodes = "ml-dev-nodes@my-ml-dev.iam.gserviceaccount.com"
    pools = dev.by_type("gcp:container/nodePool:NodePool")
    assert {r["inputs"]["nodeConfig"]["serviceAccount"] for r in pools} == {nodes}
    assert all(r["inputs"]["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"} for r in pools)


def test_nodes_may_pull_from_the_registry(dev: Synthesis) -> None:
    pull = dev.one("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember", "ml-dev-nodes-pull")["inputs"]
    assert (pull["role"], pull["member"]) == (
        "roles/artifactregistry.reader",
        "serviceAccount:ml-dev-nodes@my-ml-dev.iam.gserviceaccount.com",
    )


def test_the_registry_is_a_docker_repository_in_the_region(dev: Synthesis) -> None:
    repository = dev.one("gcp:artifactregistry/repository:Repository", "ml-dev-images")["inputs"]
    assert (repository["format"], repository["location"]) == ("DOCKER", REGION)


def test_outputs_tell_users_how_to_reach_the_platform(dev: Synthesis) -> None:
    outputs: dict[str, Any] = dev.outputs
    assert {k: outputs[k] for k in ("clusterName", "clusterLocation", "registryUrl", "bucketName", "nodePools")} == {
        "clusterName": "ml-dev",
        "clusterLocation": "us-central1-a",
        "registryUrl": "us-central1-docker.pkg.dev/my-ml-dev/ml-dev-images",
        "bucketName": "ml-dev-dev-training",
        "nodePools": {"l4-shared": "l4-shared", "a100-mig": "a100-mig"},
    }
    assert outputs["kubeconfig"] == "[secret]"


def test_the_kubernetes_provider_reaches_the_cluster_once_nodes_exist(dev: Synthesis) -> None:
    provider = dev.one(PROVIDER, "ml-dev-k8s")
    assert (provider["inputs"]["kubeconfig"], provider["inputs"]["enableServerSideApply"]) == ("[secret]", "true")
    assert {"gcp:container/nodePool:NodePool::ml-dev-system", "gcp:compute/routerNat:RouterNat::ml-dev-nat"} <= set(
        provider["options"]["dependsOn"]
    )


def test_the_same_spec_synthesizes_the_same_resources(dev: Synthesis) -> None:
    assert synthesize(platform()).resources == dev.resources


def test_gke_deletion_protection_follows_the_stack_file() -> None:
    raw = platform("prod-gcp")
    raw["cluster"]["deletionProtection"] = False
    assert cluster(synthesize(raw, "prod-gcp"))["inputs"]["deletionProtection"] is False

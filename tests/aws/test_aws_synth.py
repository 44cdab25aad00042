"""What `pulumi up` would declare on AWS, read from the offline synth (resolved values).

dev-aws: two spot L4 pools scaled to zero; prod-aws: on-demand H100/H200 pools with EFA and an
always-on L4 pool. A few variants (Bottlerocket, an existing VPC) synthesize from a copy of
dev-aws with one change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
from aws_support import variant
from helpers import REFERENCE, REPO

from components.aws import plan
from components.facts import aws as aws_facts
from components.jobs import renderer
from infra import offline, stackfile
from infra.synth import Synthesis

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
ASG_TAG = "aws:autoscaling/tag:Tag"
RELEASE = "kubernetes:helm.sh/v3:Release"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"

Synth = Callable[[str], Synthesis]


def node_group(result: Synthesis, name: str) -> dict[str, Any]:
    return result.one(NODE_GROUP, name)


def asg_tags(result: Synthesis, group: str) -> dict[str, str]:
    tags = [r["inputs"] for r in result.by_type(ASG_TAG) if r["parent"] == f"gpu-platform:aws:GpuNodeGroup::{group}"]
    return {t["tag"]["key"]: t["tag"]["value"] for t in tags}


def policies(result: Synthesis) -> list[dict[str, Any]]:
    """Every IAM policy document the stack declares: inline role policies and trust policies."""
    documents = [json.loads(r["inputs"]["policy"]) for r in result.by_type(ROLE_POLICY)]
    return documents + [json.loads(r["inputs"]["assumeRolePolicy"]) for r in result.by_type(ROLE)]


# --- GPU node groups ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "instance", "capacity", "min_max"),
    [
        ("ml-dev-l4-shared", "g6.xlarge", "SPOT", (0, 4)),
        ("ml-dev-l4-train", "g6.12xlarge", "SPOT", (0, 2)),
    ],
)
def test_each_pool_is_a_node_group_of_its_instance_type_and_capacity(
    dev: Synthesis, group: str, instance: str, capacity: str, min_max: tuple[int, int]
) -> None:
    inputs = node_group(dev, group)["inputs"]
    assert inputs["instanceTypes"] == [instance]
    assert inputs["capacityType"] == capacity
    assert inputs["amiType"] == "AL2023_x86_64_NVIDIA"
    scaling = inputs["scalingConfig"]
    assert (scaling["minSize"], scaling["maxSize"]) == min_max


def test_prod_pools_are_on_demand(prod: Synthesis) -> None:
    groups = [g for g in prod.by_type(NODE_GROUP) if g["parent"].startswith("gpu-platform:aws:GpuNodeGroup")]
    assert {g["inputs"]["capacityType"] for g in groups} == {"ON_DEMAND"}
    assert len(groups) == 3


def test_the_autoscaler_owns_the_desired_size(dev: Synthesis, prod: Synthesis) -> None:
    for group in dev.by_type(NODE_GROUP) + prod.by_type(NODE_GROUP):
        assert "scalingConfig.desiredSize" in group["options"]["ignoreChanges"], group["name"]


def test_an_always_on_pool_starts_at_its_minimum(prod: Synthesis) -> None:
    scaling = node_group(prod, "ml-prod-l4-eval")["inputs"]["scalingConfig"]
    assert (scaling["minSize"], scaling["desiredSize"]) == (1, 1)


def test_gpu_nodes_carry_the_gpu_taint(dev: Synthesis) -> None:
    taints = node_group(dev, "ml-dev-l4-train")["inputs"]["taints"]
    assert taints == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]


def test_gpu_nodes_carry_pool_model_plugin_config_and_accelerator_labels(dev: Synthesis) -> None:
    labels = node_group(dev, "ml-dev-l4-shared")["inputs"]["labels"]
    assert labels == {
        "gpu-platform.io/pool": "l4-shared",
        "gpu-platform.io/gpu-model": "L4",
        "nvidia.com/device-plugin.config": "time-slicing-4",
        "k8s.amazonaws.com/accelerator": "nvidia-l4",
    }


@pytest.mark.parametrize(("group", "gpus"), [("ml-dev-l4-shared", "4"), ("ml-dev-l4-train", "4")])
def test_asg_template_advertises_what_a_node_will(dev: Synthesis, group: str, gpus: str) -> None:
    assert asg_tags(dev, group)["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == gpus


def test_a_p5_asg_template_advertises_eight_gpus(prod: Synthesis) -> None:
    assert asg_tags(prod, "ml-prod-h100-train")["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "8"


@pytest.mark.parametrize(("pool", "nodes"), [("h100-train", 8), ("h200-train", 4)])
def test_efa_asg_templates_advertise_the_efa_devices_their_jobs_request(prod: Synthesis, pool: str, nodes: int) -> None:
    spec = stackfile.read("prod-aws", REPO).spec()
    args = ["--preset", "tiny", "--max-steps", "1", "--checkpoint-every", "1", "--global-batch-size", str(nodes * 8),
            "--seq-len", "128", "--seed", "0", "--data", "/data/x"]
    jobset = renderer.render(spec, renderer.JobRequest(pool, nodes, 8, "research", "production", image="ghcr.io/a/t:1", trainer_args=args))
    requested = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]
    tag = asg_tags(prod, f"ml-prod-{pool}")["k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa"]
    assert tag == requested["requests"]["vpc.amazonaws.com/efa"]


def test_an_efa_asg_template_advertises_the_huge_pages_the_instance_pre_allocates(prod: Synthesis) -> None:
    # 110 x 192 + 1 pages of 2 MiB (a p5.48xlarge, components.facts.aws), as a quantity resource.ParseQuantity reads.
    assert asg_tags(prod, "ml-prod-h100-train")["k8s.io/cluster-autoscaler/node-template/resources/hugepages-2Mi"] == "42242Mi"


def test_a_pool_without_efa_advertises_no_huge_pages(prod: Synthesis) -> None:
    assert not any("hugepages" in key for key in asg_tags(prod, "ml-prod-l4-eval"))


def test_asg_template_repeats_every_node_label_and_the_taint(dev: Synthesis) -> None:
    tags = asg_tags(dev, "ml-dev-l4-shared")
    labels = node_group(dev, "ml-dev-l4-shared")["inputs"]["labels"]
    for key, value in labels.items():
        assert tags[f"k8s.io/cluster-autoscaler/node-template/label/{key}"] == value
    assert tags["k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"] == "present:NoSchedule"
    assert tags["k8s.io/cluster-autoscaler/enabled"] == "true"
    assert tags["k8s.io/cluster-autoscaler/ml-dev"] == "owned"


def test_asg_tags_go_on_the_node_groups_asg_and_not_on_instances(dev: Synthesis) -> None:
    tags = [r for r in dev.by_type(ASG_TAG) if "l4-train" in r["name"]]
    assert {t["inputs"]["autoscalingGroupName"] for t in tags} == {
        "eks-ml-dev-l4-train-00000000-0000-0000-0000-000000000000"
    }
    assert {t["inputs"]["tag"]["propagateAtLaunch"] for t in tags} == {False}


def test_every_node_requires_imdsv2_with_one_hop(dev: Synthesis, prod: Synthesis) -> None:
    for template in dev.by_type(LAUNCH_TEMPLATE) + prod.by_type(LAUNCH_TEMPLATE):
        metadata = template["inputs"]["metadataOptions"]
        assert (metadata["httpTokens"], metadata["httpPutResponseHopLimit"]) == ("required", 1), template["name"]


def test_every_node_volume_is_encrypted_gp3_of_the_pools_size(prod: Synthesis) -> None:
    sizes = {}
    for template in prod.by_type(LAUNCH_TEMPLATE):
        (device,) = template["inputs"]["blockDeviceMappings"]
        assert (device["ebs"]["encrypted"], device["ebs"]["volumeType"]) == ("true", "gp3")
        sizes[template["name"]] = device["ebs"]["volumeSize"]
    assert sizes["ml-prod-h100-train"] == 500 and sizes["ml-prod-l4-eval"] == 200


def test_each_node_group_launches_from_its_template(dev: Synthesis) -> None:
    template = node_group(dev, "ml-dev-l4-train")["inputs"]["launchTemplate"]
    assert template["id"] == "ml-dev-l4-train-id"


def test_efa_pools_get_a_cluster_placement_group_and_one_efa_per_card(prod: Synthesis) -> None:
    template = prod.one(LAUNCH_TEMPLATE, "ml-prod-h100-train")["inputs"]
    group = prod.one("aws:ec2/placementGroup:PlacementGroup", "ml-prod-h100-train")["inputs"]
    assert group["strategy"] == "cluster"
    assert template["placement"]["groupName"] == group["name"]
    interfaces = template["networkInterfaces"]
    assert len(interfaces) == aws_facts.EFA_NETWORK_CARDS["p5.48xlarge"]
    assert {i["securityGroups"][0] for i in interfaces} == {"sg-ml-prod-cluster"}


def test_efa_pools_run_in_one_zone(prod: Synthesis) -> None:
    assert len(node_group(prod, "ml-prod-h100-train")["inputs"]["subnetIds"]) == 1
    assert len(node_group(prod, "ml-prod-l4-eval")["inputs"]["subnetIds"]) == 3


def test_pools_without_efa_get_no_placement_group_or_interfaces(prod: Synthesis) -> None:
    template = prod.one(LAUNCH_TEMPLATE, "ml-prod-l4-eval")["inputs"]
    assert "networkInterfaces" not in template and "placement" not in template
    assert len(prod.by_type("aws:ec2/placementGroup:PlacementGroup")) == 2


def test_the_efa_device_plugin_is_installed_only_with_efa_pools(dev: Synthesis, prod: Synthesis) -> None:
    names = lambda result: {r["inputs"]["chart"] for r in result.by_type(RELEASE)}  # noqa: E731
    assert "aws-efa-k8s-device-plugin" in names(prod)
    assert "aws-efa-k8s-device-plugin" not in names(dev)


def test_bottlerocket_pools_size_the_data_volume(tmp_path: Path) -> None:
    def bottlerocket(platform: dict[str, Any]) -> None:
        for pool in platform["nodePools"]:
            pool["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"
            pool.pop("sharing", None)
        # Without sharing the pools hold fewer GPU slots than the example teams' quotas.
        platform.pop("scheduling", None)

    result = variant(tmp_path, bottlerocket)
    assert node_group(result, "ml-dev-l4-train")["inputs"]["amiType"] == "BOTTLEROCKET_x86_64_NVIDIA"
    device = result.one(LAUNCH_TEMPLATE, "ml-dev-l4-train")["inputs"]["blockDeviceMappings"][0]
    assert device["deviceName"] == "/dev/xvdb"


# --- cluster -----------------------------------------------------------------------------


def cluster(result: Synthesis) -> dict[str, Any]:
    (found,) = result.by_type("aws:eks/cluster:Cluster")
    return found


def test_dev_endpoint_is_public(dev: Synthesis) -> None:
    assert cluster(dev)["inputs"]["vpcConfig"]["endpointPublicAccess"] is True


def test_prod_endpoint_is_public_only_to_the_fleet_manager_s_range(prod: Synthesis) -> None:
    # prod-aws is a fleet worker: its API admits the manager's egress range alone (docs/fleet.md).
    config = cluster(prod)["inputs"]["vpcConfig"]
    assert config["endpointPublicAccess"] is True
    assert config["publicAccessCidrs"] == ["198.51.100.0/24"]
    assert config["endpointPrivateAccess"] is True


def test_the_cluster_runs_the_specs_kubernetes_version(dev: Synthesis) -> None:
    assert cluster(dev)["inputs"]["version"] == "1.35"


def test_the_cluster_authenticates_with_access_entries(dev: Synthesis) -> None:
    assert cluster(dev)["inputs"]["accessConfig"]["authenticationMode"] == "API"


def test_secrets_are_encrypted_with_the_clusters_kms_key(dev: Synthesis) -> None:
    encryption = cluster(dev)["inputs"]["encryptionConfig"]
    key = dev.one("aws:kms/key:Key", "ml-dev-secrets")
    assert encryption["resources"] == ["secrets"]
    assert encryption["provider"]["keyArn"] == "arn:aws:kms:us-west-2:000000000000:key/ml-dev-secrets"
    assert key["inputs"]["enableKeyRotation"] is True


def test_every_control_plane_log_is_on(dev: Synthesis) -> None:
    assert set(cluster(dev)["inputs"]["enabledClusterLogTypes"]) == set(aws_facts.CONTROL_PLANE_LOG_TYPES)


def test_core_addons_are_pinned_for_the_clusters_minor(dev: Synthesis) -> None:
    addons = {a["inputs"]["addonName"]: a["inputs"]["addonVersion"] for a in dev.by_type("aws:eks/addon:Addon")}
    assert addons == aws_facts.ADDON_VERSIONS["1.35"]


def test_an_oidc_provider_serves_the_clusters_issuer(dev: Synthesis) -> None:
    (provider,) = dev.by_type("aws:iam/openIdConnectProvider:OpenIdConnectProvider")
    assert provider["inputs"]["url"] == "https://oidc.eks.us-west-2.mock.internal/id/ml-dev"
    assert provider["inputs"]["clientIdLists"] == ["sts.amazonaws.com"]


def test_admins_get_cluster_admin_access_entries(tmp_path: Path) -> None:
    admin = "arn:aws:iam::111122223333:role/platform-admins"
    result = variant(tmp_path, lambda p: p.update(aws={"admins": [admin]}))
    (entry,) = result.by_type("aws:eks/accessEntry:AccessEntry")
    (association,) = result.by_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert entry["inputs"]["principalArn"] == admin
    assert association["inputs"]["policyArn"].endswith("/AmazonEKSClusterAdminPolicy")
    assert association["inputs"]["accessScope"] == {"type": "cluster"}


def test_the_system_node_group_is_small_and_on_demand(dev: Synthesis) -> None:
    (system,) = [g for g in dev.by_type(NODE_GROUP) if g["parent"] == "gpu-platform:aws:EksCluster::ml-dev"]
    assert system["inputs"]["capacityType"] == "ON_DEMAND"
    assert system["inputs"]["labels"] == {plan.SYSTEM_ROLE_LABEL: plan.SYSTEM_ROLE}
    assert "taints" not in system["inputs"]


@pytest.mark.parametrize("type_token", ["aws:eks/cluster:Cluster", "aws:s3/bucket:Bucket"])
def test_cluster_and_bucket_are_protected_in_prod(prod: Synthesis, type_token: str) -> None:
    assert all(r["options"]["protect"] for r in prod.by_type(type_token))


def test_kms_keys_are_protected_in_prod(prod: Synthesis) -> None:
    keys = prod.by_type("aws:kms/key:Key")
    assert len(keys) == 2 and all(k["options"]["protect"] for k in keys)


def test_nothing_is_protected_in_dev(dev: Synthesis) -> None:
    assert not [r["name"] for r in dev.resources if r["options"]["protect"]]


# --- network -----------------------------------------------------------------------------


def test_a_new_vpc_has_private_subnets_in_three_zones(dev: Synthesis) -> None:
    private = [s for s in dev.by_type("aws:ec2/subnet:Subnet") if "kubernetes.io/role/internal-elb" in s["inputs"]["tags"]]
    assert sorted(s["inputs"]["availabilityZone"] for s in private) == ["us-west-2a", "us-west-2b", "us-west-2c"]
    assert all(s["inputs"]["tags"]["kubernetes.io/cluster/ml-dev"] == "shared" for s in private)


def test_public_subnets_are_tagged_for_internet_load_balancers(dev: Synthesis) -> None:
    public = [s for s in dev.by_type("aws:ec2/subnet:Subnet") if "kubernetes.io/role/elb" in s["inputs"]["tags"]]
    assert len(public) == 3


def test_dev_shares_one_nat_and_prod_has_one_per_zone(dev: Synthesis, prod: Synthesis) -> None:
    assert len(dev.by_type("aws:ec2/natGateway:NatGateway")) == 1
    assert len(prod.by_type("aws:ec2/natGateway:NatGateway")) == 3


def test_an_existing_vpc_is_used_as_given(tmp_path: Path) -> None:
    subnets = {"us-west-2a": "subnet-0aaaaaaaaaaaaaaaa", "us-west-2b": "subnet-0bbbbbbbbbbbbbbbb"}
    result = variant(tmp_path, lambda p: p.update(aws={"network": {"vpcId": "vpc-0123456789abcdef0", "subnetIds": subnets}}))
    assert result.by_type("aws:ec2/vpc:Vpc") == [] and result.by_type("aws:ec2/subnet:Subnet") == []
    assert cluster(result)["inputs"]["vpcConfig"]["subnetIds"] == sorted(subnets.values())


# --- autoscaler --------------------------------------------------------------------------


def autoscaler(result: Synthesis) -> dict[str, Any]:
    (release,) = [r for r in result.by_type(RELEASE) if r["inputs"]["chart"] == "cluster-autoscaler"]
    return release


def value_paths(values: Any, prefix: str = "") -> list[str]:
    if isinstance(values, dict) and values:
        return [p for key, v in values.items() for p in value_paths(v, f"{prefix}.{key}" if prefix else key)]
    return [prefix]


def test_autoscaler_values_are_keys_the_chart_reads(dev: Synthesis) -> None:
    keys = json.loads((REFERENCE / "charts" / "cluster-autoscaler-9.59.0.keys.json").read_text())
    known = set(keys["referenced"])
    passthrough = keys["passthrough"]
    unknown = [
        path
        for path in value_paths(autoscaler(dev)["inputs"]["values"])
        if path not in known and not any(path.startswith(f"{p}.") for p in passthrough)
    ]
    assert unknown == []


def test_autoscaler_chart_is_pinned(dev: Synthesis) -> None:
    inputs = autoscaler(dev)["inputs"]
    assert (inputs["chart"], inputs["version"], inputs["repositoryOpts"]["repo"]) == (
        "cluster-autoscaler",
        "9.59.0",
        "https://kubernetes.github.io/autoscaler",
    )


def test_autoscaler_discovers_this_clusters_groups(dev: Synthesis) -> None:
    values = autoscaler(dev)["inputs"]["values"]
    assert values["autoDiscovery"]["clusterName"] == "ml-dev"
    assert values["cloudProvider"] == "aws" and values["awsRegion"] == "us-west-2"


def test_autoscaler_prefers_priorities_then_least_waste(dev: Synthesis) -> None:
    args = autoscaler(dev)["inputs"]["values"]["extraArgs"]
    assert args["expander"] == "priority,least-waste"
    assert args["balance-similar-node-groups"] is True


def test_priority_table_names_every_pools_asg(dev: Synthesis) -> None:
    table = autoscaler(dev)["inputs"]["values"]["expanderPriorities"]
    assert table[str(plan.SPOT_PRIORITY)] == [
        "^eks-ml-dev-l4-shared-00000000-0000-0000-0000-000000000000$",
        "^eks-ml-dev-l4-train-00000000-0000-0000-0000-000000000000$",
    ]


def test_autoscaler_uses_its_irsa_role(dev: Synthesis) -> None:
    values = autoscaler(dev)["inputs"]["values"]
    account = values["rbac"]["serviceAccount"]
    assert account["name"] == plan.AUTOSCALER_SERVICE_ACCOUNT
    assert account["annotations"]["eks.amazonaws.com/role-arn"] == "arn:aws:iam::000000000000:role/ml-dev-cluster-autoscaler"


def test_autoscaler_runs_on_system_nodes(dev: Synthesis) -> None:
    assert autoscaler(dev)["inputs"]["values"]["nodeSelector"] == {plan.SYSTEM_ROLE_LABEL: plan.SYSTEM_ROLE}


def test_kubernetes_resources_go_to_the_eks_provider(dev: Synthesis, prod: Synthesis) -> None:
    for result, name in ((dev, "ml-dev"), (prod, "ml-prod")):
        releases = result.by_type(RELEASE)
        assert releases and {r["provider"] for r in releases} == {f"pulumi:providers:kubernetes::{name}-k8s"}


def test_the_eks_provider_applies_server_side(dev: Synthesis) -> None:
    (provider,) = dev.by_type("pulumi:providers:kubernetes")
    assert provider["inputs"]["enableServerSideApply"] == "true"
    assert provider["inputs"]["kubeconfig"] == "[secret]"


# --- IAM ---------------------------------------------------------------------------------


def allows(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in document["Statement"] if s["Effect"] == "Allow"]


def as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


@pytest.mark.parametrize("stack", ["dev-aws", "prod-aws"])
def test_no_policy_allows_wildcard_actions_on_every_resource(synthesized: Synth, stack: str) -> None:
    for document in policies(synthesized(stack)):
        for statement in allows(document):
            actions = as_list(statement["Action"])
            wildcard = any(a == "*" or a.endswith(":*") for a in actions)
            assert not (wildcard and "*" in as_list(statement.get("Resource", []))), statement


def test_unscoped_resources_are_only_granted_read_only_discovery(dev: Synthesis) -> None:
    for document in policies(dev):
        for statement in allows(document):
            if "*" in as_list(statement.get("Resource", [])):
                assert all(":Describe" in a or ":Get" in a for a in as_list(statement["Action"])), statement


def test_autoscaler_may_resize_only_this_clusters_groups(dev: Synthesis) -> None:
    (document,) = [json.loads(p["inputs"]["policy"]) for p in dev.by_type(ROLE_POLICY) if p["name"] == "ml-dev-cluster-autoscaler"]
    (scale,) = [s for s in allows(document) if "autoscaling:SetDesiredCapacity" in s["Action"]]
    assert scale["Condition"]["StringEquals"] == {"aws:ResourceTag/k8s.io/cluster-autoscaler/ml-dev": "owned"}


def trust(result: Synthesis, role: str) -> dict[str, Any]:
    return json.loads(result.one(ROLE, role)["inputs"]["assumeRolePolicy"])


def test_the_autoscaler_role_trusts_only_its_service_account(dev: Synthesis) -> None:
    (statement,) = trust(dev, "ml-dev-cluster-autoscaler")["Statement"]
    conditions = statement["Condition"]["StringEquals"]
    assert conditions["oidc.eks.us-west-2.mock.internal/id/ml-dev:sub"] == [
        "system:serviceaccount:kube-system:cluster-autoscaler"
    ]
    assert conditions["oidc.eks.us-west-2.mock.internal/id/ml-dev:aud"] == "sts.amazonaws.com"
    assert statement["Principal"]["Federated"].endswith(":oidc-provider/oidc.eks.us-west-2.mock.internal/id/ml-dev")


def test_each_team_s_trainer_role_trusts_only_that_team_s_trainer_account(tmp_path: Path) -> None:
    result = variant(tmp_path, lambda p: p.update(scheduling={"teams": [{"name": "vision"}, {"name": "nlp"}]}))
    for team in ("vision", "nlp"):
        (statement,) = trust(result, f"ml-dev-storage-trainer-{team}")["Statement"]
        assert statement["Condition"]["StringEquals"]["oidc.eks.us-west-2.mock.internal/id/ml-dev:sub"] == [
            f"system:serviceaccount:{team}:trainer"
        ]


def test_a_team_s_trainer_reads_and_writes_only_its_prefix_and_reads_datasets(prod: Synthesis) -> None:
    document = json.loads(prod.one(ROLE_POLICY, "ml-prod-storage-trainer-research")["inputs"]["policy"])
    by_sid = {s["Sid"]: s for s in allows(document)}
    assert by_sid["ReadWriteOwnObjects"]["Resource"] == ["arn:aws:s3:::ml-prod-prod-training/teams/research/*"]
    assert by_sid["ReadDatasets"] == {
        "Sid": "ReadDatasets",
        "Effect": "Allow",
        "Action": "s3:GetObject",
        "Resource": ["arn:aws:s3:::ml-prod-prod-training/datasets/*"],
    }
    assert by_sid["ListOwnObjects"]["Condition"] == {
        "StringLike": {"s3:prefix": ["teams/research/", "teams/research/*", "datasets/", "datasets/*"]}
    }


def test_each_team_s_trainer_account_is_annotated_with_its_own_role(prod: Synthesis) -> None:
    for team in ("research", "applied"):
        account = prod.one("kubernetes:core/v1:ServiceAccount", f"ml-prod-gpu-{team}-trainer")["inputs"]
        assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].endswith(f"ml-prod-storage-trainer-{team}")


def test_team_members_get_access_entries_in_their_team_s_group_and_no_access_policy(prod: Synthesis) -> None:
    entry = prod.one("aws:eks/accessEntry:AccessEntry", "ml-prod-access-role-research-engineers")
    assert entry["inputs"]["kubernetesGroups"] == ["gpu-platform:team:research"]
    associations = [r["inputs"]["principalArn"] for r in prod.by_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")]
    assert "arn:aws:iam::111122223333:role/research-engineers" not in associations


def test_without_teams_the_trainer_may_use_only_the_training_bucket_and_its_key(tmp_path: Path) -> None:
    result = variant(tmp_path, lambda p: p.pop("scheduling"))
    assert result.outputs["trainerRoleArn"] == result.outputs["trainerRoleArns"]["default"]
    document = json.loads(result.one(ROLE_POLICY, "ml-dev-storage-trainer-role")["inputs"]["policy"])
    resources = {r for s in allows(document) for r in as_list(s["Resource"])}
    assert resources == {
        "arn:aws:s3:::ml-dev-dev-training",
        "arn:aws:s3:::ml-dev-dev-training/*",
        "arn:aws:kms:us-west-2:000000000000:key/ml-dev-storage-data",
    }


# --- registry and bucket -----------------------------------------------------------------


def test_the_registry_scans_on_push_and_keeps_tags_immutable(dev: Synthesis) -> None:
    (repository,) = dev.by_type("aws:ecr/repository:Repository")
    assert repository["inputs"]["imageScanningConfiguration"] == {"scanOnPush": True}
    assert repository["inputs"]["imageTagMutability"] == "IMMUTABLE"
    assert repository["inputs"]["name"] == "ml-dev/trainer"
    assert len(dev.by_type("aws:ecr/lifecyclePolicy:LifecyclePolicy")) == 1


def test_the_bucket_is_named_from_the_spec_and_versioned(dev: Synthesis) -> None:
    (bucket,) = dev.by_type("aws:s3/bucket:Bucket")
    (versioning,) = dev.by_type("aws:s3/bucketVersioning:BucketVersioning")
    assert bucket["inputs"]["bucket"] == "ml-dev-dev-training"
    assert versioning["inputs"]["versioningConfiguration"]["status"] == "Enabled"


def test_the_bucket_is_kms_encrypted(dev: Synthesis) -> None:
    (encryption,) = dev.by_type("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    (rule,) = encryption["inputs"]["rules"]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"


def test_the_bucket_blocks_every_kind_of_public_access(dev: Synthesis) -> None:
    (block,) = dev.by_type("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    assert all(block["inputs"][flag] is True for flag in flags)


def test_the_bucket_refuses_requests_without_tls(dev: Synthesis) -> None:
    (policy,) = dev.by_type("aws:s3/bucketPolicy:BucketPolicy")
    (statement,) = json.loads(policy["inputs"]["policy"])["Statement"]
    assert statement["Effect"] == "Deny"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


@pytest.mark.parametrize("stack", ["dev-aws", "prod-aws"])
def test_old_versions_of_everything_a_trainer_writes_expire(synthesized: Synth, stack: str) -> None:
    """S3 applies a rule to keys starting with its filter's prefix (S3 lifecycle docs)."""
    result = synthesized(stack)
    (lifecycle,) = result.by_type("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
    rules = {r["id"]: r for r in lifecycle["inputs"]["rules"]}
    checkpoints = rules["expire-old-checkpoint-versions"]
    assert checkpoints["noncurrentVersionExpiration"]["noncurrentDays"] > 0
    prefix = (checkpoints.get("filter") or {}).get("prefix") or ""
    written = [
        resource.split(":::", 1)[1].split("/", 1)[1].rstrip("*")
        for policy in result.by_type("aws:iam/rolePolicy:RolePolicy")
        for statement in json.loads(policy["inputs"]["policy"])["Statement"]
        if "s3:PutObject" in statement["Action"]
        for resource in statement["Resource"]
    ]
    assert written and all(key.startswith(prefix) for key in written)


# --- outputs -----------------------------------------------------------------------------


def test_outputs_tell_users_how_to_reach_everything(dev: Synthesis) -> None:
    outputs = dev.outputs
    assert outputs["kubeconfig"] == "[secret]"
    assert outputs["clusterName"] == "ml-dev"
    assert outputs["oidcIssuer"] == "https://oidc.eks.us-west-2.mock.internal/id/ml-dev"
    assert outputs["bucketName"] == "ml-dev-dev-training"
    assert outputs["registryUrl"].startswith("000000000000.dkr.ecr.us-west-2.")
    assert outputs["nodeGroups"] == {"l4-shared": "ml-dev-l4-shared", "l4-train": "ml-dev-l4-train"}


def test_the_same_spec_gives_the_same_resources(dev: Synthesis) -> None:
    again = offline.synthesize("dev-aws", REPO)[2]
    assert json.dumps(again.resources, sort_keys=True) == json.dumps(dev.resources, sort_keys=True)

"""Each policy rule on hand-built resources, shaped as the engine receives them: one that passes,
one that fails. The wings build these resources; the rules must hold whoever declares them."""

from __future__ import annotations

import dataclasses
import json
from datetime import date
from typing import Any

import pytest

from components.checks import declared
from components.checks.declared import UNKNOWN, Resource
from components.checks.rules import base, lifecycle, pools, registry, scheduling, security
from components.checks.rules.base import Context
from components.facts.rule_catalog import RULES, RULES_BY_ID

DEV = Context(environment="dev", max_nodes_per_pool=16, max_gpus=256, allow_spot=True)
PROD = Context(environment="prod", max_nodes_per_pool=16, max_gpus=256, allow_spot=False)
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}


def res(type_token: str, props: dict[str, Any], name: str = "r", **options: Any) -> Resource:
    return Resource(type=type_token, name=name, props=props, **options)


def node_group(**changes: Any) -> dict[str, Any]:
    """An EKS GPU node group that passes every rule."""
    props: dict[str, Any] = {
        "clusterName": "ml-dev",
        "instanceTypes": ["g6.12xlarge"],
        "amiType": "AL2023_x86_64_NVIDIA",
        "capacityType": "ON_DEMAND",
        "scalingConfig": {"minSize": 0, "maxSize": 4, "desiredSize": 0},
        "taints": [GPU_TAINT],
        "labels": {"gpu-platform.io/pool": "train"},
        "launchTemplate": {"id": "lt-id", "version": "1"},
    }
    return {**props, **changes}


def node_pool(**node_config: Any) -> dict[str, Any]:
    """A GKE GPU node pool that passes every rule."""
    return {
        "cluster": "ml-dev",
        "autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 4},
        "nodeConfig": {
            "machineType": "a3-highgpu-8g",
            "guestAccelerators": [{"type": "nvidia-h100-80gb", "count": 8}],
            "taints": [GPU_TAINT],
            "spot": False,
            **node_config,
        },
    }


def eks(props: dict[str, Any], **options: Any) -> Resource:
    return res(declared.EKS_NODE_GROUP, props, name="ml-dev-train", ignore_changes=("scalingConfig.desiredSize",), **options)


def gke(props: dict[str, Any]) -> Resource:
    return res(declared.GKE_NODE_POOL, props, name="ml-dev-train")


def ids(violations: list[base.Violation]) -> list[str]:
    return [v.rule for v in violations]


# --- the catalog -----------------------------------------------------------------------------


def test_every_catalogued_rule_has_exactly_one_check() -> None:
    assert set(registry.CHECKS) == set(RULES_BY_ID)


def test_every_rule_is_described_and_mandatory_or_advisory() -> None:
    for rule in RULES:
        assert rule.description.endswith(".") and rule.enforcement in ("mandatory", "advisory")


def test_scale_to_zero_is_mandatory_and_overridable() -> None:
    rule = RULES_BY_ID["gpu-pool-scale-to-zero"]
    assert (rule.enforcement, rule.overridable) == ("mandatory", True)


# --- GPU pools ------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [lambda: eks(node_group()), lambda: gke(node_pool())])
def test_a_tainted_gpu_pool_passes(make) -> None:
    assert pools.gpu_pool_tainted([make()], DEV) == []


@pytest.mark.parametrize(
    "resource",
    [eks(node_group(taints=[])), gke(node_pool(taints=[{**GPU_TAINT, "effect": "PREFER_NO_SCHEDULE"}]))],
)
def test_a_gpu_pool_without_the_no_schedule_taint_fails(resource: Resource) -> None:
    assert ids(pools.gpu_pool_tainted([resource], DEV)) == ["gpu-pool-tainted"]


def test_a_cpu_node_group_needs_no_gpu_taint() -> None:
    cpu = node_group(instanceTypes=["m7i.large"], amiType="AL2023_x86_64_STANDARD", labels={}, taints=[])
    assert pools.gpu_pool_tainted([eks(cpu)], DEV) == []


def test_taints_unknown_during_preview_do_not_fail() -> None:
    assert pools.gpu_pool_tainted([eks(node_group(taints=UNKNOWN))], DEV) == []


@pytest.mark.parametrize("env", [DEV, PROD])
def test_a_gpu_pool_at_zero_passes_scale_to_zero(env: Context) -> None:
    assert pools.gpu_pool_scale_to_zero([eks(node_group())], env) == []


def test_a_warm_gpu_pool_in_dev_fails_scale_to_zero() -> None:
    warm = eks(node_group(scalingConfig={"minSize": 1, "maxSize": 4, "desiredSize": 1}))
    assert ids(pools.gpu_pool_scale_to_zero([warm], DEV)) == ["gpu-pool-scale-to-zero"]


def test_a_warm_gke_pool_in_dev_fails_scale_to_zero() -> None:
    warm = node_pool()
    warm["autoscaling"] = {"totalMinNodeCount": 2, "totalMaxNodeCount": 4}
    assert ids(pools.gpu_pool_scale_to_zero([gke(warm)], DEV)) == ["gpu-pool-scale-to-zero"]


def test_a_warm_gpu_pool_in_prod_is_allowed() -> None:
    warm = eks(node_group(scalingConfig={"minSize": 1, "maxSize": 4, "desiredSize": 1}))
    assert pools.gpu_pool_scale_to_zero([warm], PROD) == []


def test_a_pool_within_max_nodes_passes() -> None:
    assert pools.gpu_pool_max_nodes([eks(node_group())], DEV) == []


def test_a_pool_above_max_nodes_fails() -> None:
    big = eks(node_group(scalingConfig={"minSize": 0, "maxSize": 17, "desiredSize": 0}))
    assert ids(pools.gpu_pool_max_nodes([big], DEV)) == ["gpu-pool-max-nodes"]


def test_per_zone_gke_counts_are_multiplied_by_the_zones() -> None:
    pool = node_pool()
    pool["autoscaling"] = {"minNodeCount": 0, "maxNodeCount": 6}
    pool["nodeLocations"] = ["us-central1-a", "us-central1-b", "us-central1-c"]
    assert "18 nodes" in pools.gpu_pool_max_nodes([gke(pool)], DEV)[0].message


def test_gpus_within_the_stack_limit_pass() -> None:
    # 4 nodes x 4 GPUs + 4 nodes x 8 GPUs = 48
    assert pools.stack_max_gpus([eks(node_group()), gke(node_pool())], DEV) == []


def test_gpus_above_the_stack_limit_fail_on_the_stack() -> None:
    tight = Context("dev", 16, 40, True)
    violations = pools.stack_max_gpus([eks(node_group()), gke(node_pool())], tight)
    assert [(v.rule, v.resource) for v in violations] == [("stack-max-gpus", None)]
    assert "48 GPUs" in violations[0].message


def test_spot_where_allowed_passes() -> None:
    assert pools.spot_allowed([eks(node_group(capacityType="SPOT"))], DEV) == []


@pytest.mark.parametrize("resource", [eks(node_group(capacityType="SPOT")), gke(node_pool(spot=True)), gke(node_pool(preemptible=True))])
def test_spot_where_not_allowed_fails(resource: Resource) -> None:
    assert ids(pools.spot_allowed([resource], PROD)) == ["spot-allowed"]


# --- control plane, disks, metadata ---------------------------------------------------------


def test_a_private_eks_endpoint_in_prod_passes() -> None:
    cluster = res(declared.EKS_CLUSTER, {"vpcConfig": {"endpointPublicAccess": False, "endpointPrivateAccess": True}})
    assert security.prod_control_plane_private([cluster], PROD) == []


@pytest.mark.parametrize("vpc", [{"endpointPublicAccess": True}, {"subnetIds": ["s"]}])
def test_a_public_eks_endpoint_in_prod_fails_also_by_default(vpc: dict[str, Any]) -> None:
    cluster = res(declared.EKS_CLUSTER, {"vpcConfig": vpc})
    assert ids(security.prod_control_plane_private([cluster], PROD)) == ["prod-control-plane-private"]


def test_a_prod_eks_endpoint_open_only_to_named_ranges_passes() -> None:
    cluster = res(declared.EKS_CLUSTER, {"vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": ["203.0.113.0/24"]}})
    assert security.prod_control_plane_private([cluster], PROD) == []


def test_a_prod_eks_endpoint_open_to_anyone_fails() -> None:
    cidrs = ["203.0.113.0/24", "0.0.0.0/0"]
    cluster = res(declared.EKS_CLUSTER, {"vpcConfig": {"endpointPublicAccess": True, "publicAccessCidrs": cidrs}})
    assert ids(security.prod_control_plane_private([cluster], PROD)) == ["prod-control-plane-private"]


def test_a_public_endpoint_outside_prod_is_allowed() -> None:
    cluster = res(declared.EKS_CLUSTER, {"vpcConfig": {"endpointPublicAccess": True}})
    assert security.prod_control_plane_private([cluster], DEV) == []


def test_a_gke_private_endpoint_in_prod_passes() -> None:
    cluster = res(declared.GKE_CLUSTER, {"privateClusterConfig": {"enablePrivateEndpoint": True, "enablePrivateNodes": True}})
    assert security.prod_control_plane_private([cluster], PROD) == []


def test_a_gke_endpoint_behind_authorized_networks_in_prod_passes() -> None:
    authorized = {"cidrBlocks": [{"cidrBlock": "203.0.113.0/24", "displayName": "vpn"}]}
    cluster = res(declared.GKE_CLUSTER, {"privateClusterConfig": {"enablePrivateNodes": True}, "masterAuthorizedNetworksConfig": authorized})
    assert security.prod_control_plane_private([cluster], PROD) == []


@pytest.mark.parametrize(
    "authorized",
    [
        {"cidrBlocks": [{"cidrBlock": "0.0.0.0/0", "displayName": "anyone"}]},
        {"cidrBlocks": [{"cidrBlock": "203.0.113.0/24", "displayName": "vpn"}], "gcpPublicCidrsAccessEnabled": True},
    ],
)
def test_a_gke_endpoint_authorized_for_anyone_in_prod_fails(authorized: dict[str, Any]) -> None:
    cluster = res(declared.GKE_CLUSTER, {"privateClusterConfig": {"enablePrivateNodes": True}, "masterAuthorizedNetworksConfig": authorized})
    assert ids(security.prod_control_plane_private([cluster], PROD)) == ["prod-control-plane-private"]


def test_a_gke_public_endpoint_in_prod_fails() -> None:
    cluster = res(declared.GKE_CLUSTER, {"privateClusterConfig": {"enablePrivateNodes": True}})
    assert ids(security.prod_control_plane_private([cluster], PROD)) == ["prod-control-plane-private"]


def launch_template(**changes: Any) -> Resource:
    props = {
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2},
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true", "volumeSize": 200}}],
        **changes,
    }
    return res(declared.LAUNCH_TEMPLATE, props, name="ml-dev-train")


def test_an_encrypted_launch_template_passes() -> None:
    assert security.encrypted_storage([launch_template()], DEV) == []


@pytest.mark.parametrize(
    "mappings",
    [[{"deviceName": "/dev/xvda", "ebs": {"encrypted": "false"}}], [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": 200}}], []],
)
def test_an_unencrypted_or_unmapped_root_volume_fails(mappings: list[Any]) -> None:
    assert ids(security.encrypted_storage([launch_template(blockDeviceMappings=mappings)], DEV)) == ["encrypted-storage"]


def test_an_encrypted_efs_file_system_passes() -> None:
    efs = res(declared.EFS_FILE_SYSTEM, {"encrypted": True, "kmsKeyId": "arn:aws:kms:us-west-2:0:key/k"}, name="data")
    assert security.encrypted_storage([efs], DEV) == []


@pytest.mark.parametrize("props", [{"encrypted": False}, {}])
def test_an_unencrypted_efs_file_system_fails(props: dict[str, Any]) -> None:
    efs = res(declared.EFS_FILE_SYSTEM, props, name="data")
    assert ids(security.encrypted_storage([efs], DEV)) == ["encrypted-storage"]


def test_a_node_group_without_launch_template_fails_encryption_and_imdsv2() -> None:
    bare = {k: v for k, v in node_group().items() if k != "launchTemplate"}
    assert ids(security.encrypted_storage([eks(bare)], DEV)) == ["encrypted-storage"]
    assert ids(security.imdsv2_required([eks(bare)], DEV)) == ["imdsv2-required"]


def test_imdsv2_required_passes() -> None:
    assert security.imdsv2_required([launch_template(), eks(node_group())], DEV) == []


@pytest.mark.parametrize("options", [{"httpTokens": "optional"}, {}])
def test_imds_v1_allowed_fails(options: dict[str, Any]) -> None:
    assert ids(security.imdsv2_required([launch_template(metadataOptions=options)], DEV)) == ["imdsv2-required"]


# --- buckets --------------------------------------------------------------------------------

BUCKET_KEY = f"{declared.S3_BUCKET}::data"
BLOCK_ALL = {flag: True for flag in security.PUBLIC_ACCESS_BLOCK_FLAGS}


def s3_stack(block: dict[str, Any] | None = None, encryption: bool = True, acl: str | None = None) -> list[Resource]:
    bucket_props: dict[str, Any] = {"bucket": "ml-dev-training", **({"acl": acl} if acl else {})}
    out = [res(declared.S3_BUCKET, bucket_props, name="data", protect=True)]
    if block is not None:
        out.append(res(declared.S3_PUBLIC_ACCESS_BLOCK, {"bucket": "data-id", **block}, name="data", depends_on=(BUCKET_KEY,)))
    if encryption:
        rule = {"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}}
        out.append(res(declared.S3_ENCRYPTION, {"bucket": "data-id", "rules": [rule]}, name="data", depends_on=(BUCKET_KEY,)))
    return out


def test_an_s3_bucket_with_its_encryption_configuration_passes() -> None:
    assert security.encrypted_storage(s3_stack(BLOCK_ALL), DEV) == []


def test_an_s3_bucket_with_inline_encryption_passes() -> None:
    sse = {"rule": {"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}}
    bucket = res(declared.S3_BUCKET, {"serverSideEncryptionConfiguration": sse}, name="data")
    assert security.encrypted_storage([bucket], DEV) == []


def test_an_s3_bucket_without_encryption_fails() -> None:
    assert ids(security.encrypted_storage(s3_stack(BLOCK_ALL, encryption=False), DEV)) == ["encrypted-storage"]


def test_an_s3_bucket_with_all_public_access_blocked_passes() -> None:
    assert security.no_public_buckets(s3_stack(BLOCK_ALL), DEV) == []


@pytest.mark.parametrize("block", [None, {**BLOCK_ALL, "restrictPublicBuckets": False}])
def test_an_s3_bucket_without_a_full_public_access_block_fails(block: dict[str, Any] | None) -> None:
    assert ids(security.no_public_buckets(s3_stack(block), DEV)) == ["no-public-buckets"]


def test_a_public_read_acl_fails() -> None:
    assert ids(security.no_public_buckets(s3_stack(BLOCK_ALL, acl="public-read"), DEV)) == ["no-public-buckets"]


def test_a_bucket_policy_open_to_anyone_fails() -> None:
    document = {"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"}]}
    policy = res(declared.S3_BUCKET_POLICY, {"policy": json.dumps(document)})
    assert ids(security.no_public_buckets([policy], DEV)) == ["no-public-buckets"]


def test_a_gcs_bucket_with_public_access_prevention_passes() -> None:
    bucket = res(declared.GCS_BUCKET, {"publicAccessPrevention": "enforced", "uniformBucketLevelAccess": True})
    assert security.no_public_buckets([bucket], DEV) == []


def test_a_gcs_bucket_without_public_access_prevention_fails() -> None:
    bucket = res(declared.GCS_BUCKET, {"publicAccessPrevention": "inherited"})
    assert ids(security.no_public_buckets([bucket], DEV)) == ["no-public-buckets"]


@pytest.mark.parametrize("member", ["allUsers", "allAuthenticatedUsers"])
def test_a_gcs_grant_to_everyone_fails(member: str) -> None:
    grant = res(declared.GCS_BUCKET_IAM_MEMBER, {"bucket": "b", "role": "roles/storage.objectViewer", "member": member})
    assert ids(security.no_public_buckets([grant], DEV)) == ["no-public-buckets"]


def test_a_gcs_grant_to_a_service_account_passes() -> None:
    member = "serviceAccount:trainer@p.iam.gserviceaccount.com"
    grant = res(declared.GCS_BUCKET_IAM_MEMBER, {"bucket": "b", "role": "roles/storage.objectUser", "member": member})
    assert security.no_public_buckets([grant], DEV) == []


# --- IAM ------------------------------------------------------------------------------------


def iam_policy(*statements: dict[str, Any]) -> Resource:
    return res(declared.IAM_POLICY, {"policy": json.dumps({"Version": "2012-10-17", "Statement": list(statements)})})


def test_scoped_iam_passes() -> None:
    policy = iam_policy(
        {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": "arn:aws:s3:::ml-dev-training/*"},
        # Describe calls support no resource scoping: "*" is the only choice.
        {"Effect": "Allow", "Action": ["autoscaling:DescribeAutoScalingGroups", "ec2:Describe*"], "Resource": "*"},
        {
            "Effect": "Allow",
            "Action": "autoscaling:SetDesiredCapacity",
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/ml-dev": "owned"}},
        },
    )
    assert security.no_wildcard_iam([policy], DEV) == []


@pytest.mark.parametrize(
    "statement",
    [
        {"Effect": "Allow", "Action": "*", "Resource": "*"},
        {"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::b/*"},
        {"Effect": "Allow", "Action": "s3:PutObject", "Resource": "*"},
        {"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"},
    ],
)
def test_wildcard_iam_fails(statement: dict[str, Any]) -> None:
    assert ids(security.no_wildcard_iam([iam_policy(statement)], DEV)) == ["no-wildcard-iam"]


def test_wildcards_in_a_role_inline_policy_fail() -> None:
    document = json.dumps({"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*"}})
    role = res(declared.IAM_ROLE, {"inlinePolicies": [{"name": "all", "policy": document}]})
    assert ids(security.no_wildcard_iam([role], DEV)) == ["no-wildcard-iam"]


def test_attaching_administrator_access_fails() -> None:
    attachment = res(declared.IAM_ROLE_POLICY_ATTACHMENT, {"role": "r", "policyArn": "arn:aws:iam::aws:policy/AdministratorAccess"})
    assert ids(security.no_wildcard_iam([attachment], DEV)) == ["no-wildcard-iam"]


def test_a_gcp_primitive_role_fails_and_a_predefined_one_passes() -> None:
    editor = res(declared.GCP_PROJECT_IAM_MEMBER, {"project": "p", "role": "roles/editor", "member": "serviceAccount:x"})
    viewer = res(declared.GCP_PROJECT_IAM_MEMBER, {"project": "p", "role": "roles/container.viewer", "member": "serviceAccount:x"})
    assert ids(security.no_wildcard_iam([editor, viewer], DEV)) == ["no-wildcard-iam"]


# --- Kubernetes -----------------------------------------------------------------------------


def jobset(pod_security: dict[str, Any], container_security: dict[str, Any] | None = None) -> Resource:
    container: dict[str, Any] = {"name": "trainer", "image": "trainer:1"}
    if container_security is not None:
        container["securityContext"] = container_security
    pod = {"serviceAccountName": "trainer", "securityContext": pod_security, "containers": [container]}
    props = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "llm", "namespace": "research"},
        "spec": {"replicatedJobs": [{"name": "workers", "template": {"spec": {"template": {"spec": pod}}}}]},
    }
    return res("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", props, name="llm")


def test_a_non_root_trainer_passes() -> None:
    assert security.trainer_non_root([jobset({"runAsNonRoot": True, "runAsUser": 1000})], DEV) == []


@pytest.mark.parametrize(
    "pod, container",
    [({}, None), ({"runAsNonRoot": True}, {"runAsUser": 0}), ({"runAsUser": 0}, None), ({"runAsNonRoot": True}, {"runAsNonRoot": False})],
)
def test_a_trainer_that_may_run_as_root_fails(pod: dict[str, Any], container: dict[str, Any] | None) -> None:
    assert ids(security.trainer_non_root([jobset(pod, container)], DEV)) == ["trainer-non-root"]


def test_pods_of_other_service_accounts_are_not_trainers() -> None:
    job = jobset({})
    pod_spec = job.props["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod_spec["serviceAccountName"] = "kueue-controller"
    assert security.trainer_non_root([job], DEV) == []


def priority_class(value: int, name: str = "training", preemption: str = "Never") -> Resource:
    props = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "preemptionPolicy": preemption,
    }
    return res(declared.PRIORITY_CLASS, props, name=name)


@pytest.mark.parametrize("value", [-10, 0, 1_000_000_000])
def test_priority_values_in_range_pass(value: int) -> None:
    assert scheduling.priority_class_range([priority_class(value)], DEV) == []
    assert scheduling.priority_class_autoscaler_cutoff([priority_class(value)], DEV) == []


def test_a_priority_above_the_user_range_fails() -> None:
    assert ids(scheduling.priority_class_range([priority_class(1_000_000_001)], DEV)) == ["priority-class-range"]


def test_a_system_prefixed_priority_class_fails() -> None:
    assert ids(scheduling.priority_class_range([priority_class(100, "system-gpu")], DEV)) == ["priority-class-range"]


def test_a_preempting_priority_below_the_autoscaler_cutoff_is_flagged() -> None:
    preempting = priority_class(-11, preemption="PreemptLowerPriority")
    assert ids(scheduling.priority_class_autoscaler_cutoff([preempting], DEV)) == ["priority-class-autoscaler-cutoff"]


@pytest.mark.parametrize("preemption", ["PreemptLowerPriority", None])
def test_a_priority_class_the_kube_scheduler_may_preempt_with_fails(preemption: str | None) -> None:
    """Unset is the API's default, PreemptLowerPriority."""
    resource = priority_class(100_000, "production", preemption="PreemptLowerPriority")
    props = {k: v for k, v in resource.props.items() if preemption is not None or k != "preemptionPolicy"}
    found = scheduling.priority_class_no_scheduler_preemption([res(declared.PRIORITY_CLASS, props, name="production")], DEV)
    assert ids(found) == ["priority-class-kueue-preempts"]


def test_a_priority_class_that_never_preempts_passes() -> None:
    assert scheduling.priority_class_no_scheduler_preemption([priority_class(100_000)], DEV) == []


def test_a_never_preempting_priority_below_the_cutoff_passes() -> None:
    assert scheduling.priority_class_autoscaler_cutoff([priority_class(-100, preemption="Never")], DEV) == []


# --- protection and drift -------------------------------------------------------------------


@pytest.mark.parametrize("type_token", [declared.EKS_CLUSTER, declared.GKE_CLUSTER, declared.S3_BUCKET, declared.GCS_BUCKET])
def test_protected_clusters_and_buckets_pass_in_prod(type_token: str) -> None:
    assert lifecycle.prod_protected([res(type_token, {}, protect=True)], PROD) == []


@pytest.mark.parametrize("type_token", [declared.EKS_CLUSTER, declared.GKE_CLUSTER, declared.S3_BUCKET, declared.GCS_BUCKET])
def test_unprotected_clusters_and_buckets_fail_in_prod(type_token: str) -> None:
    assert ids(lifecycle.prod_protected([res(type_token, {})], PROD)) == ["prod-protected"]


def test_unprotected_resources_are_fine_in_dev() -> None:
    assert lifecycle.prod_protected([res(declared.EKS_CLUSTER, {})], DEV) == []


def test_an_ignored_desired_size_passes_drift() -> None:
    assert lifecycle.autoscaler_drift_ignored([eks(node_group())], DEV) == []


def test_a_managed_desired_size_is_flagged_for_drift() -> None:
    group = res(declared.EKS_NODE_GROUP, node_group(), name="g")
    assert ids(lifecycle.autoscaler_drift_ignored([group], DEV)) == ["autoscaler-drift-ignored"]


def test_a_gke_node_count_on_an_autoscaled_pool_needs_ignore_changes() -> None:
    pool = {**node_pool(), "initialNodeCount": 0}
    assert ids(lifecycle.autoscaler_drift_ignored([gke(pool)], DEV)) == ["autoscaler-drift-ignored"]
    ignored = res(declared.GKE_NODE_POOL, pool, ignore_changes=("initialNodeCount",))
    assert lifecycle.autoscaler_drift_ignored([ignored], DEV) == []


# --- levels and overrides -------------------------------------------------------------------


def test_a_compliant_stack_has_no_findings() -> None:
    stack = [eks(node_group()), launch_template(), *s3_stack(BLOCK_ALL), priority_class(100)]
    assert registry.evaluate(stack, DEV) == []


def test_findings_carry_the_rule_enforcement() -> None:
    findings = registry.evaluate([priority_class(-100, preemption="PreemptLowerPriority")], DEV)
    assert [(f.rule, f.level, f.blocking) for f in findings] == [
        ("priority-class-autoscaler-cutoff", "advisory", False),
        ("priority-class-kueue-preempts", "mandatory", True),
    ]


def test_an_override_turns_a_mandatory_violation_into_a_reasoned_line() -> None:
    waived = Context("dev", 16, 256, True, {"gpu-pool-scale-to-zero": "eval pool must answer in seconds"})
    warm = eks(node_group(scalingConfig={"minSize": 1, "maxSize": 4, "desiredSize": 1}))
    [finding] = registry.evaluate([warm], waived)
    assert (finding.level, finding.blocking) == ("overridden", False)
    assert finding.message.startswith("overridden (eval pool must answer in seconds): ")


def test_an_override_does_not_waive_a_rule_that_is_not_overridable() -> None:
    ctx = Context("dev", 16, 256, True, {"gpu-pool-tainted": "trust me"})
    [finding] = registry.evaluate([eks(node_group(taints=[]))], ctx)
    assert finding.level == "mandatory"


def test_synth_records_become_resources_with_their_options() -> None:
    record = {
        "type": declared.EKS_NODE_GROUP,
        "name": "g",
        "custom": True,
        "inputs": node_group(),
        "options": {"protect": True, "ignoreChanges": ["scalingConfig.desiredSize"], "dependsOn": ["a::b"]},
    }
    component = {**record, "type": "gpu-platform:aws:GpuPool", "custom": False}
    [resource] = base.from_synthesis([record, component])
    assert (resource.protect, resource.ignore_changes, resource.depends_on) == (True, ("scalingConfig.desiredSize",), ("a::b",))


# --- lifecycle ------------------------------------------------------------------------------


def eks_cluster(version: str) -> Resource:
    return Resource(declared.EKS_CLUSTER, "ml-prod", {"name": "ml-prod", "version": version})


def gke_cluster(version: str) -> Resource:
    return Resource(declared.GKE_CLUSTER, "ml-prod", {"name": "ml-prod", "minMasterVersion": version})


def on(day: date) -> base.Context:
    return dataclasses.replace(DEV, today=day)


def test_a_version_in_standard_support_passes() -> None:
    today = on(date(2026, 12, 2))
    assert lifecycle.kubernetes_standard_support([eks_cluster("1.35"), gke_cluster("1.35")], today) == []


def test_eks_1_34_is_past_standard_support_on_its_last_day() -> None:
    [violation] = lifecycle.kubernetes_standard_support([eks_cluster("1.34")], on(date(2026, 12, 2)))
    assert violation.message == (
        "Kubernetes 1.34 left standard support on 2026-12-02 (EKS, judged on 2026-12-02): set "
        "cluster.kubernetesVersion to 1.35"
    )


def test_gke_judges_the_minor_of_a_patch_version() -> None:
    assert ids(lifecycle.kubernetes_standard_support([gke_cluster("1.33.5-gke.100")], on(date(2026, 12, 2)))) == [
        "kubernetes-standard-support"
    ]


def test_past_standard_support_is_advisory() -> None:
    assert RULES_BY_ID["kubernetes-standard-support"].enforcement == "advisory"

"""The shared file system behind jobs' /data on AWS, read from the offline synth (resolved values)."""

from __future__ import annotations

import json
from typing import Any

from components.facts import aws as aws_facts
from infra.synth import Synthesis

FILE_SYSTEM = "aws:efs/fileSystem:FileSystem"
MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"
ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
SUBNET = "aws:ec2/subnet:Subnet"
ADDON = "aws:eks/addon:Addon"
POLICY = "aws:efs/fileSystemPolicy:FileSystemPolicy"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
PV = "kubernetes:core/v1:PersistentVolume"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"

def file_system(result: Synthesis) -> dict[str, Any]:
    (found,) = result.by_type(FILE_SYSTEM)
    return found


def test_the_file_system_is_encrypted_with_the_buckets_key(dev: Synthesis) -> None:
    inputs = file_system(dev)["inputs"]
    (encryption,) = dev.by_type("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration")
    bucket_key = encryption["inputs"]["rules"][0]["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"]
    assert inputs["encrypted"] is True
    assert inputs["kmsKeyId"] == bucket_key


def test_the_file_system_uses_elastic_throughput(dev: Synthesis) -> None:
    inputs = file_system(dev)["inputs"]
    assert (inputs["throughputMode"], inputs["performanceMode"]) == ("elastic", "generalPurpose")


def test_a_mount_target_in_each_private_subnet(dev: Synthesis) -> None:
    private = {f"{s['name']}-id" for s in dev.by_type(SUBNET) if "-private-" in s["name"]}
    targets = [t["inputs"] for t in dev.by_type(MOUNT_TARGET)]
    assert len(private) == 3
    assert {t["subnetId"] for t in targets} == private
    assert len(targets) == len(private)


def test_mount_targets_carry_only_the_nfs_group(dev: Synthesis) -> None:
    (group,) = dev.by_type(SECURITY_GROUP)
    assert {tuple(t["inputs"]["securityGroups"]) for t in dev.by_type(MOUNT_TARGET)} == {(f"{group['name']}-id",)}


def test_nfs_is_open_to_the_node_security_group_only(dev: Synthesis) -> None:
    (group,) = dev.by_type(SECURITY_GROUP)
    (rule,) = dev.by_type(INGRESS)
    inputs = rule["inputs"]
    assert inputs["securityGroupId"] == f"{group['name']}-id"
    assert inputs["referencedSecurityGroupId"] == "sg-ml-dev-cluster"
    assert (inputs["ipProtocol"], inputs["fromPort"], inputs["toPort"]) == ("tcp", 2049, 2049)
    assert "cidrIpv4" not in inputs and "ingress" not in group["inputs"]


def test_each_team_gets_an_access_point_owned_by_the_trainer_user(dev: Synthesis) -> None:
    points = {p["inputs"]["rootDirectory"]["path"]: p["inputs"] for p in dev.by_type(ACCESS_POINT)}
    assert set(points) == {"/teams/research", "/teams/applied"}
    for point in points.values():
        assert point["posixUser"] == {"uid": 10001, "gid": 10001}
        assert point["rootDirectory"]["creationInfo"] == {"ownerUid": 10001, "ownerGid": 10001, "permissions": "0750"}


def efs_addon(result: Synthesis) -> dict[str, Any]:
    (addon,) = [a for a in result.by_type(ADDON) if a["inputs"]["addonName"] == "aws-efs-csi-driver"]
    return addon


def test_the_efs_csi_add_on_is_pinned_with_a_role_of_no_policy(dev: Synthesis) -> None:
    addon = efs_addon(dev)
    role = f"{ROLE}::{addon['name']}"
    assert addon["inputs"]["addonVersion"] == aws_facts.ADDON_VERSIONS["1.35"]["aws-efs-csi-driver"]
    assert addon["inputs"]["serviceAccountRoleArn"] == f"arn:aws:iam::000000000000:role/{addon['name']}"
    assert not [p for p in dev.resources if p["type"] in (ATTACHMENT, ROLE_POLICY) and role in p["options"]["dependsOn"]]


def test_the_efs_csi_role_is_trusted_by_its_node_account_only(dev: Synthesis) -> None:
    (role,) = [r for r in dev.by_type(ROLE) if r["name"] == efs_addon(dev)["name"]]
    [trust] = json.loads(role["inputs"]["assumeRolePolicy"])["Statement"]
    subjects = next(v for k, v in trust["Condition"]["StringEquals"].items() if k.endswith(":sub"))
    assert subjects == ["system:serviceaccount:kube-system:efs-csi-node-sa"]


def file_system_policy(result: Synthesis) -> list[dict[str, Any]]:
    (policy,) = result.by_type(POLICY)
    return json.loads(policy["inputs"]["policy"])["Statement"]


def access_point_arns(result: Synthesis) -> list[str]:
    return sorted(f"arn:aws:elasticfilesystem:us-west-2:000000000000:access-point/{p['name']}-id" for p in result.by_type(ACCESS_POINT))


def test_only_the_csi_role_may_mount_and_only_through_the_teams_access_points(dev: Synthesis) -> None:
    [allow] = [s for s in file_system_policy(dev) if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"AWS": efs_addon(dev)["inputs"]["serviceAccountRoleArn"]}
    assert allow["Action"] == ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"]
    assert allow["Condition"] == {
        "Bool": {"aws:SecureTransport": "true", "elasticfilesystem:AccessedViaMountTarget": "true"},
        "StringEquals": {"elasticfilesystem:AccessPointArn": access_point_arns(dev)},
    }


def test_everyone_is_denied_without_tls_or_outside_the_teams_access_points(dev: Synthesis) -> None:
    denies = {s["Sid"]: s for s in file_system_policy(dev) if s["Effect"] == "Deny"}
    assert {s["Sid"]: s["Condition"] for s in denies.values()} == {
        "DenyWithoutTls": {"Bool": {"aws:SecureTransport": "false"}},
        "DenyOutsideTheTeamsAccessPoints": {"StringNotEquals": {"elasticfilesystem:AccessPointArn": access_point_arns(dev)}},
    }
    for deny in denies.values():
        assert deny["Principal"] == {"AWS": "*"}
        assert deny["Resource"] == "arn:aws:elasticfilesystem:us-west-2:000000000000:file-system/ml-dev-training-data-id"
        assert deny["Action"] == list(aws_facts.EFS_CLIENT_ACTIONS)


def test_team_volumes_mount_with_iam_and_leave_tls_to_the_access_point(dev: Synthesis) -> None:
    volumes = [v["inputs"]["spec"] for v in dev.by_type(PV)]
    assert len(volumes) == 2
    for volume in volumes:
        assert volume["mountOptions"] == ["iam"]
        assert "volumeAttributes" not in volume["csi"]


def test_team_volumes_wait_for_the_file_system_policy_and_every_mount_target(dev: Synthesis) -> None:
    needed = {f"{POLICY}::{p['name']}" for p in dev.by_type(POLICY)} | {f"{MOUNT_TARGET}::{m['name']}" for m in dev.by_type(MOUNT_TARGET)}
    assert len(needed) == 1 + len(dev.by_type(MOUNT_TARGET)) > 1
    for volume in dev.by_type(PV):
        assert needed <= set(volume["options"]["dependsOn"])


def test_the_vpc_cni_enforces_network_policy(dev: Synthesis) -> None:
    (cni,) = [a["inputs"] for a in dev.by_type(ADDON) if a["inputs"]["addonName"] == "vpc-cni"]
    assert json.loads(cni["configurationValues"]) == {"enableNetworkPolicy": "true"}


def test_every_team_namespace_closes_nfs_to_its_pods(dev: Synthesis) -> None:
    policies = {p["inputs"]["metadata"]["namespace"]: p["inputs"]["spec"] for p in dev.by_type(NETWORK_POLICY)}
    assert set(policies) == {"research", "applied"}
    for spec in policies.values():
        assert (spec["podSelector"], spec["policyTypes"]) == ({}, ["Egress"])
        [rule] = spec["egress"]
        assert "to" not in rule
        assert rule["ports"] == [
            {"protocol": "TCP", "port": 1, "endPort": 2048},
            {"protocol": "TCP", "port": 2050, "endPort": 65535},
            {"protocol": "UDP"},
            {"protocol": "SCTP"},
        ]


def test_the_file_system_is_protected_in_prod_only(dev: Synthesis, prod: Synthesis) -> None:
    assert file_system(prod)["options"]["protect"] is True
    assert not file_system(dev)["options"].get("protect")


def test_the_stack_exports_the_file_system_id(dev: Synthesis) -> None:
    assert dev.outputs["dataFileSystemId"] == f"{file_system(dev)['name']}-id"

"""The shared file system behind jobs' /data on AWS, read from the offline synth (resolved values)."""

from __future__ import annotations

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


def test_the_efs_csi_add_on_is_pinned_without_an_iam_role(dev: Synthesis) -> None:
    (addon,) = [a["inputs"] for a in dev.by_type(ADDON) if a["inputs"]["addonName"] == "aws-efs-csi-driver"]
    assert addon["addonVersion"] == aws_facts.ADDON_VERSIONS["1.35"]["aws-efs-csi-driver"]
    assert "serviceAccountRoleArn" not in addon


def test_the_file_system_is_protected_in_prod_only(dev: Synthesis, prod: Synthesis) -> None:
    assert file_system(prod)["options"]["protect"] is True
    assert not file_system(dev)["options"].get("protect")


def test_the_stack_exports_the_file_system_id(dev: Synthesis) -> None:
    assert dev.outputs["dataFileSystemId"] == f"{file_system(dev)['name']}-id"

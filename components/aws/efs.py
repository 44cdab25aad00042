"""A shared POSIX file system for jobs' /data: checkpoints need renames, which S3 cannot do.

One encrypted EFS file system per cluster, reachable over NFS from the cluster's nodes only,
and an access point per team, so each team's claim sees its own directory, owned by the
trainer's user, and nothing of the other teams'.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components import naming
from components.facts import aws as aws_facts
from components.kubernetes import DataVolume
from components.naming import TRAINER_UID
from components.spec import PlatformSpec

# NFSv4 (Amazon EFS User Guide, "Security groups for mount targets": TCP 2049).
NFS_PORT = 2049
# Each team's directory: the access point creates it on first use, owned by the trainer's user.
TEAM_ROOT = "/teams"
TEAM_DIRECTORY_PERMISSIONS = "0750"
# Checkpoints not read for a month move to Infrequent Access; reading one moves it back.
INFREQUENT_ACCESS_AFTER = "AFTER_30_DAYS"


def team_directory(namespace: str) -> str:
    return f"{TEAM_ROOT}/{namespace}"


def volume_handle(file_system_id: str, access_point_id: str) -> str:
    """The EFS CSI driver's handle for an access point: `<fs-id>::<fsap-id>` (empty subpath)."""
    return f"{file_system_id}::{access_point_id}"


class TrainingFileSystem(pulumi.ComponentResource):
    """Encrypted EFS with elastic throughput (checkpoint writes come in bursts from every node of
    a job at once), a mount target in each private subnet and an access point per team."""

    file_system_id: pulumi.Output[str]
    data_volume: DataVolume

    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        *,
        vpc_id: pulumi.Input[str],
        subnets: dict[str, pulumi.Output[str]],
        node_security_group_id: pulumi.Input[str],
        kms_key_arn: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`node_security_group_id`: the group every node carries (EKS managed node groups get
        the cluster security group); NFS is open to it and nothing else. `kms_key_arn`: the
        wing's data key, so datasets in the bucket and checkpoints here share one audited key."""
        super().__init__("gpu-platform:aws:TrainingFileSystem", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        file_system = aws.efs.FileSystem(
            name,
            creation_token=name,
            encrypted=True,
            kms_key_id=kms_key_arn,
            # Elastic throughput needs the General Purpose performance mode (EFS User Guide).
            performance_mode="generalPurpose",
            throughput_mode="elastic",
            lifecycle_policies=[
                aws.efs.FileSystemLifecyclePolicyArgs(transition_to_ia=INFREQUENT_ACCESS_AFTER),
                aws.efs.FileSystemLifecyclePolicyArgs(transition_to_primary_storage_class="AFTER_1_ACCESS"),
            ],
            tags={"Name": name},
            opts=pulumi.ResourceOptions(parent=self, protect=spec.environment == "prod"),
        )
        group = aws.ec2.SecurityGroup(
            f"{name}-nfs",
            vpc_id=vpc_id,
            description=f"NFS to the training file system of {spec.cluster.name}, from its nodes only",
            tags={"Name": f"{name}-nfs"},
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-nfs-from-nodes",
            security_group_id=group.id,
            referenced_security_group_id=node_security_group_id,
            ip_protocol="tcp",
            from_port=NFS_PORT,
            to_port=NFS_PORT,
            description="NFS from the cluster's nodes",
            opts=child,
        )
        for zone, subnet in subnets.items():
            aws.efs.MountTarget(
                f"{name}-{zone}",
                file_system_id=file_system.id,
                subnet_id=subnet,
                security_groups=[group.id],
                opts=child,
            )
        handles: dict[str, pulumi.Input[str]] = {}
        for namespace in naming.team_namespaces(spec):
            access_point = aws.efs.AccessPoint(
                f"{name}-{namespace}",
                file_system_id=file_system.id,
                # Every file operation through the access point runs as the trainer's user.
                posix_user=aws.efs.AccessPointPosixUserArgs(uid=TRAINER_UID, gid=TRAINER_UID),
                root_directory=aws.efs.AccessPointRootDirectoryArgs(
                    path=team_directory(namespace),
                    creation_info=aws.efs.AccessPointRootDirectoryCreationInfoArgs(
                        owner_uid=TRAINER_UID, owner_gid=TRAINER_UID, permissions=TEAM_DIRECTORY_PERMISSIONS
                    ),
                ),
                tags={"Name": f"{name}-{namespace}"},
                opts=child,
            )
            handles[namespace] = pulumi.Output.all(file_system.id, access_point.id).apply(
                lambda ids: volume_handle(ids[0], ids[1])
            )
        self.file_system_id = file_system.id
        self.data_volume = DataVolume(
            driver=aws_facts.EFS_CSI_DRIVER,
            handles=handles,
            # Encrypt NFS traffic in transit (efs-utils mount helper option).
            mount_options=("tls",),
        )
        self.register_outputs({"fileSystemId": self.file_system_id})

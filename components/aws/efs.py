"""A shared POSIX file system for jobs' /data: checkpoints need renames, which S3 cannot do.

One encrypted EFS file system per cluster and an access point per team, so each team's claim sees
its own directory, owned by the trainer's user, and nothing of the other teams'. What keeps a pod
from reaching past its claim (docs/tenancy.md, "The file system"): a file system policy that
refuses anonymous clients, plain NFS and mounts outside the teams' access points and allows only
the EFS CSI driver's role; `iam` on every team volume, which mounts an access point and so gets
TLS from the driver; and a NetworkPolicy in every team namespace closing NFS to pods, enforced by
the VPC CNI's network policy agent. The mount targets' security group cannot do that last part:
under the VPC CNI pods use their node's primary ENI security groups (EKS user guide, "Security
groups for Pods", off here), so a group that admits the nodes admits their pods.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from components import naming
from components.aws import iam
from components.facts import aws as aws_facts
from components.kubernetes import DataVolume
from components.naming import TRAINER_UID
from components.spec import PlatformSpec

NFS_PORT = aws_facts.NFS_PORT
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
        mount_role_arn: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`node_security_group_id`: the group every node carries (EKS managed node groups get
        the cluster security group); NFS is open to it and nothing else. `kms_key_arn`: the
        wing's data key, so datasets in the bucket and checkpoints here share one audited key.
        `mount_role_arn`: the EFS CSI add-on's role, the identity its node plugin mounts as."""
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
        mount_targets = [
            aws.efs.MountTarget(
                f"{name}-{zone}",
                file_system_id=file_system.id,
                subnet_id=subnet,
                security_groups=[group.id],
                opts=child,
            )
            for zone, subnet in subnets.items()
        ]
        handles: dict[str, pulumi.Input[str]] = {}
        access_point_arns: list[pulumi.Output[str]] = []
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
            access_point_arns.append(access_point.arn)
        # A replaced role would keep its ARN but not its principal id, and the policy would lock
        # it out (EFS user guide, resource-based policy examples): the role is auto-named, so a
        # replacement has a new ARN and this policy is rewritten with it.
        policy = aws.efs.FileSystemPolicy(
            name,
            file_system_id=file_system.id,
            policy=pulumi.Output.all(file_system.arn, mount_role_arn, *access_point_arns).apply(
                lambda args: json.dumps(iam.efs_file_system_policy(args[0], args[1], list(args[2:])))
            ),
            opts=child,
        )
        self.file_system_id = file_system.id
        self.data_volume = DataVolume(
            driver=aws_facts.EFS_CSI_DRIVER,
            handles=handles,
            # `iam`: the mount helper authenticates as the node plugin's IAM identity
            # (aws-efs-csi-driver@v3.3.0 docs/parameters.md), which the file system policy needs.
            # TLS needs nothing of ours: for a volume handle naming an access point the driver
            # appends `accesspoint=<id>` and `tls` itself (aws-efs-csi-driver@v3.3.0
            # pkg/driver/node.go NodePublishVolume, `if apid != ""`, lines 167-169), whatever the
            # volume attributes say. No volumeAttributes on purpose: they sit in the PV's
            # persistentVolumeSource, which the API server refuses to change after creation
            # (kubernetes pkg/apis/core/validation/validation.go ValidatePersistentVolumeUpdate),
            # so adding one would fail `pulumi up` on every existing stack; mountOptions may
            # change.
            mount_options=(aws_facts.EFS_MOUNT_OPTION_IAM,),
            denied_egress_tcp_ports=(NFS_PORT,),
            # A team volume is only mountable once the policy allows the CSI role and a mount
            # target answers in the node's zone; before that its first pods fail to start.
            depends_on=(policy, *mount_targets),
        )
        self.register_outputs({"fileSystemId": self.file_system_id})

"""IAM policy documents of the AWS wing, as plain dicts: least privilege, tested plainly.

Every Allow names its actions; `Resource: "*"` appears only for read-only Describe calls that
AWS does not scope to resources (the autoscaler's discovery).
"""

from __future__ import annotations

from typing import Any

from components import tenancy
from components.facts import aws as aws_facts

Policy = dict[str, Any]

_VERSION = "2012-10-17"


def service_trust_policy(service: str) -> Policy:
    """Lets an AWS service (eks.amazonaws.com, ec2.amazonaws.com) assume the role."""
    return {
        "Version": _VERSION,
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
    }


def irsa_trust_policy(provider_arn: str, issuer_host: str, subjects: list[str]) -> Policy:
    """Lets exactly `subjects` (system:serviceaccount:<ns>:<sa>) assume the role via IRSA."""
    return {
        "Version": _VERSION,
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": provider_arn},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {
                        f"{issuer_host}:aud": aws_facts.IRSA_AUDIENCE,
                        f"{issuer_host}:sub": sorted(subjects),
                    }
                },
            }
        ],
    }


def managed_policy_arn(partition: str, name: str) -> str:
    return f"arn:{partition}:iam::aws:policy/{name}"


def cluster_encryption_policy(key_arn: str) -> Policy:
    """What EKS needs of the secrets key (envelope encryption of Kubernetes secrets)."""
    return {
        "Version": _VERSION,
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:ListGrants"],
                "Resource": key_arn,
            }
        ],
    }


def cluster_autoscaler_policy(cluster_name: str, partition: str, region: str, account: str) -> Policy:
    """The autoscaler's rights: discover groups anywhere, resize only this cluster's.

    Scaling actions are limited to ASGs tagged `k8s.io/cluster-autoscaler/<cluster>`, which
    only this cluster's node groups carry (cluster-autoscaler AWS README, "Full Cluster
    Autoscaler Features Policy"); DescribeNodegroup (labels and taints for scale from zero)
    to this cluster's node groups.
    """
    return {
        "Version": _VERSION,
        "Statement": [
            {
                "Sid": "Discover",
                "Effect": "Allow",
                "Action": [
                    "autoscaling:DescribeAutoScalingGroups",
                    "autoscaling:DescribeAutoScalingInstances",
                    "autoscaling:DescribeLaunchConfigurations",
                    "autoscaling:DescribeScalingActivities",
                    "autoscaling:DescribeTags",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplateVersions",
                    "ec2:GetInstanceTypesFromInstanceRequirements",
                ],
                "Resource": "*",
            },
            {
                "Sid": "ScaleThisCluster",
                "Effect": "Allow",
                "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
                "Resource": f"arn:{partition}:autoscaling:{region}:{account}:autoScalingGroup:*:autoScalingGroupName/*",
                "Condition": {
                    "StringEquals": {f"aws:ResourceTag/{aws_facts.AUTOSCALER_CLUSTER_TAG_PREFIX}{cluster_name}": "owned"}
                },
            },
            {
                "Sid": "ReadThisClustersNodeGroups",
                "Effect": "Allow",
                "Action": "eks:DescribeNodegroup",
                "Resource": f"arn:{partition}:eks:{region}:{account}:nodegroup/{cluster_name}/*/*",
            },
        ],
    }


def trainer_policy(bucket_arn: str, key_arn: str, team: str | None) -> Policy:
    """A trainer's rights on the bucket, through its one key. A team's role reads and writes only
    `teams/<team>/` and reads `datasets/`: listing is limited by the `s3:prefix` condition key
    (S3 docs, "Actions, resources, and condition keys for Amazon S3": ListBucket supports
    s3:prefix), objects by their ARN. Without teams: the whole bucket."""
    if team is None:
        listing: dict[str, Any] = {"Action": ["s3:ListBucket", "s3:ListBucketMultipartUploads"]}
        read_write = [f"{bucket_arn}/*"]
        read_only: list[str] = []
    else:
        own, shared = tenancy.team_prefix(team), tenancy.DATASETS_PREFIX
        # ListBucketMultipartUploads has no s3:prefix key (parliament flags it), so a team role
        # lists only objects.
        listing = {
            "Action": "s3:ListBucket",
            "Condition": {"StringLike": {"s3:prefix": [own, f"{own}*", shared, f"{shared}*"]}},
        }
        read_write = [f"{bucket_arn}/{own}*"]
        read_only = [f"{bucket_arn}/{shared}*"]
    statements: list[dict[str, Any]] = [
        {"Sid": "FindTheBucket", "Effect": "Allow", "Action": "s3:GetBucketLocation", "Resource": bucket_arn},
        {"Sid": "ListOwnObjects", "Effect": "Allow", **listing, "Resource": bucket_arn},
        {
            "Sid": "ReadWriteOwnObjects",
            "Effect": "Allow",
            "Action": [
                "s3:AbortMultipartUpload",
                "s3:DeleteObject",
                "s3:GetObject",
                "s3:ListMultipartUploadParts",
                "s3:PutObject",
            ],
            "Resource": read_write,
        },
    ]
    if read_only:
        statements.append({"Sid": "ReadDatasets", "Effect": "Allow", "Action": "s3:GetObject", "Resource": read_only})
    statements.append(
        {"Sid": "UseTheBucketKey", "Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": key_arn}
    )
    return {"Version": _VERSION, "Statement": statements}


def tls_only_bucket_policy(bucket_arn: str) -> Policy:
    """Refuses every request to the bucket that does not use TLS."""
    return {
        "Version": _VERSION,
        "Statement": [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [bucket_arn, f"{bucket_arn}/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }


def efs_file_system_policy(file_system_arn: str, mount_role_arn: str, access_point_arns: list[str]) -> Policy:
    """Who may mount the training file system, and how.

    Any policy replaces EFS's default, which "grants full access to any anonymous client that can
    connect to the file system using a mount target" (EFS user guide, default file system policy):
    here nothing allows anonymous clients, so a client mounting without `iam` is refused. Only
    `mount_role_arn` (the EFS CSI driver's role, which its node plugin presents for every `iam`
    mount) is allowed, read and write but never root, and only through mount targets and the
    teams' access points (EFS user guide, "Using access points in IAM policies"). The denies hold
    for every principal, whatever an identity policy elsewhere allows: without TLS, or not through
    one of these access points (a negated condition on a key the request lacks is true: IAM user
    guide, condition operators), nothing. They name only client actions, so the policy never
    locks its author out of PutFileSystemPolicy (EFS PutFileSystemPolicy, lockout safety check).

    IAM cannot tell one team's mount from another's: the CSI driver mounts every volume as its node
    plugin, not as the pod (aws/containers-roadmap#1003). Which team reaches which access point is
    Kubernetes' to enforce (each team's volume is bound to its own claim, docs/tenancy.md).
    """
    points = sorted(access_point_arns)
    anyone = {"AWS": "*"}
    return {
        "Version": _VERSION,
        "Statement": [
            {
                "Sid": "DenyWithoutTls",
                "Effect": "Deny",
                "Principal": anyone,
                "Action": list(aws_facts.EFS_CLIENT_ACTIONS),
                "Resource": file_system_arn,
                "Condition": {"Bool": {aws_facts.SECURE_TRANSPORT_KEY: "false"}},
            },
            {
                "Sid": "DenyOutsideTheTeamsAccessPoints",
                "Effect": "Deny",
                "Principal": anyone,
                "Action": list(aws_facts.EFS_CLIENT_ACTIONS),
                "Resource": file_system_arn,
                "Condition": {"StringNotEquals": {aws_facts.EFS_ACCESS_POINT_KEY: points}},
            },
            {
                "Sid": "CsiDriverMountsTeamAccessPoints",
                "Effect": "Allow",
                "Principal": {"AWS": mount_role_arn},
                "Action": list(aws_facts.EFS_CLIENT_ACTIONS[:2]),
                "Resource": file_system_arn,
                "Condition": {
                    "Bool": {aws_facts.SECURE_TRANSPORT_KEY: "true", aws_facts.EFS_VIA_MOUNT_TARGET_KEY: "true"},
                    "StringEquals": {aws_facts.EFS_ACCESS_POINT_KEY: points},
                },
            },
        ],
    }


def prometheus_remote_write_policy(workspace_arn: str) -> Policy:
    """Only what remote write needs, on the stack's one workspace: aps:RemoteWrite (AMP docs,
    "Set up service roles for the ingestion of metrics from Amazon EKS clusters"; the managed
    AmazonPrometheusRemoteWriteAccess grants the same action on every workspace). The workspace
    ARN is `arn:<partition>:aps:<region>:<account>:workspace/<id>`, the resource type the action
    takes (Service Authorization Reference, Amazon Managed Service for Prometheus)."""
    return {
        "Version": _VERSION,
        "Statement": [
            {"Sid": "RemoteWriteToTheWorkspace", "Effect": "Allow", "Action": "aps:RemoteWrite", "Resource": workspace_arn}
        ],
    }

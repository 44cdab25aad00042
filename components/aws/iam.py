"""IAM policy documents of the AWS wing, as plain dicts: least privilege, tested plainly.

Every Allow names its actions; `Resource: "*"` appears only for read-only Describe calls that
AWS does not scope to resources (the autoscaler's discovery).
"""

from __future__ import annotations

from typing import Any

from components.aws import facts

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
                        f"{issuer_host}:aud": facts.IRSA_AUDIENCE,
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
                    "StringEquals": {f"aws:ResourceTag/{facts.AUTOSCALER_CLUSTER_TAG_PREFIX}{cluster_name}": "owned"}
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


def trainer_policy(bucket_arn: str, key_arn: str) -> Policy:
    """Read and write datasets and checkpoints in the one bucket, through its one key."""
    return {
        "Version": _VERSION,
        "Statement": [
            {
                "Sid": "ListTheBucket",
                "Effect": "Allow",
                "Action": ["s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketMultipartUploads"],
                "Resource": bucket_arn,
            },
            {
                "Sid": "ReadWriteObjects",
                "Effect": "Allow",
                "Action": [
                    "s3:AbortMultipartUpload",
                    "s3:DeleteObject",
                    "s3:GetObject",
                    "s3:ListMultipartUploadParts",
                    "s3:PutObject",
                ],
                "Resource": f"{bucket_arn}/*",
            },
            {
                "Sid": "UseTheBucketKey",
                "Effect": "Allow",
                "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
                "Resource": key_arn,
            },
        ],
    }


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

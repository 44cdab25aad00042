"""The Karpenter controller's IAM policy and its interruption queue's policy, as plain dicts.

The statements are those Karpenter documents for v1.14 (aws/karpenter-provider-aws
website/content/en/v1.14/getting-started/getting-started-with-karpenter/cloudformation.yaml:
NodeLifecyclePolicy, IAMIntegrationPolicy, EKSIntegrationPolicy, InterruptionPolicy,
ResourceDiscoveryPolicy), each scoped as there: launches and deletions to resources tagged for
this cluster and a NodePool, instance profiles to this cluster's EC2NodeClasses, PassRole to the
node role alone. Left out: ZonalShiftPolicy, read only with settings.enableZonalShift (off here).
"""

from __future__ import annotations

from typing import Any

from components.facts import aws as aws_facts

Policy = dict[str, Any]

_VERSION = "2012-10-17"
_NODE_POOL_TAG = "karpenter.sh/nodepool"
_NODE_CLASS_TAG = "karpenter.k8s.aws/ec2nodeclass"
_EKS_CLUSTER_TAG = "eks:eks-cluster-name"
_REGION_TAG = "topology.kubernetes.io/region"
_LAUNCH = ["ec2:RunInstances", "ec2:CreateFleet"]


def controller_policy(
    cluster_name: str, partition: str, region: str, account: str, node_role_arn: str, queue_arn: str
) -> Policy:
    """Everything the controller does: launch and end nodes, manage their instance profiles, read
    the cluster endpoint, pricing, offerings and interruption messages."""
    ec2 = f"arn:{partition}:ec2:{region}"
    owned = f"{aws_facts.CLUSTER_TAG_PREFIX}{cluster_name}"
    profiles = f"arn:{partition}:iam::{account}:instance-profile/*"
    created = [f"{ec2}:*:{kind}/*" for kind in ("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")]
    tagged_for_pool = {
        "StringEquals": {f"aws:ResourceTag/{owned}": "owned"},
        "StringLike": {f"aws:ResourceTag/{_NODE_POOL_TAG}": "*"},
    }
    request_tags = {f"aws:RequestTag/{owned}": "owned", f"aws:RequestTag/{_EKS_CLUSTER_TAG}": cluster_name}
    statements: list[dict[str, Any]] = [
        {
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Resource": [
                f"arn:{partition}:ec2:{region}::image/*",
                f"arn:{partition}:ec2:{region}::snapshot/*",
                *(f"{ec2}:*:{kind}/*" for kind in ("security-group", "subnet", "capacity-reservation", "placement-group")),
            ],
            "Action": _LAUNCH,
        },
        {
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Resource": f"{ec2}:*:launch-template/*",
            "Action": _LAUNCH,
            "Condition": tagged_for_pool,
        },
        {
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Resource": created,
            "Action": [*_LAUNCH, "ec2:CreateLaunchTemplate"],
            "Condition": {"StringEquals": request_tags, "StringLike": {f"aws:RequestTag/{_NODE_POOL_TAG}": "*"}},
        },
        {
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Resource": created,
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": {**request_tags, "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
                "StringLike": {f"aws:RequestTag/{_NODE_POOL_TAG}": "*"},
            },
        },
        {
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Resource": f"{ec2}:*:instance/*",
            "Action": "ec2:CreateTags",
            "Condition": {
                **tagged_for_pool,
                "StringEqualsIfExists": {f"aws:RequestTag/{_EKS_CLUSTER_TAG}": cluster_name},
                "ForAllValues:StringEquals": {"aws:TagKeys": [_EKS_CLUSTER_TAG, "karpenter.sh/nodeclaim", "Name"]},
            },
        },
        {
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Condition": tagged_for_pool,
        },
        {
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Resource": node_role_arn,
            "Action": "iam:PassRole",
            "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        },
        {
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": "iam:CreateInstanceProfile",
            "Condition": {
                "StringEquals": {**request_tags, f"aws:RequestTag/{_REGION_TAG}": region},
                "StringLike": {f"aws:RequestTag/{_NODE_CLASS_TAG}": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": "iam:TagInstanceProfile",
            "Condition": {
                "StringEquals": {
                    f"aws:ResourceTag/{owned}": "owned",
                    f"aws:ResourceTag/{_REGION_TAG}": region,
                    **request_tags,
                    f"aws:RequestTag/{_REGION_TAG}": region,
                },
                "StringLike": {f"aws:ResourceTag/{_NODE_CLASS_TAG}": "*", f"aws:RequestTag/{_NODE_CLASS_TAG}": "*"},
            },
        },
        {
            "Sid": "AllowScopedInstanceProfileActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
            "Condition": {
                "StringEquals": {f"aws:ResourceTag/{owned}": "owned", f"aws:ResourceTag/{_REGION_TAG}": region},
                "StringLike": {f"aws:ResourceTag/{_NODE_CLASS_TAG}": "*"},
            },
        },
        {
            "Sid": "AllowAPIServerEndpointDiscovery",
            "Effect": "Allow",
            "Resource": f"arn:{partition}:eks:{region}:{account}:cluster/{cluster_name}",
            "Action": "eks:DescribeCluster",
        },
        {
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Resource": queue_arn,
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
        },
        {
            # Describe calls EC2 does not scope to resources, held to the stack's region.
            "Sid": "AllowRegionalReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": [
                "ec2:DescribeCapacityReservations",
                "ec2:DescribeImages",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceStatus",
                "ec2:DescribeInstanceTypeOfferings",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeLaunchTemplates",
                "ec2:DescribePlacementGroups",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSpotPriceHistory",
                "ec2:DescribeSubnets",
            ],
            "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
        },
        {
            # The EKS-optimized AMI ids behind the AMI alias (public SSM parameters).
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
            "Action": "ssm:GetParameter",
        },
        {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Resource": "*", "Action": "pricing:GetProducts"},
        {"Sid": "AllowUnscopedInstanceProfileListAction", "Effect": "Allow", "Resource": "*", "Action": "iam:ListInstanceProfiles"},
        {"Sid": "AllowInstanceProfileReadActions", "Effect": "Allow", "Resource": profiles, "Action": "iam:GetInstanceProfile"},
    ]
    return {"Version": _VERSION, "Statement": statements}


def interruption_queue_policy(queue_arn: str) -> Policy:
    """EventBridge may send to the queue; nothing may reach it without TLS (same file,
    KarpenterInterruptionQueuePolicy)."""
    return {
        "Version": _VERSION,
        "Id": "EC2InterruptionPolicy",
        "Statement": [
            {
                "Sid": "EventBridgeSends",
                "Effect": "Allow",
                "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
            },
            {
                "Sid": "DenyHTTP",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:*",
                "Resource": queue_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }


"""Declared resources as checks read them: the same shape in an offline synthesis and in a real
preview, and the few helpers that read engine-shaped values.

The policy rules (components.checks.rules) and the fit proof (components.checks.fit) both read
resources this way; this module is their common ground (the type tokens they read among it), so
neither imports the other's internals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

# Type tokens of the resources the checks read (pulumi-aws 7, pulumi-gcp 10, pulumi-kubernetes 4).
ASG_TAG = "aws:autoscaling/tag:Tag"
EC2_TAG = "aws:ec2/tag:Tag"
EFS_FILE_SYSTEM = "aws:efs/fileSystem:FileSystem"
EKS_ADDON = "aws:eks/addon:Addon"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
IAM_POLICY = "aws:iam/policy:Policy"
IAM_ROLE = "aws:iam/role:Role"
IAM_ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
IAM_ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
# Karpenter's custom resources (aws/karpenter-provider-aws@v1.14.1 pkg/apis/crds).
KARPENTER_NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
KARPENTER_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
S3_BUCKET = "aws:s3/bucket:Bucket"
SQS_QUEUE = "aws:sqs/queue:Queue"
SQS_QUEUE_POLICY = "aws:sqs/queuePolicy:QueuePolicy"
S3_BUCKET_ACL = "aws:s3/bucketAcl:BucketAcl"
S3_BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
S3_ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
S3_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
GCP_PROJECT_IAM_BINDING = "gcp:projects/iAMBinding:IAMBinding"
GCP_PROJECT_IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
GCS_BUCKET = "gcp:storage/bucket:Bucket"
GCS_BUCKET_IAM_BINDING = "gcp:storage/bucketIAMBinding:BucketIAMBinding"
GCS_BUCKET_IAM_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
KUEUE_TYPE_PREFIX = "kubernetes:kueue.x-k8s.io/v1beta2:"
PRIORITY_CLASS = "kubernetes:scheduling.k8s.io/v1:PriorityClass"

# The offline synth writes values unknown at preview time as this marker (infra.synth._clean);
# the pack maps CrossGuard's unknowns to it too.
UNKNOWN = "[unknown]"


@dataclass(frozen=True)
class Resource:
    """One declared resource, as rules see it in a synthesis and in a real preview alike."""

    type: str
    name: str
    props: Mapping[str, Any]
    protect: bool = False
    ignore_changes: tuple[str, ...] = ()
    # `type::name` of every resource this one depends on, explicitly or through its inputs.
    depends_on: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.type}::{self.name}"


def get(value: Any, *path: str | int) -> Any:
    """The value at `path`: None where a step is missing, UNKNOWN where a step is unknown.

    Checks report a value only when it is known to be wrong, so an unknown never fails one,
    while a missing value means the provider's default.
    """
    for step in path:
        if value == UNKNOWN:
            return UNKNOWN
        if isinstance(step, int):
            if not isinstance(value, list) or step >= len(value):
                return None
            value = value[step]
        else:
            if not isinstance(value, Mapping):
                return None
            value = value.get(step)
    return value


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def node_group_instance_types(node_group: Resource, resources: Sequence[Resource]) -> list[str]:
    """An EKS node group's instance types: its own, else those of the launch templates it uses.

    EKS takes them from one place or the other (CreateNodegroup `instanceTypes`); a Capacity Block
    node group must name its type in the launch template (EKS "Create a managed node group with
    Capacity Blocks for ML").
    """
    own = [t for t in items(get(node_group.props, "instanceTypes")) if isinstance(t, str)]
    if own:
        return own
    return [
        str(get(r.props, "instanceType"))
        for r in resources
        if r.type == LAUNCH_TEMPLATE and r.key in node_group.depends_on and isinstance(get(r.props, "instanceType"), str)
    ]


def as_list(value: Any) -> list[Any]:
    """IAM's one-or-many fields (Action, Resource, Statement) as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def statements(document: Any) -> list[Any]:
    """Statements of an IAM policy document given as JSON text or as an object."""
    if isinstance(document, str):
        if document == UNKNOWN:
            return []
        try:
            document = json.loads(document)
        except json.JSONDecodeError:
            return []
    return as_list(get(document, "Statement"))

"""Security rules: private prod control planes, encryption at rest, IMDSv2, no public buckets, no wildcard IAM, trainers never root."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from components.checks.declared import (
    KARPENTER_NODE_CLASS,
    EFS_FILE_SYSTEM,
    EKS_CLUSTER,
    EKS_NODE_GROUP,
    GCP_PROJECT_IAM_BINDING,
    GCP_PROJECT_IAM_MEMBER,
    GCS_BUCKET,
    GCS_BUCKET_IAM_BINDING,
    GCS_BUCKET_IAM_MEMBER,
    GKE_CLUSTER,
    IAM_POLICY,
    IAM_ROLE,
    IAM_ROLE_POLICY,
    IAM_ROLE_POLICY_ATTACHMENT,
    LAUNCH_TEMPLATE,
    S3_BUCKET,
    S3_BUCKET_ACL,
    S3_BUCKET_POLICY,
    S3_ENCRYPTION,
    S3_PUBLIC_ACCESS_BLOCK,
    UNKNOWN,
    Resource,
)
from components.checks.declared import as_list as _as_list
from components.checks.declared import get as _get
from components.checks.declared import items as _items
from components.checks.declared import mapping as _mapping
from components.checks.declared import statements as _iam_statements
from components.checks.rules.base import Context, Violation, is_unknown, true_or_unknown, truthy
from components.naming import TRAINER_SERVICE_ACCOUNT

ANYWHERE = "0.0.0.0/0"


PUBLIC_S3_ACLS = ("public-read", "public-read-write", "authenticated-read")
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
# Primitive roles: every permission of (nearly) every service in the project.
GCP_PRIMITIVE_ROLES = ("roles/owner", "roles/editor")
ADMIN_POLICY_SUFFIX = ":policy/AdministratorAccess"
# Actions that only read; AWS scopes many of them to no resource, so `Resource: "*"` is normal.
READ_ONLY_VERBS = ("Describe", "Get", "List")
PUBLIC_ACCESS_BLOCK_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
WORKLOAD_KINDS = ("Pod", "Job", "CronJob", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "JobSet")


def _restricted(cidrs: Any) -> bool:
    """A public endpoint open only to named ranges, none of them the whole internet."""
    blocks = [c for c in _items(cidrs) if isinstance(c, str)]
    return bool(blocks) and ANYWHERE not in blocks


def prod_control_plane_private(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """Prod's API is private, or public only to named CIDR ranges (CI, VPN), never to anyone."""
    if ctx.environment != "prod":
        return []
    out: list[Violation] = []
    for res in resources:
        if res.type == EKS_CLUSTER:
            public = _get(res.props, "vpcConfig", "endpointPublicAccess")
            cidrs = _get(res.props, "vpcConfig", "publicAccessCidrs")
            # EKS opens the public endpoint unless told otherwise.
            if (public is None or truthy(public)) and not _restricted(cidrs) and not is_unknown(cidrs):
                out.append(
                    Violation(
                        "prod-control-plane-private",
                        res.key,
                        "EKS API endpoint is open to anyone: set vpcConfig.endpointPublicAccess=false, "
                        "or restrict publicAccessCidrs to your CI and VPN ranges",
                    )
                )
        elif res.type == GKE_CLUSTER:
            private_endpoint = _get(res.props, "privateClusterConfig", "enablePrivateEndpoint")
            ip_endpoints = _get(res.props, "controlPlaneEndpointsConfig", "ipEndpointsConfig", "enabled")
            blocks = [b.get("cidrBlock") for b in _items(_get(res.props, "masterAuthorizedNetworksConfig", "cidrBlocks")) if isinstance(b, Mapping)]
            google_ranges = _get(res.props, "masterAuthorizedNetworksConfig", "gcpPublicCidrsAccessEnabled")
            authorized = _restricted(blocks) and not truthy(google_ranges)
            if not true_or_unknown(private_endpoint) and ip_endpoints is not False and not is_unknown(ip_endpoints) and not authorized:
                out.append(
                    Violation(
                        "prod-control-plane-private",
                        res.key,
                        "GKE control plane is open to anyone: set privateClusterConfig.enablePrivateEndpoint=true, "
                        "or list authorized networks (not 0.0.0.0/0)",
                    )
                )
    return out


def _configured(
    resources: Sequence[Resource], config_type: str, satisfies: Callable[[Mapping[str, Any]], bool]
) -> set[str]:
    """Keys of the resources (buckets) that a `config_type` resource satisfying the check depends on:
    S3 settings are separate resources linked to their bucket by dependency."""
    return {
        dep
        for res in resources
        if res.type == config_type and satisfies(_mapping(res.props))
        for dep in res.depends_on
    }


def encrypted_storage(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    encrypted_by_resource = _configured(
        resources,
        S3_ENCRYPTION,
        lambda props: any(_get(r, "applyServerSideEncryptionByDefault", "sseAlgorithm") for r in _items(_get(props, "rules"))),
    )
    for res in resources:
        if res.type == LAUNCH_TEMPLATE:
            out += _launch_template_encryption(res)
        elif res.type == KARPENTER_NODE_CLASS:
            out += _node_class_encryption(res)
        elif res.type == EKS_NODE_GROUP and _get(res.props, "launchTemplate") is None:
            out.append(
                Violation(
                    "encrypted-storage",
                    res.key,
                    "node group without a launch template: its disks follow the account's EBS default; "
                    "use a launch template whose block device mappings set encrypted",
                )
            )
        elif res.type == EFS_FILE_SYSTEM:
            encrypted = _get(res.props, "encrypted")
            # EFS encryption at rest is chosen at creation and off unless asked for.
            if not truthy(encrypted) and not is_unknown(encrypted):
                out.append(
                    Violation(
                        "encrypted-storage",
                        res.key,
                        "EFS file system is not encrypted at rest: set encrypted=true (and kmsKeyId for your own key)",
                    )
                )
        elif res.type == S3_BUCKET:
            inline = _get(res.props, "serverSideEncryptionConfiguration", "rule", "applyServerSideEncryptionByDefault", "sseAlgorithm")
            if not inline and res.key not in encrypted_by_resource:
                out.append(
                    Violation(
                        "encrypted-storage",
                        res.key,
                        "bucket has no server-side encryption configuration "
                        "(an aws.s3.BucketServerSideEncryptionConfiguration for it)",
                    )
                )
    return out


def _launch_template_encryption(res: Resource) -> list[Violation]:
    mappings = _get(res.props, "blockDeviceMappings")
    if is_unknown(mappings):
        return []
    if not _items(mappings):
        return [
            Violation(
                "encrypted-storage",
                res.key,
                "launch template declares no block device mappings, so the root volume's encryption "
                "is left to the account default: map the root volume with ebs.encrypted=true",
            )
        ]
    return [
        Violation(
            "encrypted-storage",
            res.key,
            f"EBS volume {_get(m, 'deviceName') or f'#{i}'} is not encrypted: set ebs.encrypted=true",
        )
        for i, m in enumerate(_items(mappings))
        if _get(m, "ebs") is not None and not true_or_unknown(_get(m, "ebs", "encrypted"))
    ]


def _node_class_encryption(res: Resource) -> list[Violation]:
    """An EC2NodeClass without blockDeviceMappings gets its AMI family's default root volume,
    which Karpenter encrypts (pkg/providers/amifamily DefaultEBS: Encrypted true); a mapping it
    declares must say so itself."""
    return [
        Violation("encrypted-storage", res.key, f"EC2NodeClass volume {_get(m, 'deviceName') or f'#{i}'} is not encrypted: set ebs.encrypted: true")
        for i, m in enumerate(_items(_get(res.props, "spec", "blockDeviceMappings")))
        if _get(m, "ebs") is not None and not true_or_unknown(_get(m, "ebs", "encrypted"))
    ]


def imdsv2_required(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    for res in resources:
        if res.type == KARPENTER_NODE_CLASS:
            # The CRD defaults metadataOptions to httpTokens required (karpenter.k8s.aws_ec2nodeclasses.yaml).
            tokens = _get(res.props, "spec", "metadataOptions", "httpTokens")
            if tokens not in (None, "required", UNKNOWN):
                out.append(Violation("imdsv2-required", res.key, f"EC2NodeClass metadataOptions.httpTokens is {tokens}: set it to required"))
        if res.type == LAUNCH_TEMPLATE:
            tokens = _get(res.props, "metadataOptions", "httpTokens")
            if tokens not in ("required", UNKNOWN):
                out.append(
                    Violation(
                        "imdsv2-required",
                        res.key,
                        f"metadataOptions.httpTokens is {tokens or 'unset'}: set it to required (IMDSv2 only)",
                    )
                )
        elif res.type == EKS_NODE_GROUP and _get(res.props, "launchTemplate") is None:
            out.append(
                Violation(
                    "imdsv2-required",
                    res.key,
                    "node group without a launch template: instance metadata settings are EKS defaults; "
                    "use a launch template with metadataOptions.httpTokens=required",
                )
            )
    return out


def no_public_buckets(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    blocked = _configured(
        resources,
        S3_PUBLIC_ACCESS_BLOCK,
        lambda props: all(true_or_unknown(_get(props, flag)) for flag in PUBLIC_ACCESS_BLOCK_FLAGS),
    )
    for res in resources:
        if res.type == S3_BUCKET:
            if res.key not in blocked:
                out.append(
                    Violation(
                        "no-public-buckets",
                        res.key,
                        "bucket has no BucketPublicAccessBlock with all four of " + ", ".join(PUBLIC_ACCESS_BLOCK_FLAGS) + " true",
                    )
                )
            if _get(res.props, "acl") in PUBLIC_S3_ACLS:
                out.append(Violation("no-public-buckets", res.key, f"bucket ACL is {_get(res.props, 'acl')}"))
        elif res.type == S3_BUCKET_ACL and _get(res.props, "acl") in PUBLIC_S3_ACLS:
            out.append(Violation("no-public-buckets", res.key, f"bucket ACL is {_get(res.props, 'acl')}"))
        elif res.type == S3_BUCKET_POLICY:
            out += [
                Violation("no-public-buckets", res.key, "bucket policy allows anyone (Principal \"*\") without a condition")
                for stmt in _iam_statements(_get(res.props, "policy"))
                if _get(stmt, "Effect") == "Allow" and _anyone(_get(stmt, "Principal")) and not _get(stmt, "Condition")
            ]
        elif res.type == GCS_BUCKET and _get(res.props, "publicAccessPrevention") not in ("enforced", UNKNOWN):
            out.append(Violation("no-public-buckets", res.key, "publicAccessPrevention is not enforced"))
        elif res.type in (GCS_BUCKET_IAM_MEMBER, GCS_BUCKET_IAM_BINDING):
            members = [_get(res.props, "member")] + _items(_get(res.props, "members"))
            out += [
                Violation("no-public-buckets", res.key, f"grants {_get(res.props, 'role')} to {member}")
                for member in members
                if member in PUBLIC_MEMBERS
            ]
    return out


def _anyone(principal: Any) -> bool:
    if principal == "*":
        return True
    return isinstance(principal, Mapping) and "*" in _as_list(principal.get("AWS"))


def no_wildcard_iam(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    for res in resources:
        documents: list[Any] = []
        if res.type in (IAM_POLICY, IAM_ROLE_POLICY):
            documents.append(_get(res.props, "policy"))
        elif res.type == IAM_ROLE:
            documents += [_get(p, "policy") for p in _items(_get(res.props, "inlinePolicies"))]
        elif res.type == IAM_ROLE_POLICY_ATTACHMENT:
            arn = _get(res.props, "policyArn")
            if isinstance(arn, str) and arn.endswith(ADMIN_POLICY_SUFFIX):
                out.append(Violation("no-wildcard-iam", res.key, "attaches AdministratorAccess"))
        elif res.type in (GCP_PROJECT_IAM_MEMBER, GCP_PROJECT_IAM_BINDING):
            role = _get(res.props, "role")
            if role in GCP_PRIMITIVE_ROLES:
                out.append(Violation("no-wildcard-iam", res.key, f"grants the primitive role {role}; grant a predefined role"))
        for document in documents:
            out += [Violation("no-wildcard-iam", res.key, problem) for problem in _statement_problems(document)]
    return out


def _statement_problems(document: Any) -> list[str]:
    problems: list[str] = []
    for stmt in _iam_statements(document):
        if _get(stmt, "Effect") != "Allow":
            continue
        if _get(stmt, "NotAction") not in (None, UNKNOWN):
            problems.append("Allow with NotAction grants everything not listed")
            continue
        actions = [a for a in _as_list(_get(stmt, "Action")) if isinstance(a, str)]
        wild = sorted(a for a in actions if a == "*" or a.endswith(":*"))
        if wild:
            problems.append(f"allows every action of {', '.join(wild)}")
            continue
        resources = _as_list(_get(stmt, "Resource"))
        writes = sorted(a for a in actions if not _read_only(a))
        if "*" in resources and writes and not _get(stmt, "Condition"):
            problems.append(f"allows {', '.join(writes)} on every resource (\"*\") without a condition")
    return problems


def _read_only(action: str) -> bool:
    verb = action.split(":", 1)[-1]
    return verb.startswith(READ_ONLY_VERBS)


def trainer_non_root(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    for res in resources:
        if not res.type.startswith("kubernetes:") or _get(res.props, "kind") not in WORKLOAD_KINDS:
            continue
        for path, pod in _pod_specs(res.props):
            if _get(pod, "serviceAccountName") != TRAINER_SERVICE_ACCOUNT:
                continue
            problem = _root_problem(pod)
            if problem:
                out.append(Violation("trainer-non-root", res.key, f"{path}: {problem}"))
    return out


def _pod_specs(obj: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(path, pod spec) of every pod a workload object runs."""
    kind = _get(obj, "kind")
    if kind == "Pod":
        return [("spec", _get(obj, "spec"))]
    if kind == "CronJob":
        return [("spec.jobTemplate.spec.template.spec", _get(obj, "spec", "jobTemplate", "spec", "template", "spec"))]
    if kind == "JobSet":
        return [
            (f"spec.replicatedJobs[{i}].template.spec.template.spec", _get(job, "template", "spec", "template", "spec"))
            for i, job in enumerate(_items(_get(obj, "spec", "replicatedJobs")))
        ]
    return [("spec.template.spec", _get(obj, "spec", "template", "spec"))]


def _root_problem(pod: Any) -> str | None:
    pod_ctx = _mapping(_get(pod, "securityContext"))
    pod_non_root = true_or_unknown(_get(pod_ctx, "runAsNonRoot"))
    if _get(pod_ctx, "runAsUser") == 0:
        return "securityContext.runAsUser is 0 (root)"
    containers = _items(_get(pod, "initContainers")) + _items(_get(pod, "containers"))
    for container in containers:
        sc = _mapping(_get(container, "securityContext"))
        name = _get(container, "name")
        if _get(sc, "runAsUser") == 0:
            return f"container {name} runs as UID 0"
        non_root = _get(sc, "runAsNonRoot")
        if non_root is False or (non_root is None and not pod_non_root):
            return f"container {name} may run as root: set securityContext.runAsNonRoot=true"
    return None

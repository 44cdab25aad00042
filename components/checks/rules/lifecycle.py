"""Lifecycle rules: prod resources protected, autoscaler-owned fields ignored, Kubernetes in standard support,
EKS resources ordered after their roles' policies."""

from __future__ import annotations

from typing import Sequence

from components.checks.declared import (
    EKS_ADDON,
    EKS_CLUSTER,
    EKS_NODE_GROUP,
    GCS_BUCKET,
    GKE_CLUSTER,
    GKE_NODE_POOL,
    IAM_ROLE,
    IAM_ROLE_POLICY,
    IAM_ROLE_POLICY_ATTACHMENT,
    S3_BUCKET,
    Resource,
)
from components.checks.declared import get as _get
from components.checks.rules.base import Context, Violation, is_unknown
from components.facts import catalog


def prod_protected(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    if ctx.environment != "prod":
        return []
    kinds = {EKS_CLUSTER: "cluster", GKE_CLUSTER: "cluster", S3_BUCKET: "data bucket", GCS_BUCKET: "data bucket"}
    return [
        Violation("prod-protected", res.key, f"prod {kinds[res.type]} is not protected: set protect=True")
        for res in resources
        if res.type in kinds and not res.protect
    ]


def autoscaler_drift_ignored(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    for res in resources:
        if res.type == EKS_NODE_GROUP and not _ignored(res, "scalingConfig.desiredSize"):
            out.append(
                Violation("autoscaler-drift-ignored", res.key, "scalingConfig.desiredSize is not in ignoreChanges")
            )
        elif res.type == GKE_NODE_POOL and _get(res.props, "autoscaling") is not None:
            out += [
                Violation("autoscaler-drift-ignored", res.key, f"{prop} is set on an autoscaled pool but not in ignoreChanges")
                for prop in ("nodeCount", "initialNodeCount")
                if _get(res.props, prop) is not None and not _ignored(res, prop)
            ]
    return out


def _ignored(res: Resource, path: str) -> bool:
    """Whether ignoreChanges covers `path` (itself or an enclosing property)."""
    return any(path == p or path.startswith(f"{p}.") for p in res.ignore_changes)


# Where each cloud's cluster names its Kubernetes minor: EKS `version`; GKE `minMasterVersion` (the
# release channel upgrades from there).
_CLUSTER_VERSIONS: dict[str, tuple[catalog.Cloud, str]] = {EKS_CLUSTER: ("aws", "version"), GKE_CLUSTER: ("gcp", "minMasterVersion")}


def kubernetes_standard_support(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    for res in resources:
        if res.type not in _CLUSTER_VERSIONS:
            continue
        cloud, key = _CLUSTER_VERSIONS[res.type]
        version = _get(res.props, key)
        if not isinstance(version, str) or is_unknown(version):
            continue
        minor = ".".join(version.split(".")[:2])
        if catalog.in_standard_support(cloud, minor, ctx.today):
            continue
        ends = catalog.STANDARD_SUPPORT_ENDS[cloud]
        current = [v for v in ends if catalog.in_standard_support(cloud, v, ctx.today)]
        ended = f"left standard support on {ends[minor]}" if minor in ends else "has no known standard support window"
        out.append(
            Violation(
                "kubernetes-standard-support",
                res.key,
                f"Kubernetes {minor} {ended} ({'EKS' if cloud == 'aws' else 'GKE'}, judged on {ctx.today}): set "
                f"cluster.kubernetesVersion to {' or '.join(current) or 'a newer minor'}",
            )
        )
    return out


def eks_role_policies_first(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """An EKS cluster, node group or add-on uses its role's policies while it is created and while it
    is deleted (EKS removes its ENIs and instances as the role): it must depend on every policy of
    every role it names, so Pulumi creates them before it and deletes them after it
    (terraform-provider-aws docs, eks_cluster and eks_node_group: depends_on the attachments)."""
    policies: dict[str, list[str]] = {}
    for res in resources:
        if res.type in (IAM_ROLE_POLICY_ATTACHMENT, IAM_ROLE_POLICY):
            for role in (key for key in res.depends_on if key.startswith(f"{IAM_ROLE}::")):
                policies.setdefault(role, []).append(res.key)
    return [
        Violation("eks-role-policies-first", res.key, f"does not depend on {policy}, a policy of the role it uses")
        for res in resources
        if res.type in (EKS_CLUSTER, EKS_NODE_GROUP, EKS_ADDON)
        for role in res.depends_on
        for policy in policies.get(role, [])
        if policy not in res.depends_on
    ]

"""Who may do what, where, with which identity: the teams' RBAC and data boundaries as data.

A team's members get one Role in the team's namespace and nothing cluster-wide; its jobs run as
the team's `trainer` service account, bound to a cloud identity of the team's own that reaches
only `teams/<team>/` and reads `datasets/` (components.aws.iam, components.gcp.platform). The
platform's admins are the only subjects of a ClusterRoleBinding the platform creates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from components.spec import PlatformSpec, TeamSpec

# The label every team namespace (and a team's volume) carries: its team.
TEAM_LABEL = "gpu-platform.io/team"
# The bucket's layout: each team's own prefix, and datasets every team may read.
TEAMS_PREFIX = "teams/"
DATASETS_PREFIX = "datasets/"
# Where jobs see the shared datasets (read-only) beside their team's /data.
DATASETS_MOUNT = "/datasets"

# The Role a team's members hold in the team's namespace, and its binding.
TEAM_ROLE = "team-member"
TEAM_ROLE_BINDING = "team-members"
# The ClusterRoleBinding of `platform.admins` to the built-in cluster-admin ClusterRole.
ADMINS_BINDING = "gpu-platform-admins"
CLUSTER_ADMIN_ROLE = "cluster-admin"
# EKS access entries put a team's members in this Kubernetes group, which the team's RoleBinding
# names. EKS refuses groups starting with `system:` (EKS API, CreateAccessEntry kubernetesGroups).
_EKS_TEAM_GROUP_PREFIX = "gpu-platform:team:"

_JOB_VERBS = ["create", "delete", "get", "list", "watch", "patch", "update"]
_READ_VERBS = ["get", "list", "watch"]
# Claims without `delete`: a team's `training-data` claim is pre-bound to its volume, and deleting
# it leaves the Retain volume Released, bound to the deleted claim's uid, so a new claim of the
# same name stays Pending until an admin clears the volume's claimRef (Kubernetes "Persistent
# Volumes", Retain reclaim policy). Nothing a member runs needs to delete a claim.
_CLAIM_VERBS = ["create", "get", "list", "watch", "patch", "update"]
# What a member may do in the team's namespace (Kubernetes RBAC; API groups: jobset.x-k8s.io for
# JobSets, batch for Jobs, kueue.x-k8s.io for LocalQueues and Workloads). `kubectl exec` opens
# pods/exec with `create`, and with `get` over WebSockets since Kubernetes 1.31 (KEP-4006), so
# both are granted. Pods are not created directly: Kueue manages every job in the namespace.
TEAM_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": _JOB_VERBS},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _JOB_VERBS},
    {"apiGroups": [""], "resources": ["pods"], "verbs": [*_READ_VERBS, "delete"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": _READ_VERBS},
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": _CLAIM_VERBS},
    {"apiGroups": [""], "resources": ["events"], "verbs": _READ_VERBS},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues", "workloads"], "verbs": _READ_VERBS},
]


def team_prefix(team: str) -> str:
    return f"{TEAMS_PREFIX}{team}/"


def eks_team_group(team: str) -> str:
    return f"{_EKS_TEAM_GROUP_PREFIX}{team}"


@dataclass(frozen=True)
class Subject:
    """An RBAC subject (rbac.authorization.k8s.io/v1 Subject: kind User or Group, and a name)."""

    kind: Literal["User", "Group"]
    name: str


def _subject(member: str) -> Subject:
    """`user:x` / `group:x` as the cluster authenticates them: GKE names Google users and groups by
    email (GKE docs, "Role-based access control"); existing clusters by their own names."""
    kind, _, name = member.partition(":")
    return Subject("Group" if kind == "group" else "User", name)


def team_subjects(spec: PlatformSpec, team: TeamSpec) -> list[Subject]:
    """Whom a team's RoleBinding names: on EKS the team's group, which access entries map each
    member's IAM principal to; elsewhere each member."""
    if not team.members:
        return []
    if spec.cloud == "aws":
        return [Subject("Group", eks_team_group(team.name))]
    return [_subject(member) for member in team.members]


def cluster_admin_subjects(spec: PlatformSpec) -> list[Subject]:
    """Subjects of the admins' ClusterRoleBinding; none on EKS, where admins get the EKS cluster
    admin access policy through their access entries instead."""
    if spec.cloud == "aws":
        return []
    return [_subject(admin) for admin in spec.admins]


@dataclass(frozen=True)
class EksAccess:
    """One IAM principal's EKS access entry: cluster admin, and/or the Kubernetes groups of the
    teams it belongs to. One entry per principal (EKS allows one per principal ARN)."""

    principal_arn: str
    admin: bool
    groups: tuple[str, ...]


def eks_access(spec: PlatformSpec) -> list[EksAccess]:
    admins = [*spec.aws_settings.admins, *spec.admins]
    groups: dict[str, list[str]] = {}
    for team in spec.scheduling.teams:
        for member in team.members:
            groups.setdefault(member, []).append(eks_team_group(team.name))
    principals = list(dict.fromkeys([*admins, *groups]))
    return [EksAccess(arn, arn in admins, tuple(groups.get(arn, ()))) for arn in principals]

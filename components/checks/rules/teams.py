"""Tenancy rules: Kueue manages every team namespace, each team's identity and RBAC stay in the team."""

from __future__ import annotations

from typing import Sequence

from components import tenancy
from components.checks import file_system_isolation, isolation, pod_security_admission, storage_access
from components.checks.declared import Resource
from components.checks.rules.base import Context, Violation
from components.naming import DEFAULT_TEAM


def _team_namespaces(resources: Sequence[Resource], ctx: Context) -> list[str]:
    declared = [team.name for team in ctx.spec.scheduling.teams] if ctx.spec is not None else []
    return isolation.team_namespaces(resources, declared)


def kueue_manages_team_namespaces(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    teams = _team_namespaces(resources, ctx)
    if ctx.spec is not None and not ctx.spec.scheduling.teams:
        teams = [DEFAULT_TEAM]
    return [
        Violation("kueue-manages-team-namespaces", key, message)
        for key, message in isolation.kueue_management(resources, teams)
    ]


def team_identity_isolated(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    return [
        Violation("team-identity-isolated", key, message)
        for key, message in isolation.identity_isolation(resources, _team_namespaces(resources, ctx))
    ]


def team_rbac_namespaced(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """Team subjects as the spec names them (admins excepted: they are cluster-admin by design);
    EKS team groups are recognised by their prefix without a spec."""
    members: dict[str, list[str]] = {}
    if ctx.spec is not None:
        admins = {subject.name for subject in tenancy.cluster_admin_subjects(ctx.spec)}
        for team in ctx.spec.scheduling.teams:
            names = [subject.name for subject in tenancy.team_subjects(ctx.spec, team)]
            members[team.name] = [name for name in names if name not in admins]
    return [
        Violation("team-rbac-namespaced", key, message) for key, message in isolation.rbac_namespacing(resources, members)
    ]


def job_storage_reachable(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """Every GCS FUSE volume of every job `gpu-platform job` accepts mounts and serves its pod's
    identity (components.checks.storage_access)."""
    if ctx.spec is None:
        return []
    return [
        Violation("job-storage-reachable", key, message)
        for key, message in storage_access.unreachable(resources, ctx.spec)
    ]


def team_file_system_isolated(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """No pod reaches the EFS file system except through its own team's claim: the file system
    policy, the team volumes' mounts, the NFS egress policies and the CNI that enforces them
    (components.checks.file_system_isolation)."""
    return [
        Violation("team-file-system-isolated", key, message)
        for key, message in file_system_isolation.file_system_isolation(resources)
    ]


def team_pod_security_held(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """A team namespace PSA leaves at privileged (GKE GPUDirect) is held to restricted by the
    bound ValidatingAdmissionPolicy (components.checks.pod_security_admission)."""
    return [
        Violation("team-pod-security-held", key, message)
        for key, message in pod_security_admission.unheld(resources, _team_namespaces(resources, ctx), ctx.spec)
    ]

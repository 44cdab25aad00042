"""Tenancy rules: who the teams' members and the admins are, in each cloud's own terms, and
fair-sharing weights that name real teams."""

from __future__ import annotations

import re
from collections import Counter

from components.spec.aws_rules import IAM_PRINCIPAL_ARN
from components.spec.models import Cloud, PlatformSpec
from components.spec.problems import ROOT, Problem, did_you_mean

# Google principals as IAM and GKE RBAC name them: `user:` or `group:` and an email address.
_GOOGLE_MEMBER = re.compile(r"^(user|group):[^@\s:]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")
# Kubernetes users and groups as an existing cluster's authenticator names them.
_KUBERNETES_MEMBER = re.compile(r"^(user|group):\S+$")
# GKE reads member groups of exactly this group for RBAC (GKE docs, "Configure Google Groups for
# RBAC": the group must be named gke-security-groups@<your domain>).
_GKE_SECURITY_GROUP = re.compile(r"^gke-security-groups@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$")

# Kubernetes reserves the `system:` prefix of user and group names for its own identities
# (system:anonymous, system:unauthenticated, system:authenticated, system:masters,
# system:serviceaccounts[:<ns>], system:serviceaccount:<ns>:<name>, system:nodes, ...): binding one
# grants a role to every caller of that kind, e.g. system:authenticated is anyone with a token
# (kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-subjects, "The prefix
# system: is reserved for Kubernetes system use"; .../authentication/#anonymous-requests).
_SYSTEM_PREFIX = "system:"

_EXPECTED: dict[Cloud, str] = {
    "aws": "an IAM role or user ARN (arn:aws:iam::<account>:role/<name>)",
    "gcp": "user:<email> or group:<email>",
    "existing": "user:<name> or group:<name> as the cluster's authenticator names them",
}


def member_format_ok(cloud: Cloud, member: str) -> bool:
    if cloud == "aws":
        return bool(IAM_PRINCIPAL_ARN.match(member))
    if cloud == "gcp":
        return bool(_GOOGLE_MEMBER.match(member))
    return bool(_KUBERNETES_MEMBER.match(member))


def tenancy_problems(spec: PlatformSpec) -> list[Problem]:
    problems: list[Problem] = []
    for i, team in enumerate(spec.scheduling.teams):
        problems += _principal_problems(spec, team.members, f"{ROOT}.scheduling.teams[{i}].members")
    problems += _fair_sharing_problems(spec)
    problems += _principal_problems(spec, spec.admins, f"{ROOT}.admins")
    return problems + _rbac_group_problems(spec)


def _principal_problems(spec: PlatformSpec, principals: list[str], at: str) -> list[Problem]:
    problems: list[Problem] = []
    seen = Counter[str]()
    for j, principal in enumerate(principals):
        here = f"{at}[{j}]"
        seen[principal] += 1
        if seen[principal] == 2:
            problems.append(Problem(here, f"{principal!r} is listed twice"))
        builtin = _builtin_identity(principal)
        if builtin:
            problems.append(Problem(here, builtin))
        elif not member_format_ok(spec.cloud, principal):
            problems.append(Problem(here, f"expected {_EXPECTED[spec.cloud]} on cloud {spec.cloud}, got {principal!r}"))
        elif spec.cloud == "gcp" and principal.startswith("group:") and not _groups_for_rbac(spec):
            problems.append(
                Problem(
                    here,
                    f"{principal!r}: GKE binds Google Groups only with Google Groups for RBAC; set"
                    " gcp.rbacSecurityGroup (gke-security-groups@<domain>) or list the users",
                )
            )
    return problems


def _builtin_identity(principal: str) -> str | None:
    """Why `principal` names one of Kubernetes' own identities, which no member or admin may be."""
    _, _, name = principal.partition(":")
    if not name.startswith(_SYSTEM_PREFIX):
        return None
    return (
        f"{principal!r} is a Kubernetes built-in identity: names starting with {_SYSTEM_PREFIX!r} are reserved"
        " for Kubernetes itself, and binding one grants the role to every caller of that kind"
        " (system:authenticated is anyone with credentials, system:anonymous anyone at all); name people or groups"
    )


def _rbac_group_problems(spec: PlatformSpec) -> list[Problem]:
    group = spec.gcp.rbac_security_group if spec.gcp is not None else None
    if group is None or _GKE_SECURITY_GROUP.match(group):
        return []
    return [Problem(f"{ROOT}.gcp.rbacSecurityGroup", f"expected gke-security-groups@<your domain>, got {group!r}")]


def _groups_for_rbac(spec: PlatformSpec) -> bool:
    return spec.gcp is not None and spec.gcp.rbac_security_group is not None


def _fair_sharing_problems(spec: PlatformSpec) -> list[Problem]:
    at = f"{ROOT}.scheduling.fairSharing"
    fair = spec.scheduling.fair_sharing
    teams = [team.name for team in spec.scheduling.teams]
    problems: list[Problem] = []
    if fair.enabled and not teams:
        problems.append(Problem(f"{at}.enabled", "shares GPUs between teams: needs scheduling.teams"))
    if fair.weights and not fair.enabled:
        problems.append(Problem(f"{at}.weights", "weights act only with fair sharing: set enabled: true"))
    for team in fair.weights:
        if team not in teams:
            hint = did_you_mean(team, teams)
            problems.append(Problem(f"{at}.weights.{team}", f"no team named {team!r}{hint}; teams: {', '.join(teams) or 'none'}"))
    return problems

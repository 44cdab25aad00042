"""Tenancy guarantees, checked on declared resources as their consumers read them: the Kueue
configuration as Kueue parses it, IAM documents as IAM evaluates their resources and prefixes,
RBAC bindings as the API server resolves them. `components.checks.rules` turns each finding into a
violation of its mandatory rule; they run offline and in the CrossGuard pack alike.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Mapping, Sequence

import yaml

from components import tenancy
from components.checks.declared import (
    GCS_BUCKET_IAM_MEMBER,
    IAM_ROLE,
    IAM_ROLE_POLICY,
    UNKNOWN,
    Resource,
    get,
    items,
    mapping,
    statements,
)
from components.facts import charts
from components.kubernetes.queues import DEFAULT_LOCAL_QUEUE, NAMESPACE_NAME_LABEL
from components.tenancy import TEAM_LABEL

Finding = tuple[str | None, str]

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
LOCAL_QUEUE_SUFFIX = ":LocalQueue"
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
PERSISTENT_VOLUME = "kubernetes:core/v1:PersistentVolume"
GCS_FOLDER_IAM_MEMBER = "gcp:storage/managedFolderIamMember:ManagedFolderIamMember"
GSA_IAM_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
# Namespaces Kueue must leave alone: Kubernetes' own and the platform's releases.
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", *(chart.namespace for chart in charts.CHARTS))
_TEAM_PREFIX = re.compile(rf"{re.escape(tenancy.TEAMS_PREFIX)}([^/*]+)/")
_IRSA_SUBJECT = re.compile(r"^system:serviceaccount:([^:]+):(.+)$")
_WORKLOAD_IDENTITY_MEMBER = re.compile(r"^serviceAccount:[^\[]+\[([^/]+)/([^\]]+)\]$")


def team_namespaces(resources: Sequence[Resource], declared: Iterable[str] = ()) -> list[str]:
    """The team namespaces: those the spec names, and every Namespace carrying the team label."""
    labelled = [
        get(r.props, "metadata", "name")
        for r in resources
        if r.type == NAMESPACE and get(r.props, "metadata", "labels", TEAM_LABEL) not in (None, UNKNOWN)
    ]
    return sorted({*declared, *(n for n in labelled if isinstance(n, str))})


# --- kueue-manages-team-namespaces -----------------------------------------------------------


def selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector's verdict on `labels` (apimachinery LabelSelectorAsSelector): every
    matchLabels pair and every matchExpressions requirement must hold; an empty selector selects
    everything."""
    for key, value in mapping(get(selector, "matchLabels")).items():
        if labels.get(key) != value:
            return False
    for requirement in items(get(selector, "matchExpressions")):
        key, operator = get(requirement, "key"), get(requirement, "operator")
        values = items(get(requirement, "values"))
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _namespace_labels(resources: Sequence[Resource], namespace: str) -> dict[str, str]:
    """Labels a namespace carries on the cluster: the API server adds its name label (1.22+)."""
    labels: dict[str, str] = {}
    for r in resources:
        if r.type == NAMESPACE and get(r.props, "metadata", "name") == namespace:
            labels.update({k: v for k, v in mapping(get(r.props, "metadata", "labels")).items() if isinstance(v, str)})
    return {**labels, NAMESPACE_NAME_LABEL: namespace}


def kueue_configurations(resources: Sequence[Resource]) -> list[tuple[str, Any]]:
    """(resource, parsed Configuration) of every Kueue release, as the chart hands it to Kueue."""
    found: list[tuple[str, Any]] = []
    for r in resources:
        if r.type != HELM_RELEASE or get(r.props, "chart") != charts.KUEUE.reference:
            continue
        text = get(r.props, "values", "managerConfig", "controllerManagerConfigYaml")
        found.append((r.key, yaml.safe_load(text) if isinstance(text, str) else None))
    return found


def kueue_management(resources: Sequence[Resource], teams: Sequence[str]) -> list[Finding]:
    out: list[Finding] = []
    for key, config in kueue_configurations(resources):
        if get(config, "manageJobsWithoutQueueName") is not True:
            out.append((key, "manageJobsWithoutQueueName is not true: jobs without a queue label skip Kueue and its quotas"))
        selector = get(config, "managedJobsNamespaceSelector")
        if selector is None:
            out.append((key, "no managedJobsNamespaceSelector: Kueue would manage every namespace's jobs, system ones included"))
            continue
        for namespace in teams:
            if not selects(selector, _namespace_labels(resources, namespace)):
                out.append((key, f"managedJobsNamespaceSelector does not select team namespace {namespace!r}"))
        for namespace in SYSTEM_NAMESPACES:
            if selects(selector, _namespace_labels(resources, namespace)):
                out.append((key, f"managedJobsNamespaceSelector selects system namespace {namespace!r}"))
    queues = {
        (get(r.props, "metadata", "namespace"), get(r.props, "metadata", "name"))
        for r in resources
        if r.type.endswith(LOCAL_QUEUE_SUFFIX)
    }
    out += [
        (None, f"team namespace {namespace!r} has no LocalQueue {DEFAULT_LOCAL_QUEUE!r} for jobs that name no queue")
        for namespace in teams
        if (namespace, DEFAULT_LOCAL_QUEUE) not in queues
    ]
    return out


# --- team-identity-isolated ------------------------------------------------------------------


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _s3_object_statement(statement: Any) -> bool:
    actions = _strings(get(statement, "Action"))
    return get(statement, "Effect") == "Allow" and any(a.startswith("s3:") and "Bucket" not in a for a in actions)


def _bucket_wide(resource: str) -> bool:
    """An object ARN that reaches past any prefix: `arn:aws:s3:::bucket/*` or `*`."""
    return resource == "*" or bool(re.fullmatch(r"arn:aws[a-z-]*:s3:::[^/]+/\*", resource))


def identity_isolation(resources: Sequence[Resource], teams: Sequence[str]) -> list[Finding]:
    if not teams:
        return []
    out: list[Finding] = []
    for r in resources:
        if r.type == IAM_ROLE_POLICY:
            out += _iam_document_findings(r.key, statements(get(r.props, "policy")))
        if r.type == IAM_ROLE:
            namespaces = _trusted_trainer_namespaces(statements(get(r.props, "assumeRolePolicy")))
            if len(namespaces) > 1:
                out.append((r.key, f"trusted by the trainer accounts of several namespaces ({', '.join(namespaces)})"))
    out += _gcs_findings(resources)
    out += _volume_findings(resources)
    return out


def _iam_document_findings(key: str, document: list[Any]) -> list[Finding]:
    object_statements = [s for s in document if _s3_object_statement(s)]
    if not object_statements:
        return []
    out: list[Finding] = []
    reached = sorted({m for s in document for text in _strings(s) for m in _TEAM_PREFIX.findall(text)})
    if len(reached) > 1:
        out.append((key, f"reaches the prefixes of several teams ({', '.join(reached)})"))
    for statement in object_statements:
        wide = [res for res in _strings(get(statement, "Resource")) if _bucket_wide(res)]
        if wide:
            out.append((key, f"statement {get(statement, 'Sid') or '?'} reaches every team's objects ({', '.join(wide)})"))
    return out


def _trusted_trainer_namespaces(document: list[Any]) -> list[str]:
    subjects = [
        match.group(1)
        for text in _strings(document)
        if (match := _IRSA_SUBJECT.match(text)) and match.group(2) == "trainer"
    ]
    return sorted(set(subjects))


def _gcs_findings(resources: Sequence[Resource]) -> list[Finding]:
    out: list[Finding] = []
    folders: dict[str, set[str]] = {}
    for r in resources:
        if r.type == GCS_FOLDER_IAM_MEMBER:
            folder = get(r.props, "managedFolder")
            match = _TEAM_PREFIX.match(folder) if isinstance(folder, str) else None
            if match:
                folders.setdefault(str(get(r.props, "member")), set()).add(match.group(1))
        if r.type == GCS_BUCKET_IAM_MEMBER and str(get(r.props, "role")).startswith("roles/storage.object"):
            out.append((r.key, f"grants {get(r.props, 'role')} on the whole bucket to {get(r.props, 'member')}: every team's objects"))
    out += [
        (None, f"{member} reaches the folders of several teams ({', '.join(sorted(teams))})")
        for member, teams in sorted(folders.items())
        if len(teams) > 1
    ]
    bound: dict[str, set[str]] = {}
    for r in resources:
        if r.type == GSA_IAM_MEMBER and (match := _WORKLOAD_IDENTITY_MEMBER.match(str(get(r.props, "member")))):
            bound.setdefault(str(get(r.props, "serviceAccountId")), set()).add(match.group(1))
    out += [
        (None, f"{account} is usable from several namespaces ({', '.join(sorted(namespaces))})")
        for account, namespaces in sorted(bound.items())
        if len(namespaces) > 1
    ]
    return out


def _volume_findings(resources: Sequence[Resource]) -> list[Finding]:
    """A team's volume (its EFS access point) is bound only to a claim in the team's namespace."""
    out: list[Finding] = []
    for r in resources:
        if r.type != PERSISTENT_VOLUME:
            continue
        team = get(r.props, "metadata", "labels", TEAM_LABEL)
        claim_namespace = get(r.props, "spec", "claimRef", "namespace")
        if isinstance(team, str) and team != UNKNOWN and claim_namespace not in (team, UNKNOWN):
            out.append((r.key, f"team {team}'s volume is bound to a claim in namespace {claim_namespace!r}"))
    return out


# --- team-rbac-namespaced --------------------------------------------------------------------


def rbac_namespacing(resources: Sequence[Resource], members: Mapping[str, Sequence[str]]) -> list[Finding]:
    """`members`: per team, the RBAC subject names of its members (components.tenancy)."""
    team_of: dict[str, set[str]] = {}
    for team, names in members.items():
        for name in names:
            team_of.setdefault(name, set()).add(team)
    out: list[Finding] = []
    for r in resources:
        if r.type not in (CLUSTER_ROLE_BINDING, ROLE_BINDING):
            continue
        namespace = get(r.props, "metadata", "namespace")
        for subject in items(get(r.props, "subjects")):
            name = get(subject, "name")
            if not isinstance(name, str):
                continue
            teams = set(team_of.get(name, set()))
            if name.startswith(tenancy.eks_team_group("")):
                teams.add(name.removeprefix(tenancy.eks_team_group("")))
            if not teams:
                continue
            if r.type == CLUSTER_ROLE_BINDING:
                out.append((r.key, f"a ClusterRoleBinding names team subject {name!r} ({', '.join(sorted(teams))})"))
            elif namespace not in teams:
                out.append((r.key, f"binds team subject {name!r} ({', '.join(sorted(teams))}) in namespace {namespace!r}"))
    return out

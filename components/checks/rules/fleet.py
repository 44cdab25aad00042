"""Fleet rules: the access a MultiKueue manager holds on a worker (components.fleet.worker)."""

from __future__ import annotations

from typing import Sequence

from components.checks.declared import Resource, get, items
from components.checks.rules.base import Context, Violation
from components.facts import charts, multikueue

RULE = "fleet-worker-least-privilege"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
ROLE_BINDINGS = (
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
)


def _names_manager(binding: Resource) -> bool:
    return any(
        get(s, "kind") == "ServiceAccount"
        and get(s, "name") == multikueue.WORKER_SERVICE_ACCOUNT
        and get(s, "namespace") in (charts.KUEUE.namespace, None)
        for s in items(get(binding.props, "subjects"))
    )


def _excess(role: Resource) -> list[str]:
    """What a role grants beyond the documented worker role, one line per grant."""
    found: list[str] = []
    for rule in items(get(role.props, "rules")):
        if items(get(rule, "nonResourceURLs")):
            found.append(f"non-resource URLs {items(get(rule, 'nonResourceURLs'))}")
        for group in items(get(rule, "apiGroups")):
            for resource in items(get(rule, "resources")):
                allowed = multikueue.allowed(str(group), str(resource))
                extra = sorted(str(v) for v in items(get(rule, "verbs")) if v == "*" or str(v) not in allowed)
                if extra or group == "*" or resource == "*":
                    found.append(f"{', '.join(extra) or 'access'} on {resource} in API group {group!r}")
    return found


def fleet_worker_least_privilege(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    roles = {str(get(r.props, "metadata", "name")): r for r in resources if r.type == CLUSTER_ROLE}
    found: list[Violation] = []
    for binding in resources:
        if binding.type not in ROLE_BINDINGS or not _names_manager(binding):
            continue
        name = str(get(binding.props, "roleRef", "name"))
        role = roles.get(name)
        if role is None or get(binding.props, "roleRef", "kind") != "ClusterRole":
            found.append(Violation(RULE, binding.key, f"binds the MultiKueue manager's account to {name}, a role this stack does not declare"))
            continue
        found += [
            Violation(RULE, role.key, f"grants the MultiKueue manager {grant}, beyond Kueue's documented worker role")
            for grant in _excess(role)
        ]
    return found

"""Fleet rules: the access a MultiKueue manager holds on a worker (components.fleet.worker), and
whether the manager can reach the worker's API endpoint at all."""

from __future__ import annotations

import ipaddress
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


REACH_RULE = "fleet-worker-reachable"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
# What EKS allows when `publicAccessCidrs` is unset on a public endpoint (EKS API
# VpcConfigRequest.publicAccessCidrs: "The default value is 0.0.0.0/0").
_EKS_DEFAULT_CIDRS = ("0.0.0.0/0",)


def _covered(cidr: str, allowed: Sequence[str]) -> bool:
    """Whether every address of `cidr` is inside one of `allowed` (IPv4, as both APIs take)."""
    network = ipaddress.IPv4Network(cidr, strict=False)
    return any(network.subnet_of(ipaddress.IPv4Network(a, strict=False)) for a in allowed)


def _eks_unreachable(cluster: Resource, manager_cidrs: Sequence[str]) -> list[str]:
    """EKS: the manager reaches the public endpoint from its egress ranges only if each is inside
    `publicAccessCidrs` (EKS user guide, "Cluster API server endpoint"). A private-only endpoint
    is reached from inside the VPC only (peering, Transit Gateway, VPN), which this check cannot
    see in the stack: it is a finding that says so."""
    if get(cluster.props, "vpcConfig", "endpointPublicAccess") is not True:
        return [
            "its EKS API endpoint is private: the manager reaches it only through a private path into the VPC "
            "(peering, Transit Gateway, VPN), which this stack does not declare; set aws.publicEndpoint: true with "
            "the manager's ranges in aws.publicAccessCidrs"
        ]
    allowed = [str(c) for c in items(get(cluster.props, "vpcConfig", "publicAccessCidrs"))] or list(_EKS_DEFAULT_CIDRS)
    return [
        f"its EKS public endpoint does not admit the manager's range {cidr} (aws.publicAccessCidrs: {', '.join(allowed)})"
        for cidr in manager_cidrs
        if not _covered(cidr, allowed)
    ]


def _gke_unreachable(cluster: Resource, manager_cidrs: Sequence[str]) -> list[str]:
    """GKE: with authorized networks on, the public endpoint admits only their CIDR blocks
    (GKE docs, "Add authorized networks for control plane access"); without the config, any
    address; a private endpoint only from inside the VPC."""
    if get(cluster.props, "privateClusterConfig", "enablePrivateEndpoint") is True:
        return ["its GKE control plane has only a private endpoint: the manager reaches it only from inside the VPC"]
    config = get(cluster.props, "masterAuthorizedNetworksConfig")
    if config is None:
        return []
    allowed = [str(get(b, "cidrBlock")) for b in items(get(config, "cidrBlocks"))]
    return [
        f"its GKE authorized networks do not admit the manager's range {cidr} (gcp.authorizedNetworks: {', '.join(allowed) or 'none'})"
        for cidr in manager_cidrs
        if not _covered(cidr, allowed)
    ]


def unreachable(resources: Sequence[Resource], manager_cidrs: Sequence[str]) -> list[tuple[str, str]]:
    """(resource key, why) for each way a worker's synthesized API endpoint refuses the manager,
    whose egress ranges are `platform.fleet.managerCidrs` of the manager stack."""
    found: list[tuple[str, str]] = []
    for resource in resources:
        if resource.type == EKS_CLUSTER:
            found += [(resource.key, why) for why in _eks_unreachable(resource, manager_cidrs)]
        elif resource.type == GKE_CLUSTER:
            found += [(resource.key, why) for why in _gke_unreachable(resource, manager_cidrs)]
    return found

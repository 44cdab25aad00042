"""The egress a team namespace's pods keep when some TCP ports are closed to them.

Kubernetes NetworkPolicy can only allow (networking.k8s.io/v1: a pod selected by a policy with
policyType Egress may send only what some egress rule of a selecting policy allows), so closing a
port means allowing every other one: TCP in the ranges around the closed ports (`endPort`, stable
since Kubernetes 1.25), and all of UDP and SCTP (a port entry without `port` matches every port).
The VPC CNI's network policy agent enforces port ranges and port-less entries the same way
(aws/aws-network-policy-agent@v1.4.1 api/v1alpha1/policyendpoints_types.go Port: "If empty applies
to all ports", EndPort). Pods on the host network are outside every NetworkPolicy (EKS user guide,
cni-network-policy-configure), which is how the EFS CSI node plugin still mounts.
"""

from __future__ import annotations

from typing import Any

# One name in every team namespace, so the tenancy rule and people find it.
NAME = "deny-file-system-egress"
_LAST_PORT = 65535


def open_tcp_ranges(closed: tuple[int, ...]) -> list[tuple[int, int]]:
    """The TCP port ranges (first, last) around `closed`, within 1..65535."""
    ranges: list[tuple[int, int]] = []
    start = 1
    for port in sorted(set(closed)):
        if port > start:
            ranges.append((start, port - 1))
        start = port + 1
    if start <= _LAST_PORT:
        ranges.append((start, _LAST_PORT))
    return ranges


def _tcp_entry(first: int, last: int) -> dict[str, Any]:
    if first == last:
        return {"protocol": "TCP", "port": first}
    return {"protocol": "TCP", "port": first, "endPort": last}


def egress_without_tcp_ports(closed: tuple[int, ...]) -> dict[str, Any]:
    """A NetworkPolicy spec selecting every pod of its namespace and allowing all egress, to any
    destination, except TCP to `closed`. Ingress is left alone (policyTypes Egress only)."""
    ports = [_tcp_entry(first, last) for first, last in open_tcp_ranges(closed)]
    ports += [{"protocol": "UDP"}, {"protocol": "SCTP"}]
    return {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"ports": ports}]}

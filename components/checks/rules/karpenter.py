"""Rules over Karpenter's objects as the Pulumi engine orders them: what Karpenter needs to drain
and terminate its nodes is deleted only after it has done so.

`pulumi destroy` deletes a resource before everything it depends on (dependsOn, explicit or from
its inputs). Deleting a NodePool or EC2NodeClass leaves its finalizer for the controller, which
deletes its NodeClaims and terminates their instances (kubernetes-sigs/karpenter@v1.14.1
pkg/controllers/nodeclaim/termination; aws/karpenter-provider-aws@v1.14.1
pkg/controllers/nodeclass/controller.go finalizer) with the permissions of its role's inline
policy, and finds its nodes' subnets and security groups by the discovery tag. Were those gone
first, the finalizers would hang and GPU instances outlive the stack.
"""

from __future__ import annotations

from typing import Sequence

from components.checks.declared import (
    EC2_TAG,
    HELM_RELEASE,
    IAM_ROLE,
    IAM_ROLE_POLICY,
    KARPENTER_NODE_CLASS,
    KARPENTER_NODE_POOL,
    SQS_QUEUE,
    SQS_QUEUE_POLICY,
    Resource,
)
from components.checks.declared import get as _get
from components.checks.rules.base import Context, Violation
from components.facts import charts
from components.facts import karpenter as facts

RULE = "karpenter-permissions-outlive-nodes"


def _closure(start: Resource, by_key: dict[str, Resource]) -> set[str]:
    """Keys `start` depends on, directly or through others: all that a destroy deletes after it."""
    seen: set[str] = set()
    todo = list(start.depends_on)
    while todo:
        key = todo.pop()
        if key not in seen:
            seen.add(key)
            todo += by_key[key].depends_on if key in by_key else ()
    return seen


def _needed(release: Resource, resources: Sequence[Resource]) -> list[Resource]:
    """What the controller acts with: the inline policies of the roles and the policies of the
    queues the release names, and every discovery tag."""
    roles = {k for k in release.depends_on if k.startswith(f"{IAM_ROLE}::")}
    queues = {k for k in release.depends_on if k.startswith(f"{SQS_QUEUE}::")}
    return [
        r
        for r in resources
        if (r.type == IAM_ROLE_POLICY and roles & set(r.depends_on))
        or (r.type == SQS_QUEUE_POLICY and queues & set(r.depends_on))
        or (r.type == EC2_TAG and _get(r.props, "key") == facts.DISCOVERY_TAG)
    ]


def karpenter_permissions_outlive_nodes(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    by_key = {r.key: r for r in resources}
    releases = [r for r in resources if r.type == HELM_RELEASE and _get(r.props, "name") == charts.KARPENTER.name]
    out: list[Violation] = []
    for release in releases:
        after = _closure(release, by_key)
        out += [
            Violation(
                RULE,
                release.key,
                f"the karpenter release does not depend on {needed.key}: `pulumi destroy` may delete it while "
                "Karpenter still terminates its nodes, whose finalizers then hang",
            )
            for needed in _needed(release, resources)
            if needed.key not in after
        ]
    for res in resources:
        if res.type in (KARPENTER_NODE_POOL, KARPENTER_NODE_CLASS) and releases:
            if not any(release.key in _closure(res, by_key) for release in releases):
                out.append(
                    Violation(
                        RULE,
                        res.key,
                        f"{res.type.rsplit(':', 1)[-1]} does not depend on the karpenter release: `pulumi destroy` may "
                        "remove the controller first, and nothing then terminates its nodes",
                    )
                )
    return out

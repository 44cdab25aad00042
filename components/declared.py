"""Declared resources as checks read them: the same shape in an offline synthesis and in a real
preview, and the few helpers that read engine-shaped values.

The policy rules (components.rules) and the fit proof (components.fit) both read resources this
way; this module is their common ground, so neither imports the other's internals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

# Type tokens several checks read (pulumi-aws 7, pulumi-gcp 10).
IAM_ROLE = "aws:iam/role:Role"
IAM_ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
GCS_BUCKET_IAM_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"

# The offline synth writes values unknown at preview time as this marker (infra.synth._clean);
# the pack maps CrossGuard's unknowns to it too.
UNKNOWN = "[unknown]"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


@dataclass(frozen=True)
class Resource:
    """One declared resource, as rules see it in a synthesis and in a real preview alike."""

    type: str
    name: str
    props: Mapping[str, Any]
    protect: bool = False
    ignore_changes: tuple[str, ...] = ()
    # `type::name` of every resource this one depends on, explicitly or through its inputs.
    depends_on: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.type}::{self.name}"


def get(value: Any, *path: str | int) -> Any:
    """The value at `path`: None where a step is missing, UNKNOWN where a step is unknown.

    Checks report a value only when it is known to be wrong, so an unknown never fails one,
    while a missing value means the provider's default.
    """
    for step in path:
        if value == UNKNOWN:
            return UNKNOWN
        if isinstance(step, int):
            if not isinstance(value, list) or step >= len(value):
                return None
            value = value[step]
        else:
            if not isinstance(value, Mapping):
                return None
            value = value.get(step)
    return value


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def node_group_instance_types(node_group: Resource, resources: Sequence[Resource]) -> list[str]:
    """An EKS node group's instance types: its own, else those of the launch templates it uses.

    EKS takes them from one place or the other (CreateNodegroup `instanceTypes`); a Capacity Block
    node group must name its type in the launch template (EKS "Create a managed node group with
    Capacity Blocks for ML").
    """
    own = [t for t in items(get(node_group.props, "instanceTypes")) if isinstance(t, str)]
    if own:
        return own
    return [
        str(get(r.props, "instanceType"))
        for r in resources
        if r.type == LAUNCH_TEMPLATE and r.key in node_group.depends_on and isinstance(get(r.props, "instanceType"), str)
    ]


def as_list(value: Any) -> list[Any]:
    """IAM's one-or-many fields (Action, Resource, Statement) as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def statements(document: Any) -> list[Any]:
    """Statements of an IAM policy document given as JSON text or as an object."""
    if isinstance(document, str):
        if document == UNKNOWN:
            return []
        try:
            document = json.loads(document)
        except json.JSONDecodeError:
            return []
    return as_list(get(document, "Statement"))

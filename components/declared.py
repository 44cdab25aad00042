"""Declared resources as checks read them: the same shape in an offline synthesis and in a real
preview, and the few helpers that read engine-shaped values.

The policy rules (components.rules) and the fit proof (components.fit) both read resources this
way; this module is their common ground, so neither imports the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

# The offline synth writes values unknown at preview time as this marker (infra.synth._clean);
# the pack maps CrossGuard's unknowns to it too.
UNKNOWN = "[unknown]"


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

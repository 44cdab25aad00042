"""What every rule shares: the context it judges in, the violations it returns, the findings they become.

A `Resource` is a type token, a name, its input properties (camelCase, as recorded by the offline
synth and as CrossGuard hands them to a policy pack) and the few resource options rules read. The
same functions run in `gpu-platform check` and `gpu-platform review` (over a synthesis) and in the
CrossGuard pack under policy/ (over a real preview), so a rule cannot pass offline and fail in a
real preview, or the other way round.

Each rule takes every resource of the stack and a `Context` (limits and waivers from the spec) and
returns violations; rules of scope "resource" judge one resource at a time, so the pack can run
them per resource. Values unknown during a preview (`UNKNOWN`) never count as a violation: a rule
only reports what it can see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any, Callable, Iterable, Mapping, Sequence

from components.checks.declared import UNKNOWN, Resource
from components.spec import PlatformSpec


@dataclass(frozen=True)
class Context:
    """What rules need from the spec: the environment, the limits and the waivers."""

    environment: str
    max_nodes_per_pool: int
    max_gpus: int
    allow_spot: bool
    overrides: Mapping[str, str] = field(default_factory=dict)
    # The stack's spec, for rules that render what it lets teams submit (job-fits-pool);
    # None in contexts built by hand, where such rules have nothing to render.
    spec: PlatformSpec | None = None
    # The day rules judge dates against (kubernetes-standard-support).
    today: date = field(default_factory=date.today)


def context_of(spec: PlatformSpec) -> Context:
    policy = spec.policy
    return Context(
        environment=spec.environment,
        max_nodes_per_pool=policy.max_nodes_per_pool,
        max_gpus=policy.max_gpus,
        allow_spot=policy.spot_allowed(spec.environment),
        overrides={o.rule: o.reason for o in policy.overrides},
        spec=spec,
    )


@dataclass(frozen=True)
class Violation:
    rule: str
    # `type::name` of the offending resource; None: the stack as a whole.
    resource: str | None
    message: str


@dataclass(frozen=True)
class Finding:
    """A violation with the level it counts at for this stack."""

    violation: Violation
    level: str  # mandatory | advisory | overridden
    reason: str = ""

    @property
    def rule(self) -> str:
        return self.violation.rule

    @property
    def blocking(self) -> bool:
        return self.level == "mandatory"

    @property
    def message(self) -> str:
        """The message with its level in front, as check and review print it."""
        if self.level == "overridden":
            return f"overridden ({self.reason}): {self.violation.message}"
        return f"{self.level}: {self.violation.message}"


def from_synthesis(records: Iterable[Mapping[str, Any]]) -> list[Resource]:
    """Resources from the records of infra.synth (resources.json)."""
    return [
        Resource(
            type=r["type"],
            name=r["name"],
            props=r["inputs"],
            protect=bool(r["options"].get("protect")),
            ignore_changes=tuple(r["options"].get("ignoreChanges", ())),
            depends_on=tuple(r["options"].get("dependsOn", ())),
        )
        for r in records
        if r["custom"]
    ]


# --- helpers over engine-shaped values ---------------------------------------------------


def truthy(value: Any) -> bool:
    """A boolean input; AWS launch templates send EBS flags as the strings "true"/"false"."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def is_unknown(value: Any) -> bool:
    return value == UNKNOWN


def true_or_unknown(value: Any) -> bool:
    return truthy(value) or is_unknown(value)


def int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


Rule = Callable[[Sequence[Resource], Context], list[Violation]]

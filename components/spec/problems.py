"""How a spec problem is named and said: where in the stack file, and what was expected."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from components.facts.names import RULES
from components.spec.models import CONFIG_KEY, PlatformSpec, _Spec

# `\Z`, not `$`: `$` also matches before a trailing newline (components.facts.names).
DNS_LABEL = RULES["dns-label"].pattern
# Kubernetes names and most cloud names derived from `<cluster>-<pool>` are capped at 63.
MAX_NAME = 63

@dataclass(frozen=True)
class Problem:
    """One thing wrong with a stack file: where (`platform.nodePools[1].maxNodes`) and what."""

    path: str
    message: str


class SpecError(Exception):
    """Every problem found in one stack file, reported together."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(f"{self.source}: {p.path}: {p.message}" for p in self.problems)


class DeployTimeProblems(Exception):
    """Problems of a valid spec that only the cloud reveals at deploy time (a zone that does not
    offer an instance type); the program reports them like a SpecError of its stack file."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p.path}: {p.message}" for p in problems))


# --- pass 1: shape errors from pydantic, said in the stack file's terms ---------------------

ROOT = CONFIG_KEY


def path_of(loc: tuple[int | str, ...]) -> str:
    out = ROOT
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def in_file_order(raw: Any, problems: list[Problem]) -> list[Problem]:
    """The problems sorted by where their field sits in the stack file, as a reader scans it.

    A YAML mapping keeps the file's key order, so walking `raw` lists every path in reading order;
    a problem about a defaulted field (absent from the file) sorts with its nearest written parent.
    """
    order: dict[str, int] = {}

    def walk(value: Any, path: str) -> None:
        order.setdefault(path, len(order))
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}[{index}]")

    walk(raw, ROOT)

    def position(problem: Problem) -> int:
        path = problem.path
        while path not in order:
            cut = max(path.rfind("."), path.rfind("["))
            if cut <= 0:
                return 0
            path = path[:cut]
        return order[path]

    return sorted(problems, key=position)


def _model_at(loc: tuple[int | str, ...], root: type[_Spec] = PlatformSpec) -> type[_Spec] | None:
    """The spec model a location points into, to list the keys it allows."""
    model: type[_Spec] = root
    for part in loc:
        if isinstance(part, int):
            continue
        field = next(
            (f for f in model.model_fields.values() if f.alias == part), None
        )
        if field is None:
            return model
        inner = spec_class(field.annotation)
        if inner is None:
            return None
        model = inner
    return model


def spec_class(annotation: Any) -> type[_Spec] | None:
    if isinstance(annotation, type) and issubclass(annotation, _Spec):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = spec_class(arg)
        if found is not None:
            return found
    return None


def shape_problem(err: Any, root: type[_Spec] = PlatformSpec) -> Problem:
    loc: tuple[int | str, ...] = tuple(err["loc"])
    kind: str = err["type"]
    value = err.get("input")
    if kind == "missing":
        return Problem(path_of(loc), "required field is missing")
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1], root)
        allowed = sorted(f.alias or n for n, f in parent.model_fields.items()) if parent else []
        hint = did_you_mean(str(loc[-1]), allowed)
        return Problem(
            path_of(loc), f"unknown key{hint}; allowed keys: {', '.join(allowed)}"
        )
    if kind == "literal_error":
        expected = err["ctx"]["expected"]
        return Problem(path_of(loc), f"expected {expected}, got {value!r}")
    if kind in ("string_type", "int_type", "bool_type", "dict_type", "list_type", "model_type"):
        wanted = {
            "string_type": "a string",
            "int_type": "a whole number",
            "bool_type": "true or false",
            "dict_type": "a mapping",
            "list_type": "a list",
            "model_type": "a mapping",
        }[kind]
        hint = ' (quote versions: "1.33")' if kind == "string_type" and isinstance(value, float) else ""
        return Problem(path_of(loc), f"expected {wanted}, got {value!r}{hint}")
    if kind in ("greater_than_equal", "too_short"):
        return Problem(path_of(loc), f"{err['msg'].lower()}, got {value!r}")
    if kind == "less_than_equal":
        return Problem(path_of(loc), f"must be at most {err['ctx']['le']}, got {value!r}")
    return Problem(path_of(loc), err["msg"])


def did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def dns_label_problems(name: str, path: str) -> list[Problem]:
    if not name:
        return [Problem(path, "must not be empty")]
    if len(name) > MAX_NAME or not DNS_LABEL.match(name):
        return [
            Problem(
                path,
                f"expected a DNS-1123 label (lowercase letters, digits and '-', "
                f"starting and ending alphanumeric, at most {MAX_NAME} characters), got {name!r}",
            )
        ]
    return []


def cloud_only_problems(spec: PlatformSpec, cloud: str, pool_fields: tuple[str, ...]) -> list[Problem]:
    """One wing's settings (its section, its pool fields) on a stack of another cloud."""
    problems = [Problem(f"{ROOT}.{cloud}", f"only for cloud: {cloud}, not {spec.cloud}")] if getattr(spec, cloud) else []
    return problems + [
        Problem(f"{ROOT}.nodePools[{i}].{type(pool).model_fields[field].alias}", f"only for cloud: {cloud}, not {spec.cloud}")
        for i, pool in enumerate(spec.node_pools)
        for field in pool_fields
        if field in pool.model_fields_set
    ]

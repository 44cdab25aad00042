"""What parsed of a stack file with shape errors, so the rules can still judge the rest.

A stack file with a wrong type in one pool should still hear about a misspelt instance type in
another: every problem at once. Shape errors (pydantic) leave no spec to run the rules on, so the
raw value is repaired instead: each bad key is removed (its default applies), and a list element
whose required field is bad is removed whole. The rules run on that repaired spec; a rule problem
is kept only when nothing it reads was repaired:

- a repair taints its scope: the object the bad key sits in (a pool `platform.nodePools[1]`, its
  `sharing`, a section such as `platform.aws`), or the key itself at the top level
  (`platform.devicePlugin`);
- a rule problem inside a tainted scope is dropped (it judged a default, not the user's value);
- so is one whose rule reads a tainted scope elsewhere (`READS`: pool rules read the cloud
  sections and the device plugin; quota and auto-provisioning totals read the pools).

A required field outside a list (the cloud, the cluster's name) cannot be repaired: the shape
errors are then all there is to say.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from pydantic.fields import FieldInfo

from components.spec.models import PlatformSpec, _Spec
from components.spec.problems import ROOT, Problem, path_of, spec_class

# Problem paths (regex) -> the scopes their rules read besides their own.
READS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    # A pool's rules read the cloud's zones and network and who advertises GPUs.
    (
        re.compile(rf"^{ROOT}\.nodePools\[\d+\]"),
        (f"{ROOT}.aws.zones", f"{ROOT}.aws.network", f"{ROOT}.gcp.zones", f"{ROOT}.devicePlugin"),
    ),
    # Rules over all pools at once (one AMI family for all) read every pool.
    (re.compile(rf"^{ROOT}\.nodePools$"), (f"{ROOT}.nodePools", f"{ROOT}.devicePlugin")),
    # Team quotas name pools and must fit in them.
    (re.compile(rf"^{ROOT}\.scheduling\.teams($|\[\d+\]\.quotas)"), (f"{ROOT}.nodePools",)),
    # Members' formats depend on the cloud; Google groups need Google Groups for RBAC.
    (re.compile(rf"^{ROOT}\.(scheduling\.teams\[\d+\]\.members|admins)"), (f"{ROOT}.gcp.rbacSecurityGroup",)),
    # Fair-sharing weights name teams.
    (re.compile(rf"^{ROOT}\.scheduling\.fairSharing"), (f"{ROOT}.scheduling.teams",)),
    # Auto-provisioning limits must cover every pool at its maximum.
    (re.compile(rf"^{ROOT}\.gcp\.nodeAutoProvisioning"), (f"{ROOT}.nodePools",)),
)


@dataclass(frozen=True)
class Repaired:
    spec: PlatformSpec
    # Scopes (paths, in the stack file's own list indexes) whose values were repaired.
    tainted: frozenset[str]
    # Per list path, the original index of each element kept, for lists that lost elements.
    kept: dict[str, list[int]]

    def keeps(self, problem: Problem) -> Problem | None:
        """The rule problem in the stack file's own indexes, or None when it judged a repair."""
        path = self._original_path(problem.path)
        if any(_within(path, scope) for scope in self.tainted):
            return None
        for pattern, reads in READS:
            if pattern.match(path) and any(_overlap(scope, read) for scope in self.tainted for read in reads):
                return None
        return Problem(path, problem.message)

    def _original_path(self, path: str) -> str:
        for list_path, kept in self.kept.items():
            prefix = re.escape(list_path) + r"\[(\d+)\]"
            path = re.sub(rf"^{prefix}", lambda m: f"{list_path}[{kept[int(m.group(1))]}]", path)
        return path


def _overlap(a: str, b: str) -> bool:
    return _within(a, b) or _within(b, a)


def _within(path: str, scope: str) -> bool:
    """`path` is `scope` or lies below it (`a.b[1].c` is within `a.b[1]` and `a.b`, not `a.b[10]`)."""
    return path == scope or (path.startswith(scope) and path[len(scope)] in ".[")


@dataclass(frozen=True)
class _Step:
    """One part of an error location, as the spec's models see it."""

    part: int | str
    # The model field this part names (None for list indexes and mapping keys).
    field: FieldInfo | None
    # Whether this part is an element of a list of models (removable whole).
    model_element: bool
    # Whether the value at this part is one of the spec's models (an object with known keys).
    is_model: bool


def _steps(loc: tuple[int | str, ...]) -> list[_Step]:
    """Walk `loc` through the models: which parts are fields (and with which FieldInfo)."""
    steps: list[_Step] = []
    model: type[_Spec] | None = PlatformSpec
    annotation: Any = None
    for part in loc:
        if model is not None and isinstance(part, str):
            field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
            annotation = field.annotation if field else None
            model = None
            inner = spec_class(annotation)
            # A field whose type is a model itself (not a list or mapping of them) is walked into.
            if inner is not None and not _is_container(annotation):
                model = inner
            steps.append(_Step(part, field, False, model is not None))
            continue
        element_model = spec_class(annotation) if isinstance(part, int) else None
        steps.append(_Step(part, None, element_model is not None, element_model is not None))
        model = element_model
    return steps


def _is_container(annotation: Any) -> bool:
    origin = getattr(annotation, "__origin__", None)
    if origin in (list, dict):
        return True
    return any(_is_container(arg) for arg in getattr(annotation, "__args__", ()) if arg is not type(None))


def _cut(loc: tuple[int | str, ...]) -> tuple[str, tuple[int | str, ...], tuple[int | str, ...]] | None:
    """What to remove for the error at `loc`: ("key", where, scope) for a field with a default,
    ("element", where, scope) for a list element of models, or None when nothing can be."""
    steps = _steps(loc)
    for end in range(len(steps), 0, -1):
        step = steps[end - 1]
        where = loc[:end]
        if step.field is not None and not step.field.is_required():
            return "key", where, _scope(steps, loc, end)
        if step.field is None and step.model_element:
            return "element", where, where
        if step.field is None and end == len(steps) and isinstance(step.part, str):
            # An unknown key: removing it changes nothing else.
            return "key", where, _scope(steps, loc, end)
    return None


def _scope(steps: list[_Step], loc: tuple[int | str, ...], end: int) -> tuple[int | str, ...]:
    """The object that holds loc[:end]: the nearest model above it, or the top-level key itself."""
    for i in range(end - 2, -1, -1):
        if steps[i].is_model:
            return loc[: i + 1]
    return loc[:1]


def repair(raw: Any, errors: list[Any]) -> Repaired | None:
    """The spec with every erroneous key and element removed, or None when that cannot parse."""
    if not isinstance(raw, dict):
        return None
    data = copy.deepcopy(raw)
    keys: list[tuple[int | str, ...]] = []
    elements: dict[tuple[int | str, ...], set[int]] = {}
    tainted: set[str] = set()
    for err in errors:
        cut = _cut(tuple(err["loc"]))
        if cut is None:
            return None
        kind, where, scope = cut
        tainted.add(path_of(scope))
        if kind == "key":
            keys.append(where)
        else:
            elements.setdefault(where[:-1], set()).add(int(where[-1]))
    for where in keys:
        _delete(data, where)
    kept: dict[str, list[int]] = {}
    for list_loc, drop in elements.items():
        items = _get(data, list_loc)
        if not isinstance(items, list):
            return None
        kept[path_of(list_loc)] = [i for i in range(len(items)) if i not in drop]
        items[:] = [item for i, item in enumerate(items) if i not in drop]
    try:
        spec = PlatformSpec.model_validate(data)
    except Exception:  # noqa: BLE001 - any failure means nothing more can be said safely
        return None
    return Repaired(spec, frozenset(tainted), kept)


def _get(data: Any, loc: tuple[int | str, ...]) -> Any:
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return None
    return data


def _delete(data: Any, loc: tuple[int | str, ...]) -> None:
    parent = _get(data, loc[:-1])
    if isinstance(parent, dict):
        parent.pop(loc[-1], None)

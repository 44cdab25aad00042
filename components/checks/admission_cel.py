"""A ValidatingAdmissionPolicy evaluated offline the way the API server evaluates it
(kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy): the
matchConditions first (any false: the policy does not apply), then the variables in order under
`variables`, then every validation against `object`. An evaluation error counts as a refusal,
as it does under failurePolicy Fail. The interpreter is cel-python; where it is not installed,
`available()` is false and callers fall back to structural checks."""

from __future__ import annotations

import functools
import importlib.util
import itertools
import json
from typing import Any, Iterator, Mapping


def available() -> bool:
    return importlib.util.find_spec("celpy") is not None


@functools.lru_cache(maxsize=None)
def _program(expression: str) -> Any:
    """The expression parsed once per process: the check probes one policy with a pod and a
    dozen planted attacks, the same few dozen expressions each time, and parsing (lark) cost more
    than evaluating. The interpreter reads the parse tree without changing it, so one program
    serves every evaluation; a parse error is raised again on every call (not cached)."""
    env = _environment()
    return env.program(env.compile(expression))


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    """One environment (it builds the lark parser) for every expression."""
    import celpy

    return celpy.Environment()


def refusals(policy: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None = None,
             sub_resource: str = "") -> list[str]:
    """The names (the message up to its first colon) of the validations of the policy's spec
    `policy` that refuse `obj` (an UPDATE from `old` where given)."""
    return list(_verdict(_key(policy, obj, old, sub_resource), first=False))


def refuses(policy: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
    """Whether the policy refuses the creation of `obj`: its validations evaluated in order up
    to the first that refuses, as a planted attack needs only one refusal."""
    return bool(_verdict(_key(policy, obj, None, ""), first=True))


def _key(policy: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None, sub_resource: str) -> str:
    """What an evaluation reads, as one JSON document. Key order is kept (not sorted), so only
    documents the interpreter sees as the same maps, iterated in the same order, share a key;
    JSON keeps bool, int and float apart as json_to_cel does, and a list and a tuple are both a
    CEL list."""
    return json.dumps([policy, obj, old, sub_resource])


@functools.lru_cache(maxsize=None)
def _verdict(key: str, first: bool) -> tuple[str, ...]:
    """The refusals of one evaluation (with `first`, up to the first), once per process: the
    rule probes every team namespace the policy is bound to with the same pods, and the
    verdict is a function of the policy, the objects and the request alone."""
    policy, obj, old, sub_resource = json.loads(key)
    refused = _refused(policy, obj, old, sub_resource)
    return tuple(itertools.islice(refused, 1) if first else refused)


def _refused(policy: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None,
             sub_resource: str) -> Iterator[str]:
    from celpy import celtypes
    from celpy.adapter import json_to_cel

    request = json_to_cel({"operation": "CREATE" if old is None else "UPDATE", "subResource": sub_resource})
    base: dict[str, Any] = {"object": json_to_cel(dict(obj)), "oldObject": json_to_cel(dict(old) if old else None),
                            "request": request}

    def run(expression: str, activation: dict[str, Any]) -> Any:
        try:
            return _program(expression).evaluate(activation)
        except Exception as error:  # noqa: BLE001 - any compile or evaluation error is a refusal
            return error

    for condition in policy.get("matchConditions") or []:
        if run(str(condition.get("expression")), base) != celtypes.BoolType(True):
            return
    values: dict[Any, Any] = {}
    for variable in policy.get("variables") or []:
        values[celtypes.StringType(str(variable.get("name")))] = run(
            str(variable.get("expression")), {**base, "variables": celtypes.MapType(values)})
    for validation in policy.get("validations") or []:
        result = run(str(validation.get("expression")), {**base, "variables": celtypes.MapType(values)})
        if not (isinstance(result, celtypes.BoolType) and bool(result)):
            yield str(validation.get("message", "")).split(":")[0]

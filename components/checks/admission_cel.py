"""A ValidatingAdmissionPolicy evaluated offline the way the API server evaluates it
(kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy): the
matchConditions first (any false: the policy does not apply), then the variables in order under
`variables`, then every validation against `object`. An evaluation error counts as a refusal,
as it does under failurePolicy Fail. The interpreter is cel-python; where it is not installed,
`available()` is false and callers fall back to structural checks."""

from __future__ import annotations

import importlib.util
from typing import Any, Mapping


def available() -> bool:
    return importlib.util.find_spec("celpy") is not None


def refusals(policy: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None = None,
             sub_resource: str = "") -> list[str]:
    """The names (the message up to its first colon) of the validations of the policy's spec
    `policy` that refuse `obj` (an UPDATE from `old` where given)."""
    import celpy
    from celpy import celtypes
    from celpy.adapter import json_to_cel

    env = celpy.Environment()
    request = json_to_cel({"operation": "CREATE" if old is None else "UPDATE", "subResource": sub_resource})
    base: dict[str, Any] = {"object": json_to_cel(dict(obj)), "oldObject": json_to_cel(dict(old) if old else None),
                            "request": request}

    def run(expression: str, activation: dict[str, Any]) -> Any:
        try:
            return env.program(env.compile(expression)).evaluate(activation)
        except Exception as error:  # noqa: BLE001 - any compile or evaluation error is a refusal
            return error

    for condition in policy.get("matchConditions") or []:
        if run(str(condition.get("expression")), base) != celtypes.BoolType(True):
            return []
    values: dict[Any, Any] = {}
    for variable in policy.get("variables") or []:
        values[celtypes.StringType(str(variable.get("name")))] = run(
            str(variable.get("expression")), {**base, "variables": celtypes.MapType(values)})
    out: list[str] = []
    for validation in policy.get("validations") or []:
        result = run(str(validation.get("expression")), {**base, "variables": celtypes.MapType(values)})
        if not (isinstance(result, celtypes.BoolType) and bool(result)):
            out.append(str(validation.get("message", "")).split(":")[0])
    return out

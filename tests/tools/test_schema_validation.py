"""The check's cached validators agree with kubernetes-validate's own `validate` on every object."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import kubernetes_validate
import pytest

from infra import synth
from infra.tools import schemas

STACKS = ["dev-aws", "dev-aws-karpenter", "dev-gcp", "prod-aws", "prod-gcp", "onprem"]


def _outcome(validate: Callable[..., object], obj: dict[str, Any], version: str) -> tuple[str, str] | None:
    """(error path, message) of one validator, or None when the object is valid."""
    try:
        validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return ".".join(str(p) for p in exc.path), exc.message
    return None


def _upstream(obj: dict[str, Any], version: str) -> tuple[str, str] | None:
    return _outcome(kubernetes_validate.validate, obj, version)


def _cached(obj: dict[str, Any], version: str) -> tuple[str, str] | None:
    return _outcome(schemas.validate, obj, version)


def _objects(synthesis: synth.Synthesis) -> list[dict[str, Any]]:
    return [r["inputs"] for r in synthesis.resources if synth.is_kubernetes_object(r["type"])]


def _broken(obj: dict[str, Any]) -> dict[str, Any]:
    """The object with an unknown field under metadata, which strict validation refuses."""
    planted = copy.deepcopy(obj)
    planted.setdefault("metadata", {})["labelz"] = {"a": "b"}
    return planted


@pytest.mark.parametrize("stack", STACKS)
def test_cached_validation_agrees_with_kubernetes_validate_on_every_object(stack: str, synthesized: Any) -> None:
    compared = 0
    for obj in _objects(synthesized(stack)):
        for candidate in (obj, _broken(obj)):
            try:
                expected = _upstream(candidate, "1.33")
            except kubernetes_validate.SchemaNotFoundError:
                with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                    schemas.validate(candidate, "1.33")
                continue
            assert _cached(candidate, "1.33") == expected
            compared += 1
    assert compared > 10


def test_planted_unknown_field_is_reported_by_the_cached_validator() -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "labelz": {}}}
    path_and_message = _cached(config_map, "1.33")
    assert path_and_message is not None and "labelz" in path_and_message[1]


def test_a_version_newer_than_any_bundled_schema_is_refused_as_upstream_does() -> None:
    with pytest.raises(kubernetes_validate.utils.VersionNotSupportedError):
        schemas.validate({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}, "9.99")

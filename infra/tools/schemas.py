"""Kubernetes schema validation with each validator built once per process.

`kubernetes_validate.validate` reads and parses the kind's schema and the version's whole
`_definitions.json` from disk on every call (kubernetes-validate 1.37.0, utils.validate), which
was most of `check`'s time: a few hundred parses of the same files per run. This module resolves
the same file the same way (the newest bundled version not newer than the one asked for, the
`-local[-strict]` folder, `<kind>-<group>-<version>.json`), builds one jsonschema validator per
(schema folder, kind, apiVersion) and raises the same exceptions, so callers see the same results.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jsonschema
from kubernetes_validate import utils
from referencing import Registry, Resource


def validate(obj: dict[str, Any], kubernetes_version: str, strict: bool = True) -> None:
    """Raises kubernetes_validate.ValidationError for an invalid object, SchemaNotFoundError for a
    kind without a bundled schema, as kubernetes_validate.validate does."""
    wanted = kubernetes_version.removeprefix("v")
    version = _bundled_version(wanted)
    folder = f"v{version}-local" + ("-strict" if strict else "")
    validator = _validator(folder, obj["kind"], obj["apiVersion"], wanted)
    try:
        validator.validate(obj)
    except jsonschema.ValidationError as exc:
        raise utils.ValidationError(exc, version=utils.major_minor(version)) from None


@cache
def _bundled_version(kubernetes_version: str) -> str:
    """The newest bundled schema version not newer than the one asked for."""
    wanted = utils.major_minor(kubernetes_version)
    if wanted > utils.latest_version():
        raise utils.VersionNotSupportedError(version=wanted)
    return [v for v in utils.all_versions() if utils.major_minor(v) <= wanted][-1]


@cache
def _definitions(folder: str, kubernetes_version: str) -> Resource[Any]:
    return Resource.from_contents(utils.schema_contents(f"kubernetes-json-schema/{folder}/_definitions.json", kubernetes_version))


@cache
def _validator(folder: str, kind: str, api_version: str, kubernetes_version: str) -> jsonschema.Draft202012Validator:
    # rbac.authorization.k8s.io/v1 -> rbac-v1, as kubernetes-validate names its files.
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = utils.schema_contents(f"kubernetes-json-schema/{folder}/{kind.lower()}-{group_version}.json", kubernetes_version)
    except FileNotFoundError:
        raise utils.SchemaNotFoundError(version=utils.major_minor(kubernetes_version), kind=kind, api_version=api_version) from None
    resource = Resource.from_contents(schema)
    registry: Registry[Any] = _definitions(folder, kubernetes_version) @ (resource @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)

"""Support for the GPU layer's tests: specs to vary, synthesized variants and upstream schemas."""

from __future__ import annotations

import copy
import dataclasses
import json
from functools import cache
from pathlib import Path
from typing import Any

from helpers import REFERENCE

from components.pools import Pool, derive_pools
from components.spec import PlatformSpec, parse_spec
from infra import program, stackfile, synth

REPO = Path(__file__).resolve().parents[2]
CHART_DATA = REFERENCE / "charts"
SCHEMAS = REFERENCE / "schemas"


def onprem_platform() -> dict[str, Any]:
    """The onprem stack's platform section: the layer's reference stack, to vary in a test."""
    config = stackfile.read("onprem", REPO).config
    return copy.deepcopy(config["gpu-platform:platform"])


def spec_of(platform: dict[str, Any]) -> PlatformSpec:
    return parse_spec(platform, "stacks/Pulumi.test.yaml")


def pools_of(platform: dict[str, Any]) -> list[Pool]:
    return derive_pools(spec_of(platform))


def synthesize(platform: dict[str, Any], stack: str = "onprem") -> synth.Synthesis:
    """Run the real program on `platform` under mocks (resolved values, preview=False)."""
    stack_file = stackfile.read(stack, REPO)
    varied = dataclasses.replace(stack_file, config={**stack_file.config, "gpu-platform:platform": platform})
    return synth.run(program.main, stackfile.project_name(REPO), stack, varied.pulumi_config())


@cache
def chart_keys(chart: str, version: str) -> dict[str, Any]:
    """The values keys a pinned chart reads (tests/data/charts/<chart>-<version>.keys.json)."""
    return json.loads((CHART_DATA / f"{chart}-{version}.keys.json").read_text())


def _closed(schema: Any) -> Any:
    """The schema with unknown fields as errors wherever it lists the fields it knows.

    The API server prunes unknown fields of custom resources without a word, so a misspelt
    field would vanish; closing every object schema that names its properties catches it.
    """
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: _closed(value) for key, value in schema.items()}
    if (
        "properties" in closed
        and "additionalProperties" not in closed
        and not closed.get("x-kubernetes-preserve-unknown-fields")
    ):
        closed["additionalProperties"] = False
    return closed


@cache
def chart_defaults(chart: str, version: str) -> dict[str, Any]:
    """A pinned chart's default values (tests/data/charts/<chart>-<version>.defaults.json)."""
    return json.loads((CHART_DATA / f"{chart}-{version}.defaults.json").read_text())["defaults"]


@cache
def crd_schema(api_version: str, kind: str) -> dict[str, Any] | None:
    """The upstream CRD schema of a custom resource kind, closed; None for built-in kinds."""
    path = SCHEMAS / f"{api_version.replace('/', '_')}_{kind}.json"
    if not path.is_file():
        return None
    return _closed(json.loads(path.read_text()))

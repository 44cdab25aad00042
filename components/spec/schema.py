"""The JSON Schema editors check stack files with (`# yaml-language-server: $schema=`), derived
from the spec models so it cannot drift from what `pulumi up` accepts."""

from __future__ import annotations

from typing import Any

from components.spec.fleet import FleetStackSpec
from components.spec.models import CONFIG_KEY, CONFIG_NAMESPACE, PlatformSpec


def stack_file_schema() -> dict[str, Any]:
    """A whole stack file: a cluster stack's platform, or a fleet manager's (`cloud: fleet`).
    The two differ in `cloud`, so exactly one branch of the oneOf matches a valid file."""
    platform = PlatformSpec.model_json_schema(by_alias=True)
    fleet = FleetStackSpec.model_json_schema(by_alias=True)
    definitions = platform.pop("$defs", {})
    for name, definition in fleet.pop("$defs", {}).items():
        # Shared models (ClusterSpec) are the same class in both, so the same schema.
        if definitions.setdefault(name, definition) != definition:
            raise ValueError(f"two schemas named {name}")
    definitions["PlatformSpec"] = platform
    definitions["FleetStackSpec"] = fleet
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "gpu-platform stack file (stacks/Pulumi.<stack>.yaml)",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": {
                    f"{CONFIG_NAMESPACE}:{CONFIG_KEY}": {
                        "oneOf": [{"$ref": "#/$defs/PlatformSpec"}, {"$ref": "#/$defs/FleetStackSpec"}]
                    }
                },
                "required": [f"{CONFIG_NAMESPACE}:{CONFIG_KEY}"],
            }
        },
        "$defs": definitions,
    }

"""Support for the AWS wing's tests: variants of dev-aws, synthesized from a temporary stack file."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import yaml
from helpers import REPO, stack_config

from components.spec import PlatformSpec
from infra import offline
from infra.synth import Synthesis


def synthesize_variant(tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> tuple[PlatformSpec, Synthesis]:
    """dev-aws with `change` applied to its platform: its spec and its synthesis."""
    config = stack_config("dev-aws")
    change(config["gpu-platform:platform"])
    path = tmp_path / "Pulumi.variant.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    _, spec, result = offline.synthesize(str(path), REPO)
    return spec, result


def variant(tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> Synthesis:
    """dev-aws with `change` applied to its platform, synthesized from a temporary stack file."""
    return synthesize_variant(tmp_path, change)[1]

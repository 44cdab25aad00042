"""Helpers the tests share: the repository, the reference data beside it, stack configs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from infra import stackfile

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def stack_config(stack: str) -> dict[str, Any]:
    """A deep copy of a checked-in stack's config, to vary in a test."""
    return copy.deepcopy(stackfile.read(stack, REPO).config)


def platform_of(stack: str) -> dict[str, Any]:
    return stack_config(stack)["gpu-platform:platform"]

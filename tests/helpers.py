"""Helpers the tests share: the repository, the upstream reference data, stack configs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from infra import stackfile

REPO = Path(__file__).resolve().parents[1]
# Facts read from the pinned upstream releases (chart keys and defaults, CRD schemas), carried
# with the project so that every clone runs every test; tests/data/README.md names each source.
REFERENCE = REPO / "tests" / "data"


def stack_config(stack: str) -> dict[str, Any]:
    """A deep copy of a checked-in stack's config, to vary in a test."""
    return copy.deepcopy(stackfile.read(stack, REPO).config)


def platform_of(stack: str) -> dict[str, Any]:
    return stack_config(stack)["gpu-platform:platform"]

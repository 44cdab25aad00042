"""Helpers the tests share: the repository, the reference data beside it, stack configs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from infra import stackfile

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def require_shared() -> Path:
    """The reference data (chart keys, CRD schemas) beside the checkout, or skip: CI here has it,
    a plain clone elsewhere (GitHub Actions) does not."""
    if not SHARED.is_dir():
        pytest.skip(f"reference data not present: {SHARED} (the shared/ folder beside the checkout)")
    return SHARED


def stack_config(stack: str) -> dict[str, Any]:
    """A deep copy of a checked-in stack's config, to vary in a test."""
    return copy.deepcopy(stackfile.read(stack, REPO).config)


def platform_of(stack: str) -> dict[str, Any]:
    return stack_config(stack)["gpu-platform:platform"]

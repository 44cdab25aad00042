"""Shared fixtures: the repository, stack files and synthesized stacks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import pytest

from infra import cli, stackfile, synth

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def synthesized() -> Callable[[str], synth.Synthesis]:
    """Synthesize a stack of stacks/ once per test session (resolved values, preview=False)."""
    cache: dict[str, synth.Synthesis] = {}

    def get(stack: str) -> synth.Synthesis:
        if stack not in cache:
            cache[stack] = cli.synthesize(stack, REPO)[2]
        return cache[stack]

    return get


def stack_config(stack: str) -> dict[str, Any]:
    """A deep copy of a checked-in stack's config, to vary in a test."""
    return copy.deepcopy(stackfile.read(stack, REPO).config)


def platform_of(stack: str) -> dict[str, Any]:
    return stack_config(stack)["gpu-platform:platform"]

"""Shared fixtures: the repository and synthesized stacks."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from helpers import REPO

from infra import offline, synth


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def synthesized() -> Callable[[str], synth.Synthesis]:
    """Synthesize a stack of stacks/ once per test session (resolved values, preview=False)."""
    cache: dict[str, synth.Synthesis] = {}

    def get(stack: str) -> synth.Synthesis:
        if stack not in cache:
            cache[stack] = offline.synthesize(stack, REPO)[2]
        return cache[stack]

    return get


@pytest.fixture(scope="session")
def fleet() -> offline.FleetSynthesis:
    """The fleet example synthesized once per session: the manager over prod-aws and prod-gcp."""
    return offline.synthesize_fleet("fleet", REPO)

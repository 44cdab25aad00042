"""Fixtures of the GPU layer's tests."""

from __future__ import annotations

from typing import Callable

import pytest

from infra import synth


@pytest.fixture(scope="session")
def onprem(synthesized: Callable[[str], synth.Synthesis]) -> synth.Synthesis:
    """The onprem stack: an existing cluster, where the layer is the whole program."""
    return synthesized("onprem")

"""Fixtures of the AWS wing's tests: the two AWS example stacks, synthesized once."""

from __future__ import annotations

from typing import Callable

import pytest

from infra.synth import Synthesis


@pytest.fixture(scope="session")
def dev(synthesized: Callable[[str], Synthesis]) -> Synthesis:
    return synthesized("dev-aws")


@pytest.fixture(scope="session")
def prod(synthesized: Callable[[str], Synthesis]) -> Synthesis:
    return synthesized("prod-aws")

"""The fleet example synthesized once per session: the manager over prod-aws and prod-gcp."""

from __future__ import annotations

import pytest
from helpers import REPO

from infra import offline


@pytest.fixture(scope="session")
def fleet() -> offline.FleetSynthesis:
    return offline.synthesize_fleet("fleet", REPO)

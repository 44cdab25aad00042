"""Shared fixtures: the repository and synthesized stacks."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from helpers import REPO

from infra import offline, synth

# The files that run longest (torch processes, a Prometheus server, git scratch copies), in the
# order the workers get them: pytest-xdist's loadfile hands out whole files in collection order
# (`--no-loadscope-reorder`, Makefile), and a long file handed out last keeps one core busy
# while the other has nothing left; short files last even out the end. The trainer files that
# share the reference runs (distributed) and those that only need the corpus are split across the
# first two so no worker starts by waiting on the other's lock (tests/trainer/conftest.py). Per-file
# times on the 2-core machine: docs/benchmarks.md.
LONGEST_FIRST = (
    "tests/trainer/test_trainer_distributed.py",
    "tests/jobs/test_job_rendezvous.py",
    "tests/trainer/test_trainer_fabric.py",
    "tests/trainer/test_trainer_memory.py",
    "tests/trainer/test_trainer_prometheus_loopback.py",
    "tests/review/test_review_git.py",
    "tests/checks/test_job_fits_pool.py",
    "tests/trainer/test_trainer_metrics.py",
    "tests/tenancy/test_gpudirect_admission.py",
    "tests/trainer/test_trainer_limits.py",
    "tests/trainer/test_trainer_resume.py",
    "tests/observability/test_alert_rules.py",
    "tests/review/test_snapshot_process.py",
    "tests/policy/test_check.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    gone = [path for path in LONGEST_FIRST if not (REPO / path).is_file()]
    if gone:
        raise pytest.UsageError(f"tests/conftest.py LONGEST_FIRST names files that are not there: {gone}")
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(LONGEST_FIRST)))


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

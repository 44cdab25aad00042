"""Fixtures for the command-line tests: a stack file to copy, and a synth without the program."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO

from infra import offline, synth

ONPREM = REPO / "stacks" / "Pulumi.onprem.yaml"


@pytest.fixture(scope="session")
def onprem_synthesis() -> synth.Synthesis:
    return offline.synthesize("onprem", REPO)[2]


@pytest.fixture
def fast_synth(monkeypatch: pytest.MonkeyPatch, onprem_synthesis: synth.Synthesis) -> None:
    """`synth` answers with onprem's recorded resources for any stack, so a test can run the
    command many times: everything around the program (reading, naming, writing) is real."""

    def run(program: object, project: str, stack: str, config: dict[str, str], root: Path | None = None) -> synth.Synthesis:
        return synth.Synthesis(project, stack, onprem_synthesis.resources, onprem_synthesis.outputs)

    monkeypatch.setattr(synth, "run", run)

"""docs/capacity-planning.md documents every default the model uses, with its value."""

from __future__ import annotations

import pytest
from helpers import REPO

from infra.tools.simulate import model, state

DOC = (REPO / "docs" / "capacity-planning.md").read_text()
TABLE = [line for line in DOC.splitlines() if line.startswith("| ")]


@pytest.mark.parametrize(("cloud", "family"), sorted(model.SCALE_UP_S))
def test_every_scale_up_default_is_in_the_parameter_table(cloud: str, family: str) -> None:
    seconds = f"{model.SCALE_UP_S[(cloud, family)]:g} s"
    assert any(f"{cloud.upper()} " in row and f" {family}" in row and seconds in row for row in TABLE)


def test_the_other_defaults_are_in_the_parameter_table() -> None:
    rows = "\n".join(TABLE)
    assert model.SPOT_INTERRUPTIONS_PER_NODE_DAY == 1 / 150 and "1/150 per node-day" in rows
    assert (model.AUTOSCALER_UNNEEDED_S, model.AUTOSCALER_DELAY_AFTER_ADD_S) == (600, 600) and "10 min, 10 min" in rows
    assert model.KUEUE_PODS_READY_TIMEOUT_S == 1800 and "30 min, 30 min" in rows
    assert (model.KUEUE_BACKOFF_BASE_S, model.KUEUE_BACKOFF_MAX_S) == (60, 3600) and "60 s doubling to 3600 s" in rows
    assert state.STALL_CYCLES == 2 and "2 x (30 + 60) min" in rows
    assert state.RUN_CAP == 10 and "10 x the longest job" in rows
    assert model.PREEMPTION_S == 10 and "waits 10 s, then retried" in rows
    assert state.MAX_ADMISSIONS_PER_JOB == 20_000 and "at most 20,000 in a run" in rows


@pytest.mark.parametrize("reason", sorted(model.REFUSALS))
def test_every_refusal_is_documented_by_name(reason: str) -> None:
    assert any(row.startswith(f"| `{reason}` |") for row in TABLE)


def test_the_documented_plots_exist() -> None:
    for name in ("pool-h100-train.png", "wait-cdf.png"):
        assert f"(capacity-planning/{name})" in DOC
        assert (REPO / "docs" / "capacity-planning" / name).is_file()

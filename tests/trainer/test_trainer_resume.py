"""A resume continues the run that saved: it refuses what would silently change it, and keeps the
first run's LR schedule when --max-steps changes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conftest import write_corpus

from trainer.config import PrepareConfig
from trainer.data import prepare

if TYPE_CHECKING:
    from conftest import Harness, RunFiles

WORLD_RTOL = 1e-6


@pytest.fixture(scope="module")
def other_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("other-corpus")
    write_corpus(root / "corpus.txt", seed=1)
    prepare(PrepareConfig(input=root / "corpus.txt", output=root / "data"))
    return root / "data"


def _checkpoint_copy(run: RunFiles, step: int, into: Path) -> Path:
    checkpoints = into / "checkpoints"
    shutil.copytree(run.checkpoint_dir / f"step_{step:08d}", checkpoints / f"step_{step:08d}")
    return checkpoints


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seq_len": 128}, "trainer: error: --seq-len 128: "),
        ({"preset": "small"}, "trainer: error: --preset small: "),
        ({"data": "{other_data}"}, "trainer: error: --data {other_data}: holds other data"),
    ],
    ids=["seq-len", "preset", "data"],
)
def test_resume_refuses_a_changed_flag_naming_it(
    harness: Harness, reference_one: RunFiles, other_data: Path, tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    checkpoints = _checkpoint_copy(reference_one, 10, tmp_path)
    overrides = {key: str(value).format(other_data=other_data) for key, value in change.items()}
    run = harness.start(f"refuse-{next(iter(change))}", checkpoint_dir=checkpoints, **overrides)
    assert harness.finish(run) == 2, run.output()[-4000:]
    assert message.format(other_data=other_data) in run.output()
    assert "Traceback" not in run.output()
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step_00000010"], "nothing was saved"


def test_resume_with_more_steps_keeps_the_first_run_s_schedule(
    harness: Harness, reference_two: RunFiles, tmp_path: Path
) -> None:
    """Resumed at 20 of 40 with --max-steps 60: steps 21-40 repeat the reference exactly (same LR),
    then the LR stays at the floor, lr x min-lr-ratio."""
    checkpoints = _checkpoint_copy(reference_two, 20, tmp_path)
    resumed = harness.run("longer-schedule", checkpoint_dir=checkpoints, max_steps=60)
    lrs = {int(r["step"]): float(r["lr"]) for r in resumed.metrics() if r["event"] == "train"}
    reference_lrs = {int(r["step"]): float(r["lr"]) for r in reference_two.metrics() if r["event"] == "train"}
    assert sorted(lrs) == list(range(21, 61))
    assert {s: lrs[s] for s in range(21, 41)} == {s: reference_lrs[s] for s in range(21, 41)}
    assert [lrs[s] for s in range(41, 61)] == pytest.approx([3e-3 * 0.1] * 20)
    losses = {s: loss for s, loss in resumed.train_losses().items() if s <= 40}
    expected = {s: loss for s, loss in reference_two.train_losses().items() if s > 20}
    assert harness.max_rel_diff(losses, expected) <= WORLD_RTOL
    assert "the LR schedule stays the first run's: --max-steps 60 (kept: 40); training runs to step 60" in resumed.output()

"""Finite or stop: a diverged run ends non-zero, saves nothing after the divergence, and the
newest finite checkpoint survives pruning."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from trainer.checkpoint import TrainerState, complete_checkpoints, remove_old
from trainer.optim import Schedule
from trainer.storage import Store
from trainer.train import EXIT_NOT_FINITE

if TYPE_CHECKING:
    from conftest import Harness


def _checkpoint(root: Path, step: int, loss: float | None) -> None:
    folder = root / f"step_{step:08d}"
    folder.mkdir(parents=True)
    for name in (".metadata", ".complete"):
        (folder / name).write_bytes(b"")
    state = TrainerState(step, step * 8, "tiny", {}, 8, "d", {}, Schedule(1e-3, 2, 40, 0.1), None, loss)
    (folder / "trainer.json").write_text(state.to_json())


def test_a_learning_rate_that_diverges_stops_the_run_non_zero_without_a_checkpoint_of_the_nan(
    harness: Harness,
) -> None:
    # --lr 1e6 turns the weights to NaN at the first update, so step 1 (saved) is the last finite one.
    run = harness.start("diverges", lr=1e6, warmup_steps=1, checkpoint_every=1, keep_checkpoints=1,
                        max_steps=10, log_every=1)
    code = harness.finish(run)
    assert code == EXIT_NOT_FINITE, run.output()[-3000:]
    assert [step for step, _ in complete_checkpoints(Store(str(run.checkpoint_dir)))] == [1]
    saved = json.loads((run.checkpoint_dir / "step_00000001" / "trainer.json").read_text())
    assert math.isfinite(saved["loss"])
    assert "not all finite" in run.output() and "Traceback" not in run.output()


def test_a_divergence_between_sync_steps_is_caught_at_the_next_one(harness: Harness) -> None:
    # Only every 4th step is read back; the NaN losses of steps 2-3 must still stop the run at step 4.
    run = harness.start("diverges-between-syncs", lr=1e6, warmup_steps=1, checkpoint_every=4, log_every=4,
                        eval_every=0, max_steps=12)
    assert harness.finish(run) == EXIT_NOT_FINITE, run.output()[-3000:]
    assert complete_checkpoints(Store(str(run.checkpoint_dir))) == []
    assert "step 4:" in run.output()


def test_pruning_keeps_the_newest_checkpoint_whose_recorded_loss_is_finite(tmp_path: Path) -> None:
    _checkpoint(tmp_path, 10, 2.5)
    _checkpoint(tmp_path, 20, 2.1)
    _checkpoint(tmp_path, 30, float("nan"))
    _checkpoint(tmp_path, 40, float("inf"))
    remove_old(Store(str(tmp_path)), keep=2)
    assert [step for step, _ in complete_checkpoints(Store(str(tmp_path)))] == [20, 30, 40]


def test_pruning_needs_no_anchor_when_a_kept_checkpoint_is_finite(tmp_path: Path) -> None:
    for step, loss in ((10, 2.5), (20, 2.1), (30, 1.9)):
        _checkpoint(tmp_path, step, loss)
    remove_old(Store(str(tmp_path)), keep=1)
    assert [step for step, _ in complete_checkpoints(Store(str(tmp_path)))] == [30]

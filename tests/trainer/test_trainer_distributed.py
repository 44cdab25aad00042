"""Distributed behaviour on CPU with gloo: world-size invariance, elastic restart, resize, SIGTERM.

Tolerances, and why they hold with fp32 on CPU (OMP_NUM_THREADS=1 in every run):
- 1 vs 2 processes (DDP), at equal micro-batch size: each micro-batch's forward and backward
  sees the same samples with the same shapes, so it is bit-identical; gradients combine as
  g0/2 + g1/2 in both cases (loss scaled by 1/2 before backward vs DDP dividing by the world
  size), and scaling by a power of two is exact in binary floating point. Training losses
  therefore agree exactly in practice. The eval loss sums per-token losses in a different order
  per world size (~1e-8 relative). WORLD_RTOL = 1e-6 admits that and nothing a real bug
  (a wrong rank slice, a double-counted micro-batch, a mis-scaled loss) would produce: those
  move the loss at the 1e-3 level or more from the first step.
- FSDP: the reduce-scatter and the sharded grad-norm add in yet another order, and AdamW
  compounds the rounding over 40 steps (~1e-7 observed); FSDP_RTOL = 1e-5.
- HSDP over two single-process "nodes": parameters are replicated (shards of one), so the
  gradient all-reduce across the replicate dimension stands in for DDP's; the same 1e-5 as FSDP
  bounds the different reduction order and the sharded grad-norm (HSDP_RTOL).
- SIGKILL and restart: same world size, so the resumed run repeats the same arithmetic; the
  required bound RESTART_RTOL = 1e-4 is loose.
"""

from __future__ import annotations

import json
import re
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import FabricSeries, Harness, Run, RunFiles

WORLD_RTOL = 1e-6
FSDP_RTOL = 1e-5
HSDP_RTOL = 1e-5
RESTART_RTOL = 1e-4


def test_two_processes_match_one_process_at_the_same_global_batch(
    harness: Harness, reference_one: RunFiles, reference_two: RunFiles
) -> None:
    assert len(reference_one.train_losses()) == 40
    assert harness.max_rel_diff(reference_two.train_losses(), reference_one.train_losses()) <= WORLD_RTOL
    assert harness.max_rel_diff(reference_two.eval_losses(), reference_one.eval_losses()) <= WORLD_RTOL


def test_fsdp_two_processes_match_one_process(harness: Harness, reference_one: RunFiles) -> None:
    fsdp = harness.run("fsdp-2proc", nproc=2, parallel="fsdp")
    assert harness.max_rel_diff(fsdp.train_losses(), reference_one.train_losses()) <= FSDP_RTOL
    assert harness.max_rel_diff(fsdp.eval_losses(), reference_one.eval_losses()) <= FSDP_RTOL


def test_hsdp_across_two_nodes_matches_ddp(
    harness: Harness, hsdp_missed_floor: FabricSeries, reference_two: RunFiles
) -> None:
    """Two torchrun agents, one process each, as two nodes: a (2 replicas x 1 shard) mesh (the run
    also probes the fabric, in warn mode: test_trainer_fabric reads it)."""
    hsdp = hsdp_missed_floor.run
    assert harness.max_rel_diff(hsdp.train_losses(), reference_two.train_losses()) <= HSDP_RTOL
    assert harness.max_rel_diff(hsdp.eval_losses(), reference_two.eval_losses()) <= HSDP_RTOL
    assert (hsdp.checkpoint_dir / "step_00000040" / ".complete").is_file()


@pytest.fixture(scope="module")
def killed(harness: Harness) -> Run:
    """A 2-process run with background checkpoints whose last worker is killed with SIGKILL once
    step 10 is saved; torchrun restarts both. The harness's file system refuses every rename (as
    Mountpoint for S3 does), so the run checkpoints, is killed and resumes exactly as it would on a
    bucket mount. The restart, the background saves and the resize below read this one run (a
    separate background run and its resume would be a torchrun agent and three torch processes
    more)."""
    run = harness.start("sigkill-restart", nproc=2, max_restarts=1, async_checkpoint="")
    first_ckpt = run.checkpoint_dir / "step_00000010" / ".complete"
    harness.wait_for(run, first_ckpt.exists, "the step-10 checkpoint")
    victim = harness.workers(run, 2)[-1]
    assert run.proc.poll() is None, "the run finished before the kill; it must be longer"
    os.kill(victim, signal.SIGKILL)
    assert harness.finish(run) == 0, run.output()[-4000:]
    return run


def _attempt_losses(run: Run, attempt: int) -> dict[int, float]:
    return {int(r["step"]): float(r["loss"]) for r in run.metrics()
            if r["event"] == "train" and r["attempt"] == attempt}


def _resumed_at(run: Run) -> int:
    return min(_attempt_losses(run, 1)) - 1


def test_killed_worker_restarts_from_last_checkpoint_and_reaches_same_loss_without_renames(
    killed: Run, reference_two: RunFiles
) -> None:
    before, after = sorted(_attempt_losses(killed, 0)), sorted(_attempt_losses(killed, 1))
    assert before and max(before) < 40, "the first attempt should have been cut short"
    assert after, "torchrun should have restarted the workers"
    resumed_at = _resumed_at(killed)
    assert resumed_at >= 10 and resumed_at % 10 == 0, f"resumed at {resumed_at}, not from a checkpoint"
    resumed_from = killed.checkpoint_dir / f"step_{resumed_at:08d}"
    assert f"resumed from {resumed_from} at step {resumed_at}" in killed.output()
    assert after == list(range(resumed_at + 1, 41))

    final, reference = killed.metrics()[-1], reference_two.metrics()[-1]
    assert final["event"] == reference["event"] == "summary"
    assert abs(final["loss"] - reference["loss"]) / reference["loss"] <= RESTART_RTOL
    assert abs(final["eval_loss"] - reference["eval_loss"]) / reference["eval_loss"] <= RESTART_RTOL


def test_async_checkpoints_resume_to_the_same_losses_as_synchronous_ones(
    harness: Harness, killed: Run, reference_two: RunFiles
) -> None:
    """Written in the background while training goes on, a checkpoint still holds the state of
    its own step: both attempts of the killed run, the second resumed from a background save,
    repeat the synchronous run's losses exactly."""
    resumed_at = _resumed_at(killed)
    # Every periodic save of the second attempt before the last step went to the background (the
    # first attempt's may have been killed between its marker and rank 0's log line).
    later = range(resumed_at + 10, 40, 10)
    assert later, f"resumed at {resumed_at}: no periodic save after it to read"
    for step in later:
        assert f"saved {killed.checkpoint_dir / f'step_{step:08d}'} in the background in " in killed.output()
    for attempt in (0, 1):
        losses = _attempt_losses(killed, attempt)
        expected = {step: reference_two.train_losses()[step] for step in losses}
        assert harness.max_rel_diff(losses, expected) <= WORLD_RTOL, f"attempt {attempt}"
    assert harness.max_rel_diff(killed.eval_losses(), reference_two.eval_losses()) <= WORLD_RTOL
    for step in (10, 20, 30, 40):
        assert (killed.checkpoint_dir / f"step_{step:08d}" / ".complete").is_file()


def test_resume_with_fewer_processes_keeps_the_data_order(
    harness: Harness, killed: Run, reference_two: RunFiles, tmp_path: Path
) -> None:
    """The killed run's step-20 checkpoint (2 processes, written in the background) resumed on one.
    Also: a newer save that never committed (step 30 without its marker) is not resumed from."""
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    shutil.copytree(killed.checkpoint_dir / "step_00000020", checkpoints / "step_00000020")
    shutil.copytree(killed.checkpoint_dir / "step_00000030", checkpoints / "step_00000030")
    # Uncommitted: rank 0 writes trainer.json and the marker only after every rank has written.
    (checkpoints / "step_00000030" / ".complete").unlink()
    (checkpoints / "step_00000030" / "trainer.json").unlink()
    resumed = harness.run("resize-2-to-1", checkpoint_dir=checkpoints)

    losses = resumed.train_losses()
    assert sorted(losses) == list(range(21, 41))
    expected = {step: loss for step, loss in reference_two.train_losses().items() if step > 20}
    assert harness.max_rel_diff(losses, expected) <= WORLD_RTOL
    assert harness.max_rel_diff(resumed.eval_losses(), {40: reference_two.eval_losses()[40]}) <= WORLD_RTOL


def _stop_after_a_few_steps(harness: Harness, run: Run, signal_pids: list[int]) -> int:
    harness.wait_for(run, lambda: len(run.metrics()) >= 3, "three logged steps")
    for pid in signal_pids:
        os.kill(pid, signal.SIGTERM)
    return harness.finish(run, timeout=120)


def _assert_saved_at_last_logged_step(run: Run) -> int:
    last = run.metrics()[-1]
    step = int(last["step"])
    folder = run.checkpoint_dir / f"step_{step:08d}"
    assert (folder / ".complete").is_file(), f"no complete checkpoint for step {step}"
    state = json.loads((folder / "trainer.json").read_text())
    assert state["step"] == step
    assert state["consumed_samples"] == step * 16
    return step


@dataclass
class Stopped:
    run: Run
    code: int
    step: int


# One eval sample, evaluated every 2 steps: the two runs below also show that two ranks evaluate
# one sample as one process does (a run of each, stopped by SIGTERM, instead of two more runs).
ONE_EVAL_SAMPLE = {"max_steps": 100_000, "checkpoint_every": 100_000, "eval_samples": 1, "eval_every": 2}


@pytest.fixture(scope="module")
def sigterm_to_one_process(harness: Harness) -> Stopped:
    run = harness.start("sigterm-1proc", **ONE_EVAL_SAMPLE)
    code = _stop_after_a_few_steps(harness, run, [run.proc.pid])
    return Stopped(run, code, _assert_saved_at_last_logged_step(run))


@pytest.fixture(scope="module")
def sigterm_to_one_rank(harness: Harness) -> Stopped:
    run = harness.start("sigterm-one-rank", nproc=2, **ONE_EVAL_SAMPLE)
    victim = harness.workers(run, 2)[0]
    code = _stop_after_a_few_steps(harness, run, [victim])
    return Stopped(run, code, _assert_saved_at_last_logged_step(run))


def test_sigterm_saves_a_checkpoint_and_exits_cleanly(sigterm_to_one_process: Stopped) -> None:
    run, step = sigterm_to_one_process.run, sigterm_to_one_process.step
    assert sigterm_to_one_process.code == 143, run.output()[-4000:]
    assert step < 100_000
    assert "Traceback" not in run.output()
    assert f"stop requested: saved {run.checkpoint_dir / f'step_{step:08d}'}" in run.output()


def test_sigterm_to_one_rank_makes_every_rank_join_the_save(sigterm_to_one_rank: Stopped) -> None:
    run = sigterm_to_one_rank.run
    assert sigterm_to_one_rank.code != 0, "with --max-restarts 0 torchrun reports the interruption"
    for rank in (0, 1):
        assert f"[trainer rank {rank}] stop requested: saved" in run.output()
    assert sigterm_to_one_rank.step < 100_000
    workers_output, agent_report = run.output().split("(exitcode: 143)", 1)
    assert "Traceback" not in workers_output, "the workers should stop without an error"
    assert "exitcode  : 143" in agent_report


def test_more_processes_than_eval_samples_evaluate_the_same_samples(
    harness: Harness, sigterm_to_one_process: Stopped, sigterm_to_one_rank: Stopped
) -> None:
    """Two ranks, one eval sample: one rank evaluates only padding (weight 0), and the loss is the
    one sample's loss, as on one process (compared at every step both runs evaluated, step 2 at
    least: both are signalled only after three logged steps)."""
    one, two = sigterm_to_one_process.run.eval_losses(), sigterm_to_one_rank.run.eval_losses()
    both = sorted(one.keys() & two.keys())
    assert 2 in both, f"evaluated at {sorted(one)} and {sorted(two)}"
    assert harness.max_rel_diff({k: two[k] for k in both}, {k: one[k] for k in both}) <= WORLD_RTOL


@pytest.fixture(scope="module")
def sigterm_to_agent(harness: Harness) -> Stopped:
    """SIGTERM to the agent of a 2-process run with background checkpoints every 2 steps, so a
    save is usually pending when the signal comes: the two tests below read this one run (two
    such runs, one without background saves, cost 6 s of CPU more; the synchronous save on
    SIGTERM is the one every background run ends with)."""
    run = harness.start("sigterm-agent", nproc=2, max_steps=100_000, checkpoint_every=2, async_checkpoint="")
    harness.workers(run, 2)
    code = _stop_after_a_few_steps(harness, run, [run.proc.pid])
    return Stopped(run, code, _assert_saved_at_last_logged_step(run))


def test_sigterm_to_torchrun_is_forwarded_and_every_rank_saves(sigterm_to_agent: Stopped) -> None:
    """The Kubernetes path: kubelet signals PID 1, which is torchrun in the trainer image."""
    run = sigterm_to_agent.run
    assert sigterm_to_agent.code != 0, "torchrun reports that it was terminated"
    for rank in (0, 1):
        assert f"[trainer rank {rank}] stop requested: saved" in run.output()
    assert sigterm_to_agent.step < 100_000


def test_sigterm_with_async_checkpoints_waits_for_the_pending_save_and_saves_synchronously(
    sigterm_to_agent: Stopped,
) -> None:
    run, step = sigterm_to_agent.run, sigterm_to_agent.step
    folders = sorted(run.checkpoint_dir.iterdir())
    assert folders and all((f / ".complete").is_file() for f in folders), "a pending save was left uncommitted"
    assert re.search(rf"rank 0\] stop requested: saved \S+step_{step:08d} in \d+\.\ds \(synchronously", run.output())

"""The memory model against measured CPU peaks, and the micro-batch it chooses or refuses."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainer import fit, memory, parallel
from trainer.config import PRESETS, ConfigError, TrainConfig

PROBE = Path(__file__).resolve().parent / "memory_probe.py"
TOLERANCE = 0.15


# Every configuration the tests read, measured by one probe process (torch starts once). small
# first: its steady size then holds what the runtime allocates once, as a fresh process's would,
# and the whole-peak test below counts that; the step sizes are measured from just before each step.
PROBED = (("small", 2, 256, False), ("small", 4, 256, False), ("small", 4, 256, True),
          ("tiny", 16, 256, False), ("tiny", 64, 256, False))


@functools.cache
def _probes() -> dict[tuple[str, int, int, bool], dict[str, object]]:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    configs = [f"{preset}:{micro}:{seq_len}" + (":ckpt" if ckpt else "") for preset, micro, seq_len, ckpt in PROBED]
    result = subprocess.run([sys.executable, str(PROBE), *configs], capture_output=True, text=True, env=env,
                            timeout=300, check=True)
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    return {(m["preset"], m["micro_batch"], m["seq_len"], m["activation_checkpointing"]): m for m in lines}


def probe(preset: str, micro: int, seq_len: int, checkpointing: bool = False) -> dict[str, object]:
    measured = _probes()[(preset, micro, seq_len, checkpointing)]
    assert measured["measured_step_set_the_peak"], measured
    return measured


def _ratio(measured: dict[str, object], kind: str) -> float:
    estimate, actual = measured[f"estimate_{kind}_bytes"], measured[f"measured_{kind}_bytes"]
    assert isinstance(estimate, int) and isinstance(actual, int)
    return estimate / actual


@pytest.mark.parametrize(("preset", "micro"), [("tiny", 16), ("tiny", 64), ("small", 2), ("small", 4)])
def test_the_step_s_peak_is_within_15_percent_of_the_measured_one(preset: str, micro: int) -> None:
    assert abs(_ratio(probe(preset, micro, 256), "step") - 1) < TOLERANCE


def test_the_peak_with_activation_checkpointing_is_within_15_percent_of_the_measured_one() -> None:
    assert abs(_ratio(probe("small", 4, 256, checkpointing=True), "step") - 1) < TOLERANCE


def test_the_whole_peak_of_a_preset_whose_state_outweighs_the_runtime_is_within_15_percent() -> None:
    measured = probe("small", 4, 256)
    total = measured["estimate_steady_bytes"] + measured["estimate_step_bytes"]  # type: ignore[operator]
    actual = measured["measured_steady_bytes"] + measured["measured_step_bytes"]  # type: ignore[operator]
    assert abs(total / actual - 1) < TOLERANCE


def _cfg(**overrides: object) -> TrainConfig:
    base: dict[str, object] = dict(data=Path("d"), checkpoint_dir="ck", preset="1b", max_steps=10, checkpoint_every=5,
                                   global_batch_size=512, seq_len=2048, seed=0, metrics_file=Path("m"),
                                   parallel="fsdp", gpu_memory_gib=80.0)
    return TrainConfig(**{**base, **overrides})  # type: ignore[arg-type]


@pytest.fixture
def sixteen_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "16")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    monkeypatch.setenv("RANK", "3")


def test_the_docs_scale_defaults_to_the_largest_micro_batch_that_fits_an_80_gib_gpu(sixteen_ranks: None) -> None:
    # 1b, global batch 512 on 16 GPUs: 32 samples per rank would hold about 90 GiB of activations.
    chosen = fit.fitted(_cfg(), 16, parallel.BF16).micro_batch_size
    assert chosen == 16
    usable = memory.usable_bytes(80 * memory.GIB)
    args = (2048, "fsdp", 16, 8, 2, False)
    assert memory.estimate(PRESETS["1b"], 16, *args).total <= usable < memory.estimate(PRESETS["1b"], 32, *args).total


def test_activation_checkpointing_lets_the_whole_per_rank_batch_fit(sixteen_ranks: None) -> None:
    assert fit.fitted(_cfg(activation_checkpointing=True), 16, parallel.BF16).micro_batch_size == 32


def test_an_explicit_micro_batch_that_cannot_fit_is_refused_naming_the_estimate(sixteen_ranks: None) -> None:
    with pytest.raises(ConfigError) as error:
        fit.fitted(_cfg(micro_batch_size=32), 16, parallel.BF16)
    estimate = memory.estimate(PRESETS["1b"], 32, 2048, "fsdp", 16, 8, 2, False)
    assert str(error.value).startswith(
        f"--micro-batch-size 32: preset 1b at --seq-len 2048 needs an estimated {estimate.describe()} per rank, "
        "more than the 80 GiB of GPU memory")


def test_a_model_that_fits_no_micro_batch_is_refused(sixteen_ranks: None) -> None:
    with pytest.raises(ConfigError, match="for a micro-batch of 1, more than the 8 GiB"):
        fit.fitted(_cfg(parallel="ddp", gpu_memory_gib=8.0), 16, parallel.BF16)


def test_without_a_gpu_the_micro_batch_is_left_as_given(sixteen_ranks: None) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU bounds the micro-batch")
    assert fit.fitted(_cfg(gpu_memory_gib=None), 16, parallel.BF16).micro_batch_size is None

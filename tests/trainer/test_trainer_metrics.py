"""MFU arithmetic and the JSON-lines contract of the metrics file."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

from trainer.config import PRESETS
from trainer.metrics import (
    detect_peak_tflops,
    duration,
    flops_per_token,
    mfu,
    peak_tflops_for,
    progress_line,
)
from trainer.model import GPT, count_params, matmul_params

if TYPE_CHECKING:
    from conftest import Harness, RunFiles


def test_flops_per_token_is_six_n_plus_attention_term() -> None:
    tiny = PRESETS["tiny"]  # dim 64, 2 layers, 4 heads of 16, vocab 256
    n = 2 * 12 * 64 * 64 + 64 * 256
    assert matmul_params(tiny) == n
    assert flops_per_token(tiny, seq_len=128) == 6 * n + 12 * 2 * 4 * 16 * 128


def test_matmul_params_are_all_parameters_but_embeddings_and_norms() -> None:
    tiny = PRESETS["tiny"]
    model = GPT(tiny)
    embeddings = model.tok_emb.weight.numel() + model.pos_emb.weight.numel()
    norms = sum(p.numel() for name, p in model.named_parameters() if "norm" in name)
    assert matmul_params(tiny) == count_params(model) - embeddings - norms


def test_mfu_is_achieved_flops_over_the_peak_of_all_devices() -> None:
    assert mfu(1000.0, 10**9, 100.0, world_size=2) == pytest.approx(1000 * 1e9 / (2 * 100e12))


def test_mfu_is_null_on_cpu() -> None:
    assert detect_peak_tflops(torch.device("cpu")) is None
    assert mfu(1000.0, 10**9, None, world_size=1) is None


@pytest.mark.parametrize(
    ("device_name", "tflops"),
    [("NVIDIA A100-SXM4-80GB", 312.0), ("NVIDIA A100 80GB PCIe", 312.0),
     ("NVIDIA H100 80GB HBM3", 989.5), ("NVIDIA H100 PCIe", 756.5), ("NVIDIA H100 NVL", 835.5),
     ("NVIDIA H200", 989.5), ("NVIDIA H200 NVL", 835.5), ("NVIDIA B200", 2250.0),
     ("NVIDIA L4", 121.0), ("NVIDIA L40S", 362.05), ("Tesla T4", 65.0),
     ("Tesla V100-SXM2-16GB", 125.0), ("Tesla V100-PCIE-32GB", 112.0), ("NVIDIA GeForce RTX 4090", None)],
)
def test_peak_is_detected_from_the_cuda_device_name(device_name: str, tflops: float | None) -> None:
    assert peak_tflops_for(device_name) == tflops


def test_1b_preset_has_about_a_billion_parameters() -> None:
    with torch.device("meta"):
        model = GPT(PRESETS["1b"])
    assert 0.95e9 < count_params(model) < 1.1e9


def test_metrics_file_has_a_line_per_logged_step_and_a_summary(reference_one: RunFiles) -> None:
    records = reference_one.metrics()
    assert all(isinstance(r["step"], int) and isinstance(r["loss"], float) for r in records)
    train = [r for r in records if r["event"] == "train"]
    assert [r["step"] for r in train] == list(range(1, 41))
    for record in train:
        assert record.keys() >= {"lr", "tokens_per_s", "mfu", "peak_memory_bytes", "grad_norm", "eval_loss",
                                 "data_wait_s", "data_wait_share"}
        assert record["tokens_per_s"] > 0 and record["peak_memory_bytes"] > 0
        assert record["mfu"] is None, "no peak is known on CPU"
        assert record["data_wait_s"] >= 0 and 0 <= record["data_wait_share"] <= 1
    assert [r["step"] for r in train if r["eval_loss"] is not None] == [20, 40]
    summary = records[-1]
    assert summary["event"] == "summary" and summary["step"] == 40
    assert summary["loss"] == train[-1]["loss"] and summary["eval_loss"] == train[-1]["eval_loss"]
    assert summary["tokens"] == 40 * 16 * 64
    assert train[-1]["loss"] < train[0]["loss"] - 1.0, "the tiny model should learn the toy corpus"


def test_progress_line_shows_step_of_total_loss_throughput_mfu_and_eta() -> None:
    line = progress_line(step=120, total=20000, loss=2.34567, eval_loss=None, tokens_per_s=57712.4,
                         mfu_value=0.4123, seconds_per_step=0.95)
    assert line == "step 120/20000 | loss 2.3457 | 57,712 tok/s | MFU 41.2% | ETA 5h14m"
    assert "MFU n/a" in progress_line(1, 2, 1.0, 0.9, 1.0, None, 1.0)
    assert [duration(s) for s in (0.4, 12, 185, 3720)] == ["0s", "12s", "3m05s", "1h02m"]


def test_progress_goes_to_stdout_every_log_every_steps(harness: Harness, tmp_path: Path) -> None:
    args = harness.train_args(tmp_path / "checkpoints", tmp_path / "metrics.jsonl", max_steps=6, log_every=2,
                              checkpoint_every=100, eval_every=0)
    result = subprocess.run([sys.executable, "-m", "trainer", *args], capture_output=True, text=True,
                            env=harness.env, timeout=240)
    assert result.returncode == 0, result.stderr[-4000:]
    lines = result.stdout.splitlines()
    pattern = r"step {}/6 \| loss \d+\.\d{{4}} (\| eval \d+\.\d{{4}} )?\| [\d,]+ tok/s \| MFU n/a \| ETA \d+s"
    assert [int(re.fullmatch(pattern.format(r"(\d)"), line).group(1)) for line in lines[:-1]] == [2, 4, 6]  # type: ignore[union-attr]
    assert lines[-1].startswith("done: step 6/6 | loss ")
    assert "tok/s" not in result.stderr


def test_only_rank_zero_prints_progress(reference_two: RunFiles) -> None:
    assert reference_two.output().count("step 10/40 | loss") == 1

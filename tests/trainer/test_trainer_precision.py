"""Precision per device: bf16 where the GPU has it, fp16 with a loss scaler where it does not
(DDP only), fp32 on CPU; and the fp16 step itself, run on CPU."""

from __future__ import annotations

import pytest
import torch

from trainer import parallel
from trainer.config import PRESETS, ConfigError
from trainer.model import GPT
from trainer.optim import build_optimizer
from trainer.train import Model, train_step


@pytest.mark.parametrize(
    ("device_type", "has_bf16", "mode", "expected"),
    [("cpu", False, "fsdp", parallel.FP32), ("cuda", True, "fsdp", parallel.BF16), ("cuda", True, "ddp", parallel.BF16),
     ("cuda", False, "ddp", parallel.FP16)],
    ids=["cpu", "a100-fsdp", "a100-ddp", "t4-ddp"],
)
def test_precision_follows_the_device(device_type: str, has_bf16: bool, mode: str, expected: parallel.Precision) -> None:
    assert parallel.choose_precision(device_type, has_bf16, "NVIDIA X", mode) == expected


@pytest.mark.parametrize("mode", ["fsdp", "hsdp"])
def test_sharding_on_a_gpu_without_bf16_is_refused_naming_the_device(mode: str) -> None:
    with pytest.raises(ConfigError, match=rf"--parallel {mode}: the Tesla V100-SXM2-16GB has no bf16.*--parallel ddp"):
        parallel.choose_precision("cuda", False, "Tesla V100-SXM2-16GB", mode)


def test_only_fp16_scales_the_loss() -> None:
    assert [p.scaled for p in (parallel.FP32, parallel.BF16, parallel.FP16)] == [False, False, True]


def _fp16_model(scaler: torch.amp.GradScaler) -> Model:
    torch.manual_seed(0)
    core = GPT(PRESETS["tiny"])
    return Model(core, core, build_optimizer(core, 3e-3, 0.1, fused=True), parallel.FP16, scaler)


def test_fp16_step_skips_an_overflowing_step_and_lowers_the_loss_scale() -> None:
    """A loss scale so large that the fp16 gradients overflow: the weights stay as they were and
    the scale halves, all without reading anything back to the host."""
    d = parallel.Dist(0, 1, torch.device("cpu"))
    m = _fp16_model(torch.amp.GradScaler("cpu", init_scale=2.0**100))
    before = [p.detach().clone() for p in m.core.parameters()]
    window = torch.randint(0, 256, (4, 65), generator=torch.Generator().manual_seed(1))
    train_step(m, [(window[:, :-1], window[:, 1:])], d, grad_clip=1.0)
    assert all(torch.equal(b, p) for b, p in zip(before, m.core.parameters(), strict=True))
    assert m.scaler.get_scale() == 2.0**99


def test_fp16_steps_learn() -> None:
    d = parallel.Dist(0, 1, torch.device("cpu"))
    m = _fp16_model(parallel.FP16.grad_scaler(d.device))
    window = torch.randint(0, 256, (4, 65), generator=torch.Generator().manual_seed(1))
    losses = [float(train_step(m, [(window[:, :-1], window[:, 1:])], d, grad_clip=1.0).loss) for _ in range(15)]
    assert losses[-1] < losses[0] - 1.0

"""Trainer step time against a bare PyTorch loop on the same model and batch size.

The trainer's step includes what a real run pays for: reading micro-batches from the memmapped
token file, the per-step all-reduce of loss and stop flag, and setting the LR. The bare loop
reuses one pre-built batch and does forward, backward, clip and AdamW only. The ratio is the
trainer's overhead on this machine. One process; prints one JSON object.

    python benchmarks/trainer_step.py --preset tiny --steps 30
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from trainer import parallel
from trainer.config import PRESETS, PrepareConfig
from trainer.data import GlobalOrder, RankSlice, TokenFile, TrainBatches, prepare
from trainer.model import GPT, count_params
from trainer.optim import build_optimizer, lr_at, set_lr
from trainer.train import Model, train_step


def _time_once(step: Callable[[], None], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def _time_alternating(
    first: Callable[[], None], second: Callable[[], None], warmup: int, steps: int, device: torch.device
) -> tuple[list[float], list[float]]:
    """Steps of the two loops alternate, so load from other processes hits both alike."""
    for _ in range(warmup):
        first()
        second()
    pairs = [(_time_once(first, device), _time_once(second, device)) for _ in range(steps)]
    return [a for a, _ in pairs], [b for _, b in pairs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    d = parallel.init_distributed(timedelta(seconds=60))
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.bin"
        corpus.write_bytes(np.random.default_rng(0).integers(0, 256, 4_000_000, dtype=np.uint8).tobytes())
        prepare(PrepareConfig(input=corpus, output=Path(tmp) / "data"))
        tokens = TokenFile(Path(tmp) / "data", "train", args.seq_len)

        torch.manual_seed(0)
        with d.device:
            model = GPT(PRESETS[args.preset])
        optimizer = build_optimizer(model, 3e-4, 0.1)
        precision = parallel.device_precision("ddp")
        trainee = Model(model, model, optimizer, precision, precision.grad_scaler(d.device))
        batches = TrainBatches(tokens, GlobalOrder(tokens.num_samples, 0),
                               RankSlice(0, 1, args.batch_size, args.batch_size), consumed=0)

        def trainer_step() -> None:
            set_lr(optimizer, lr_at(0, 3e-4, 0, args.steps, 0.1))
            train_step(trainee, batches.next_step(), d, 1.0)

        torch.manual_seed(0)
        with d.device:
            bare = GPT(PRESETS[args.preset])
        bare_optimizer = torch.optim.AdamW(bare.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
        inputs, targets = (t.to(d.device) for t in tokens.batch(np.arange(args.batch_size)))

        def bare_step() -> None:
            with precision.autocast(d.device):
                logits = bare(inputs)
            F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1)).backward()
            torch.nn.utils.clip_grad_norm_(bare.parameters(), 1.0)
            bare_optimizer.step()
            bare_optimizer.zero_grad(set_to_none=True)

        trainer_times, bare_times = _time_alternating(trainer_step, bare_step, args.warmup, args.steps, d.device)
    parallel.shutdown(clean=True)

    trainer_ms = statistics.median(trainer_times) * 1e3
    bare_ms = statistics.median(bare_times) * 1e3
    print(json.dumps({
        "preset": args.preset,
        "params": count_params(model),
        "device": str(d.device),
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "steps": args.steps,
        "trainer_step_ms": round(trainer_ms, 3),
        "bare_step_ms": round(bare_ms, 3),
        "ratio": round(trainer_ms / bare_ms, 4),
    }))


if __name__ == "__main__":
    main()

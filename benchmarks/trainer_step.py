"""Trainer step time against a bare PyTorch loop on the same model and batch size.

The trainer's side is its loop body as train() runs it: the LR from the schedule, micro-batches
looked up in the sample order and read from the memmapped token file, the step (loss scaler,
clipping, AdamW over two parameter groups), and every --log-every steps the sync (one all-reduce
of loss and stop flag, one read back). The bare loop reuses one pre-built batch and does
forward, backward, clip and AdamW only. Steps of the two alternate, so outside load hits both
alike; the ratio of medians is the trainer's overhead. One process; prints one JSON object.

    OMP_NUM_THREADS=1 python benchmarks/trainer_step.py --preset tiny --steps 60
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
from trainer.optim import Schedule, build_optimizer, set_lr
from trainer.train import Model, agree, train_step


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
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--log-every", type=int, default=10)
    args = parser.parse_args()

    d = parallel.init_distributed(timedelta(seconds=60))
    precision = parallel.device_precision("ddp")
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.bin"
        corpus.write_bytes(np.random.default_rng(0).integers(0, 256, 4_000_000, dtype=np.uint8).tobytes())
        prepare(PrepareConfig(input=corpus, output=Path(tmp) / "data"))
        tokens = TokenFile(Path(tmp) / "data", "train", args.seq_len)

        torch.manual_seed(0)
        with d.device:
            core = GPT(PRESETS[args.preset])
        trainee = Model(core, core, build_optimizer(core, 3e-4, 0.1, fused=d.device.type == "cuda"), precision,
                        precision.grad_scaler(d.device))
        schedule = Schedule(lr=3e-4, warmup_steps=10, max_steps=10 * args.steps, min_lr_ratio=0.1)
        batches = TrainBatches(tokens, GlobalOrder(tokens.num_samples, 0),
                               RankSlice(0, 1, args.batch_size, args.batch_size), consumed=0)
        step = [0]

        def trainer_step() -> None:
            set_lr(trainee.optimizer, schedule.lr_at(step[0]))
            result = train_step(trainee, batches.next_step(), d, 1.0)
            step[0] += 1
            if step[0] % args.log_every == 0:
                agree(result, False, d)

        torch.manual_seed(0)
        with d.device:
            bare = GPT(PRESETS[args.preset])
        bare_optimizer = torch.optim.AdamW(bare.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1,
                                           fused=d.device.type == "cuda" or None)
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
        "params": count_params(core),
        "device": str(d.device),
        "precision": precision.name,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg()[0],
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "steps": args.steps,
        "log_every": args.log_every,
        "trainer_step_ms": round(trainer_ms, 3),
        "bare_step_ms": round(bare_ms, 3),
        "ratio": round(trainer_ms / bare_ms, 4),
    }))


if __name__ == "__main__":
    main()

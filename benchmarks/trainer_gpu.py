"""Tokens/s and MFU of the trainer's loop for each size preset on one CUDA device, and proof that
the host syncs with the device only at log steps.

Runs the trainer's own loop body (schedule, sample order, memmapped batches copied from pinned
memory, train_step in the device's precision with fused AdamW, and every --log-every steps the
sync) on random bytes. After the warm-up, every step runs under
torch.cuda.set_sync_debug_mode("error"), which raises on any call that makes the host wait for
the device (a read-back, a blocking copy, a stream sync); only the log steps' sync runs outside
it. A step that syncs is reported as `"host_sync": "<error>"` and the exit status is 1.

Prints one JSON object per preset; a preset that does not fit in memory reports an error and the
next one runs. Without CUDA it says so and exits 0.

    python benchmarks/trainer_gpu.py [--presets small medium] [--seq-len 1024] [--compile]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch

from trainer import parallel
from trainer.config import PRESETS, PrepareConfig
from trainer.data import GlobalOrder, RankSlice, TokenFile, TrainBatches, prepare
from trainer.metrics import detect_peak_tflops, flops_per_token, mfu
from trainer.model import GPT, count_params
from trainer.optim import Schedule, build_optimizer, set_lr
from trainer.train import Model, agree, train_step

# Micro-batch per preset at 1024 tokens, sized for an 80 GB device with room to spare.
MICRO_BATCH = {"tiny": 64, "small": 32, "medium": 16, "large": 8, "1b": 8}


class HostSync(Exception):
    """A step made the host wait for the device outside a log step."""


def benchmark(preset: str, d: parallel.Dist, data: Path, args: argparse.Namespace,
              peak_tflops: float | None) -> dict[str, object]:
    cfg = PRESETS[preset]
    seq = min(args.seq_len, cfg.max_seq_len)
    micro = MICRO_BATCH[preset] * max(1, 1024 // seq)
    precision = parallel.device_precision("ddp")
    torch.manual_seed(0)
    with d.device:
        core = GPT(cfg)
    wrapped = parallel.parallelize(core, d, "ddp", precision, args.compile, args.activation_checkpointing)
    trainee = Model(core, wrapped, build_optimizer(wrapped, 3e-4, 0.1, fused=True), precision,
                    precision.grad_scaler(d.device))
    tokens = TokenFile(data, "train", seq)
    batches = TrainBatches(tokens, GlobalOrder(tokens.num_samples, 0), RankSlice(0, 1, micro, micro), consumed=0)
    total = args.warmup + args.steps
    schedule = Schedule(lr=3e-4, warmup_steps=args.warmup, max_steps=total, min_lr_ratio=0.1)
    torch.cuda.reset_peak_memory_stats(d.device)

    def step(number: int, checked: bool) -> None:
        set_lr(trainee.optimizer, schedule.lr_at(number))
        if checked:
            torch.cuda.set_sync_debug_mode("error")
        try:
            result = train_step(trainee, batches.next_step(), d, 1.0)
        except RuntimeError as error:
            raise HostSync(f"step {number + 1}: {error}") from None
        finally:
            torch.cuda.set_sync_debug_mode("default")
        if (number + 1) % args.log_every == 0:
            agree(result, False, d)

    for number in range(args.warmup):
        step(number, checked=False)
    torch.cuda.synchronize(d.device)
    start = time.perf_counter()
    host_sync = None
    try:
        for number in range(args.warmup, total):
            step(number, checked=True)
    except HostSync as error:
        host_sync = str(error)
    torch.cuda.synchronize(d.device)
    step_s = (time.perf_counter() - start) / args.steps
    tokens_per_s = micro * seq / step_s
    return {
        "preset": preset,
        "params": count_params(core),
        "precision": precision.name,
        "seq_len": seq,
        "micro_batch": micro,
        "log_every": args.log_every,
        "host_sync": host_sync,
        "step_s": step_s,
        "tokens_per_s": tokens_per_s,
        "mfu": mfu(tokens_per_s, flops_per_token(cfg, seq), peak_tflops, 1),
        "peak_memory_bytes": torch.cuda.max_memory_allocated(d.device),
        "device": torch.cuda.get_device_name(d.device),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", choices=sorted(PRESETS), default=list(PRESETS))
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--activation-checkpointing", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device: this benchmark measures GPU throughput"}))
        sys.exit(0)

    d = parallel.init_distributed(timedelta(seconds=300))
    peak = args.peak_tflops or detect_peak_tflops(d.device)
    synced = False
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.bin"
        corpus.write_bytes(np.random.default_rng(0).integers(0, 256, 64_000_000, dtype=np.uint8).tobytes())
        prepare(PrepareConfig(input=corpus, output=Path(tmp) / "data"))
        for preset in args.presets:
            try:
                result = benchmark(preset, d, Path(tmp) / "data", args, peak)
            except torch.OutOfMemoryError:
                result = {"preset": preset, "error": "out of memory"}
            synced = synced or result.get("host_sync") is not None
            print(json.dumps(result), flush=True)
            torch.cuda.empty_cache()
    parallel.shutdown(clean=True)
    sys.exit(1 if synced else 0)


if __name__ == "__main__":
    main()

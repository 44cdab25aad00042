"""Tokens/s and MFU of the trainer's step for each size preset on one CUDA device.

Runs the trainer's own train_step (bf16 autocast, AdamW, clipping) on random bytes, so the
figure is the model's, not the disk's. Prints one JSON object per preset; a preset that does not
fit in memory reports an error and the next one runs. Without CUDA it says so and exits 0.

    python benchmarks/trainer_gpu.py [--peak-tflops 989] [--seq-len 1024] [--compile]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import timedelta

import torch

from trainer import parallel
from trainer.config import PRESETS
from trainer.metrics import detect_peak_tflops, flops_per_token, mfu
from trainer.model import GPT, count_params
from trainer.optim import build_optimizer
from trainer.train import Model, train_step

# Micro-batch per preset at 1024 tokens, sized for an 80 GB device with room to spare.
MICRO_BATCH = {"tiny": 64, "small": 32, "medium": 16, "large": 8, "1b": 8}


def benchmark(preset: str, d: parallel.Dist, seq_len: int, steps: int, warmup: int,
              peak_tflops: float | None, compile_blocks: bool, activation_checkpointing: bool) -> dict[str, object]:
    cfg = PRESETS[preset]
    seq = min(seq_len, cfg.max_seq_len)
    micro = MICRO_BATCH[preset] * max(1, 1024 // seq)
    torch.manual_seed(0)
    with d.device:
        core = GPT(cfg)
    precision = parallel.device_precision("ddp")
    model = parallel.parallelize(core, d, "ddp", precision, compile_blocks, activation_checkpointing)
    optimizer = build_optimizer(model, 3e-4, 0.1, fused=True)
    trainee = Model(core, model, optimizer, precision, precision.grad_scaler(d.device))
    window = torch.randint(0, cfg.vocab_size, (micro, seq + 1), device=d.device)
    batch = [(window[:, :-1], window[:, 1:])]
    torch.cuda.reset_peak_memory_stats(d.device)
    for _ in range(warmup):
        train_step(trainee, batch, d, 1.0)
    torch.cuda.synchronize(d.device)
    start = time.perf_counter()
    for _ in range(steps):
        train_step(trainee, batch, d, 1.0)
    torch.cuda.synchronize(d.device)
    step_s = (time.perf_counter() - start) / steps
    tokens_per_s = micro * seq / step_s
    return {
        "preset": preset,
        "params": count_params(core),
        "seq_len": seq,
        "micro_batch": micro,
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
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--activation-checkpointing", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device: this benchmark measures GPU throughput"}))
        sys.exit(0)

    d = parallel.init_distributed(timedelta(seconds=300))
    peak = args.peak_tflops or detect_peak_tflops(d.device)
    for preset in args.presets:
        try:
            result = benchmark(preset, d, args.seq_len, args.steps, args.warmup, peak,
                               args.compile, args.activation_checkpointing)
        except torch.OutOfMemoryError:
            result = {"preset": preset, "error": "out of memory"}
        print(json.dumps(result), flush=True)
        torch.cuda.empty_cache()
    parallel.shutdown(clean=True)


if __name__ == "__main__":
    main()

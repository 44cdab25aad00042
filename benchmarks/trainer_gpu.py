"""Tokens/s and MFU of the trainer's loop for each size preset on one CUDA device, and proof that
the host syncs with the device only at log steps.

Runs the trainer's own loop body (schedule, sample order, memmapped batches copied from pinned
memory, train_step in the device's precision with fused AdamW, and every --log-every steps the
sync) on random bytes. After the warm-up, every step runs under
torch.cuda.set_sync_debug_mode("error"), which raises on any call that makes the host wait for
the device (a read-back, a blocking copy, a stream sync); only the log steps' sync runs outside
it. A step that syncs is reported as `"host_sync": "<error>"` and the exit status is 1.

Each preset runs at the micro-batch the trainer would choose by default (trainer.memory: the
largest divisor of --batch that fits the GPU's memory), eagerly and compiled per block (--compile
both, the default) or only as the trainer's default for the preset (--compile default). Each line
also carries the memory model's estimate beside torch.cuda.max_memory_allocated.

Prints one JSON object per preset and mode; a preset that does not fit in memory reports an error
and the next one runs. Without CUDA it reports the memory model against peaks measured on the CPU
(tests/trainer/memory_probe.py, the same measurement the tests make) and exits 0.

    python benchmarks/trainer_gpu.py [--presets small medium] [--seq-len 1024] [--compile both]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch

from trainer import memory, parallel
from trainer.config import PRESETS, PrepareConfig
from trainer.data import GlobalOrder, RankSlice, TokenFile, TrainBatches, prepare
from trainer.metrics import detect_peak_tflops, flops_per_token, mfu
from trainer.model import GPT, count_params
from trainer.optim import Schedule, build_optimizer, set_lr
from trainer.train import Model, agree, train_step

PROBE = Path(__file__).resolve().parent.parent / "tests" / "trainer" / "memory_probe.py"
# The CPU report: two micro-batches of the two presets small enough for a CPU (as the tests run).
CPU_PROBES = (("tiny", 16, 256), ("tiny", 64, 256), ("small", 2, 256), ("small", 4, 256))


class HostSync(Exception):
    """A step made the host wait for the device outside a log step."""


def benchmark(preset: str, compiled: bool, d: parallel.Dist, data: Path, args: argparse.Namespace,
              peak_tflops: float | None) -> dict[str, object]:
    cfg = PRESETS[preset]
    seq = min(args.seq_len, cfg.max_seq_len)
    precision = parallel.device_precision("ddp")
    compute_bytes = 4 if precision.dtype is None else 2
    _, gpu_bytes = torch.cuda.mem_get_info(d.device)
    fitting = memory.largest_fitting(cfg, args.batch, seq, "ddp", 1, 1, compute_bytes, args.activation_checkpointing,
                                     gpu_bytes)
    if fitting is None:
        return {"preset": preset, "error": "the memory model fits no micro-batch on this GPU"}
    micro = fitting
    estimate = memory.estimate(cfg, micro, seq, "ddp", 1, 1, compute_bytes, args.activation_checkpointing)
    torch.manual_seed(0)
    with d.device:
        core = GPT(cfg)
    wrapped = parallel.parallelize(core, d, "ddp", precision, compiled, args.activation_checkpointing)
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
            agree(result, False, torch.zeros((), device=d.device), d, precision)

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
        "compiled": compiled,
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
        "estimated_memory_bytes": estimate.total,
        "device": torch.cuda.get_device_name(d.device),
    }


def cpu_report() -> None:
    """The memory model against CPU peaks, one JSON line per probe (docs/trainer.md)."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    for preset, micro, seq in CPU_PROBES:
        done = subprocess.run([sys.executable, str(PROBE), preset, str(micro), str(seq)], capture_output=True,
                              text=True, env=env, check=True)
        measured = json.loads(done.stdout)
        measured["step_estimate_over_measured"] = measured["estimate_step_bytes"] / measured["measured_step_bytes"]
        print(json.dumps(measured), flush=True)


def _modes(choice: str, preset: str, device: torch.device) -> list[bool]:
    if choice == "both":
        return [False, True]
    if choice == "default":
        return [parallel.compile_by_default(preset, device)]
    return [choice == "on"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", choices=sorted(PRESETS), default=list(PRESETS))
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64,
                        help="samples per step; the micro-batch is its largest divisor that fits")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--compile", choices=("both", "default", "on", "off"), default="both",
                        help="both: eager and compiled; default: as the trainer decides for the preset")
    parser.add_argument("--activation-checkpointing", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device: throughput needs one; the memory model against CPU peaks follows"}))
        cpu_report()
        sys.exit(0)

    d = parallel.init_distributed(timedelta(seconds=300))
    peak = args.peak_tflops or detect_peak_tflops(d.device)
    synced = False
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.bin"
        corpus.write_bytes(np.random.default_rng(0).integers(0, 256, 64_000_000, dtype=np.uint8).tobytes())
        prepare(PrepareConfig(input=corpus, output=Path(tmp) / "data"))
        for preset in args.presets:
            for compiled in _modes(args.compile, preset, d.device):
                try:
                    result = benchmark(preset, compiled, d, Path(tmp) / "data", args, peak)
                except torch.OutOfMemoryError:
                    result = {"preset": preset, "compiled": compiled, "error": "out of memory"}
                synced = synced or result.get("host_sync") is not None
                print(json.dumps(result), flush=True)
                torch.cuda.empty_cache()
    parallel.shutdown(clean=True)
    sys.exit(1 if synced else 0)


if __name__ == "__main__":
    main()

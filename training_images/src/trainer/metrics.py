"""Throughput, MFU and memory, written as JSON lines by rank 0, and progress on its stdout.

Every line carries `step` (the step just completed, 1-based) and `loss`, so a consumer can read
the file with one rule. `event` is "train" for interval lines and "summary" for the last one.
Resumed runs append; `attempt` (torchrun's restart count) and `world_size` tell attempts apart.
Multi-node runs with the fabric gate (trainer.fabric) also carry its report as `fabric`.
Each line also goes to stdout in a form for people (`kubectl logs -f`): step/total, loss,
tokens/s, MFU, ETA.

MFU counts the flops the model needs, not the ones the hardware ran: 6 per matmul parameter per
token for forward plus backward, plus 12*L*H*Q*T for attention scores (L layers, H heads, Q head
dim, T context). Recomputation by activation checkpointing is therefore not credited.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import time
from pathlib import Path

import torch

from trainer.config import ModelConfig
from trainer.model import matmul_params

# Dense 16-bit tensor-core peak per accelerator in TFLOPS: bf16, or fp16 on GPUs without bf16
# (T4, V100), the precision the trainer runs there (trainer.parallel). Datasheets quote sparse
# figures ("with sparsity") for Ampere and later; the dense peak is half of those.
# Used only when --peak-tflops is not given; the platform passes the value from its catalog.
# Rows are matched in order on whole words of the CUDA device name, so variants come before
# their family: "NVIDIA H100 PCIe" and "NVIDIA H100 NVL" before "NVIDIA H100 80GB HBM3" (SXM).
PEAK_TFLOPS: list[tuple[frozenset[str], float]] = [
    # NVIDIA HGX B200 datasheet: FP16/BF16 tensor 4.5 PFLOPS per GPU with sparsity.
    (frozenset({"B200"}), 2250.0),
    # NVIDIA H200 datasheet: BF16 tensor 1,979 TFLOPS (SXM), 1,671 (NVL), with sparsity.
    (frozenset({"H200", "NVL"}), 835.5),
    (frozenset({"H200"}), 989.5),
    # NVIDIA H100 datasheet: BF16 tensor 1,979 (SXM), 1,671 (NVL), 1,513 (PCIe) with sparsity.
    (frozenset({"H100", "NVL"}), 835.5),
    (frozenset({"H100", "PCIE"}), 756.5),
    (frozenset({"H100"}), 989.5),
    # NVIDIA A100 datasheet: BF16 tensor 312 TFLOPS dense, SXM and PCIe alike.
    (frozenset({"A100"}), 312.0),
    # NVIDIA L40S datasheet: BF16 tensor 362.05 TFLOPS dense (733 with sparsity).
    (frozenset({"L40S"}), 362.05),
    # NVIDIA L4 datasheet: BF16 tensor 242 TFLOPS with sparsity.
    (frozenset({"L4"}), 121.0),
    # NVIDIA V100 datasheet: 125 (SXM2) and 112 (PCIe) tensor TFLOPS, fp16 (no bf16).
    (frozenset({"V100", "PCIE"}), 112.0),
    (frozenset({"V100"}), 125.0),
    # NVIDIA T4 datasheet: 65 TFLOPS mixed precision (FP16/FP32), no bf16.
    (frozenset({"T4"}), 65.0),
]


def flops_per_token(cfg: ModelConfig, seq_len: int) -> int:
    return 6 * matmul_params(cfg) + 12 * cfg.n_layers * cfg.n_heads * cfg.head_dim * seq_len


def peak_tflops_for(device_name: str) -> float | None:
    """Matched on whole words of the name, so an "L40S" is not taken for an "L4"."""
    words = set(re.split(r"[^A-Za-z0-9]+", device_name.upper()))
    return next((tflops for required, tflops in PEAK_TFLOPS if required <= words), None)


def detect_peak_tflops(device: torch.device) -> float | None:
    """Peak of the local accelerator; None on CPU or an unknown GPU, which makes MFU null."""
    if device.type != "cuda":
        return None
    return peak_tflops_for(torch.cuda.get_device_name(device))


def mfu(tokens_per_s: float, flops_per_tok: int, peak_tflops_per_device: float | None, world_size: int) -> float | None:
    if peak_tflops_per_device is None:
        return None
    return tokens_per_s * flops_per_tok / (peak_tflops_per_device * 1e12 * world_size)


def duration(seconds: float) -> str:
    """1h02m, 3m05s, 12s: precise enough for an ETA, short enough for a log line."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_line(step: int, total: int, loss: float, eval_loss: float | None, tokens_per_s: float,
                  mfu_value: float | None, seconds_per_step: float) -> str:
    parts = [f"step {step}/{total}", f"loss {loss:.4f}"]
    if eval_loss is not None:
        parts.append(f"eval {eval_loss:.4f}")
    parts += [
        f"{tokens_per_s:,.0f} tok/s",
        f"MFU {mfu_value:.1%}" if mfu_value is not None else "MFU n/a",
        f"ETA {duration((total - step) * seconds_per_step)}",
    ]
    return " | ".join(parts)


def peak_memory_bytes(device: torch.device) -> int:
    """Allocator peak on CUDA; on CPU the process's maximum resident set (Linux reports KiB)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class Metrics:
    """Rates are measured per log interval, so a slow first (compiling) step fades out."""

    def __init__(
        self,
        path: Path,
        enabled: bool,
        cfg: ModelConfig,
        seq_len: int,
        global_batch_size: int,
        world_size: int,
        peak_tflops: float | None,
        device: torch.device,
        start_step: int,
        max_steps: int,
    ) -> None:
        self.path = path
        self.enabled = enabled
        self.flops_per_token = flops_per_token(cfg, seq_len)
        self.tokens_per_step = global_batch_size * seq_len
        self.world_size = world_size
        self.peak_tflops = peak_tflops
        self.device = device
        self.attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
        self.start_step = start_step
        self.max_steps = max_steps
        self.started = time.perf_counter()
        self._mark_step = start_step
        self._mark_time = self.started
        self.last_eval_loss: float | None = None
        # The fabric gate's report (trainer.fabric), on every line once the gate has run.
        self.fabric: dict[str, object] | None = None
        if enabled:
            path.parent.mkdir(parents=True, exist_ok=True)

    def _write(self, record: dict[str, object]) -> None:
        if self.fabric is not None:
            record = {**record, "fabric": self.fabric}
        if self.enabled:
            with open(self.path, "a") as out:
                out.write(json.dumps(record) + "\n")

    def _print(self, line: str) -> None:
        if self.enabled:
            print(line, file=sys.stdout, flush=True)

    def log_step(self, step: int, loss: float, lr: float, grad_norm: float, eval_loss: float | None,
                 data_wait_seconds: float = 0.0) -> None:
        """`data_wait_seconds`: host time blocked on the data loader since the previous line,
        apart from compute; written as `data_wait_s`, and its share of the interval's wall time
        as `data_wait_share`."""
        now = time.perf_counter()
        interval = max(now - self._mark_time, 1e-9)
        steps = max(step - self._mark_step, 1)
        seconds_per_step = interval / steps
        tokens_per_s = self.tokens_per_step / seconds_per_step
        self._mark_step, self._mark_time = step, now
        if eval_loss is not None:
            self.last_eval_loss = eval_loss
        step_mfu = mfu(tokens_per_s, self.flops_per_token, self.peak_tflops, self.world_size)
        self._print(progress_line(step, self.max_steps, loss, eval_loss, tokens_per_s, step_mfu, seconds_per_step))
        self._write({
            "event": "train",
            "step": step,
            "loss": loss,
            "eval_loss": eval_loss,
            "lr": lr,
            "grad_norm": grad_norm,
            "tokens_per_s": tokens_per_s,
            "mfu": step_mfu,
            "data_wait_s": data_wait_seconds,
            "data_wait_share": min(data_wait_seconds / interval, 1.0),
            "peak_memory_bytes": peak_memory_bytes(self.device),
            "world_size": self.world_size,
            "attempt": self.attempt,
        })

    def summary(self, step: int, loss: float) -> None:
        elapsed = time.perf_counter() - self.started
        tokens = (step - self.start_step) * self.tokens_per_step
        tokens_per_s = tokens / max(elapsed, 1e-9)
        run_mfu = mfu(tokens_per_s, self.flops_per_token, self.peak_tflops, self.world_size)
        self._print(
            f"done: step {step}/{self.max_steps} | loss {loss:.4f}"
            + (f" | eval {self.last_eval_loss:.4f}" if self.last_eval_loss is not None else "")
            + f" | {tokens_per_s:,.0f} tok/s | " + (f"MFU {run_mfu:.1%}" if run_mfu is not None else "MFU n/a")
            + f" | {duration(elapsed)}"
        )
        self._write({
            "event": "summary",
            "step": step,
            "loss": loss,
            "eval_loss": self.last_eval_loss,
            "tokens": tokens,
            "elapsed_s": elapsed,
            "tokens_per_s": tokens_per_s,
            "mfu": run_mfu,
            "peak_memory_bytes": peak_memory_bytes(self.device),
            "world_size": self.world_size,
            "attempt": self.attempt,
        })

"""Measures the CPU peak of one training step and prints it, as JSON, beside trainer.memory's
estimate. Run in a fresh process with glibc's mmap threshold lowered (MALLOC_MMAP_THRESHOLD_),
so every tensor's pages go back to the system when it is freed and the resident high-water mark
(VmHWM) is the peak of live tensors. The high-water mark is reset right before each measured
step (writing 5 to /proc/self/clear_refs, Linux's proc(5)), so what imports, start-up and the
steps measured before once touched cannot hide the step's own peak; each step is measured from
the resident size right before it. Usage: memory_probe.py PRESET:MICRO:SEQ_LEN[:ckpt] ..., one
JSON line per configuration; the configurations of one preset share one model (torch starts once:
every probe process costs seconds of CPU).

A warm-up step of one sample first creates AdamW's state (and whatever the runtime allocates
once: thread arenas, kernel workspaces), so each measured step is a steady-state one, as
every step after the first is (its gradients are freed after it, set_to_none, so the next starts
from the same state). Printed: the resident size after the warm-up against the model's steady
bytes (weights, optimizer state), and what the measured step adds at its peak against the
model's step bytes (activations or gradients)."""

from __future__ import annotations

import gc
import json
import os
import sys

import torch

from trainer import memory, parallel
from trainer.config import PRESETS
from trainer.model import GPT
from trainer.optim import build_optimizer
from trainer.train import Model, train_step


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_bytes() -> int:
    with open("/proc/self/status") as status:
        [line] = [line for line in status if line.startswith("VmHWM:")]
    return int(line.split()[1]) * 1024


def reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def batch(micro: int, seq_len: int, vocab: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    tokens = torch.randint(0, vocab, (micro, seq_len + 1))
    return [(tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())]


def measure(preset: str, configs: list[tuple[int, int, bool]]) -> None:
    cfg = PRESETS[preset]
    d = parallel.Dist(rank=0, world_size=1, device=torch.device("cpu"))
    start = resident_bytes()
    core = GPT(cfg)
    m = Model(core, core, build_optimizer(core, 1e-4, 0.1), parallel.FP32, torch.amp.GradScaler("cpu", enabled=False))
    train_step(m, batch(1, configs[0][1], cfg.vocab_size), d, 1.0)
    steady = resident_bytes() - start
    for micro, seq_len, checkpointing in configs:
        core.checkpoint_blocks = checkpointing
        inputs = batch(micro, seq_len, cfg.vocab_size)
        before = resident_bytes()
        reset_peak()
        high_before = peak_bytes()
        train_step(m, inputs, d, 1.0)
        high_after = peak_bytes()
        estimate = memory.estimate(cfg, micro, seq_len, "ddp", 1, 1, 4, checkpointing)
        print(json.dumps({
            "preset": preset, "micro_batch": micro, "seq_len": seq_len, "activation_checkpointing": checkpointing,
            "measured_steady_bytes": steady, "estimate_steady_bytes": estimate.steady,
            "measured_step_bytes": high_after - before, "estimate_step_bytes": estimate.step,
            "measured_step_set_the_peak": high_after > high_before,
        }), flush=True)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    by_preset: dict[str, list[tuple[int, int, bool]]] = {}
    for arg in sys.argv[1:]:
        preset, micro, seq_len, *flags = arg.split(":")
        by_preset.setdefault(preset, []).append((int(micro), int(seq_len), flags == ["ckpt"]))
    for preset, configs in by_preset.items():
        measure(preset, configs)
        gc.collect()


if __name__ == "__main__":
    main()

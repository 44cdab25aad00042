"""AdamW and a warmup-then-cosine learning rate.

The schedule is a pure function of the step and four numbers, all saved with each checkpoint,
so a resumed run follows exactly the curve the first run started (trainer.resume).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import nn
from torch.optim import AdamW, Optimizer


def build_optimizer(model: nn.Module, lr: float, weight_decay: float, fused: bool = False) -> AdamW:
    """Decay matrices only: shrinking norm gains and embeddings' rows toward zero does not regularise.

    `fused` (on GPUs): one kernel for the whole update, which also lets torch.amp.GradScaler hand
    it the inf check instead of reading it back to the host (torch/amp/grad_scaler.py,
    `_step_supports_amp_scaling`). CPU keeps the default (foreach) so tests compare the same
    arithmetic as always."""
    decay = [p for name, p in model.named_parameters() if p.dim() >= 2 and "emb" not in name]
    keep = [p for name, p in model.named_parameters() if p.dim() < 2 or "emb" in name]
    return AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": keep, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.95),
        eps=1e-8,
        fused=fused or None,
    )


def lr_at(step: int, base_lr: float, warmup_steps: int, max_steps: int, min_lr_ratio: float) -> float:
    """LR for the 0-based step about to run: linear warmup, then cosine down to min_lr_ratio*base."""
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    floor = base_lr * min_lr_ratio
    return floor + 0.5 * (base_lr - floor) * (1.0 + math.cos(math.pi * min(progress, 1.0)))


@dataclass(frozen=True)
class Schedule:
    """The LR curve of a run: set by its first start, kept by every resume."""

    lr: float
    warmup_steps: int
    max_steps: int
    min_lr_ratio: float

    def lr_at(self, step: int) -> float:
        return lr_at(step, self.lr, self.warmup_steps, self.max_steps, self.min_lr_ratio)


def set_lr(optimizer: Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr

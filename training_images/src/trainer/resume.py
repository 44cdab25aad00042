"""What a resumed run must share with the run that saved its checkpoint, and what it keeps.

Refused, naming the flag (the run would otherwise go on wrongly, not fail):
- --preset: the checkpoint's tensors have another shape.
- --seq-len: the data position is a count of consumed windows, and a window's length is the
  sequence length; another length continues at another place in the data.
- --data: the same count in other data is an unrelated position. The data is identified by its
  meta.json (token counts, source), not its path, so a moved or remounted folder still resumes.

Kept from the first run: the LR schedule (--lr, --warmup-steps, --min-lr-ratio and --max-steps
as the end of the cosine). A resume with another --max-steps trains to the new step count on the
first run's curve: past its end the LR stays at the floor, before it training stops early. The LR
therefore never jumps at a resume (docs/trainer.md, "Resume").
"""

from __future__ import annotations

from trainer.checkpoint import TrainerState
from trainer.config import ConfigError, TrainConfig
from trainer.optim import Schedule


def requested_schedule(cfg: TrainConfig) -> Schedule:
    return Schedule(lr=cfg.lr, warmup_steps=cfg.warmup_steps, max_steps=cfg.max_steps, min_lr_ratio=cfg.min_lr_ratio)


def check(cfg: TrainConfig, data_meta: dict[str, object], saved: TrainerState, where: str) -> None:
    """Raise for the first flag the checkpoint at `where` cannot continue with."""
    if saved.preset != cfg.preset or saved.model != cfg.model.to_dict():
        raise ConfigError(
            f"--preset {cfg.preset}: {where} was trained with --preset {saved.preset} ({saved.model}); "
            f"resume with --preset {saved.preset}, or use a new --checkpoint-dir"
        )
    if saved.seq_len != cfg.seq_len:
        raise ConfigError(
            f"--seq-len {cfg.seq_len}: {where} was trained with --seq-len {saved.seq_len}, and its data "
            f"position counts windows of that length; resume with --seq-len {saved.seq_len}, or use a new "
            "--checkpoint-dir"
        )
    if saved.data_meta != data_meta:
        raise ConfigError(
            f"--data {cfg.data}: holds other data than {where} was trained on ({saved.data}, "
            f"{saved.data_meta.get('train_tokens')} train tokens from {saved.data_meta.get('source')}); "
            "resume with that data, or use a new --checkpoint-dir"
        )


def schedule_note(cfg: TrainConfig, kept: Schedule) -> str | None:
    """One line saying which schedule flags of this start the kept schedule overrides."""
    requested = requested_schedule(cfg)
    if requested == kept:
        return None
    changed = [
        f"--{name.replace('_', '-')} {getattr(requested, name)} (kept: {getattr(kept, name)})"
        for name in ("lr", "warmup_steps", "max_steps", "min_lr_ratio")
        if getattr(requested, name) != getattr(kept, name)
    ]
    return (
        "the LR schedule stays the first run's: " + ", ".join(changed)
        + f"; training runs to step {cfg.max_steps}"
    )

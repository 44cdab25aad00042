"""The micro-batch a rank can hold: the memory model (trainer.memory) against the GPU's memory,
decided before the process group so that a refusal is one line and hangs nobody."""

from __future__ import annotations

from dataclasses import replace

import torch

from trainer import memory, parallel
from trainer.config import ConfigError, TrainConfig
from trainer.log import log


def gpu_bytes(cfg: TrainConfig) -> int | None:
    """--gpu-memory-gib (the platform passes the catalog's figure), else what CUDA reports for
    this process's GPU (a MIG slice reports its own size); None on CPU, where nothing is bounded."""
    if cfg.gpu_memory_gib is not None:
        return int(cfg.gpu_memory_gib * memory.GIB)
    if not torch.cuda.is_available():
        return None
    _, _, local_rank = parallel.world_from_env()
    _, total = torch.cuda.mem_get_info(local_rank)
    return int(total)


def fitted(cfg: TrainConfig, world_size: int, precision: parallel.Precision) -> TrainConfig:
    """`cfg` with its micro-batch decided: an explicit one that does not fit is refused, naming
    the estimate; without one, the largest divisor of the per-rank batch that fits (the rest is
    accumulated), or the whole per-rank batch when there is no GPU memory to respect."""
    budget = gpu_bytes(cfg)
    if budget is None:
        return cfg
    per_node = parallel.local_world_size()
    compute_bytes = 4 if precision.dtype is None else 2
    args = (cfg.seq_len, cfg.parallel, world_size, per_node, compute_bytes, cfg.activation_checkpointing)
    usable = memory.usable_bytes(budget)
    where = f"{budget / memory.GIB:.0f} GiB of GPU memory, {usable / memory.GIB:.1f} GiB usable"
    if cfg.micro_batch_size is not None:
        needed = memory.estimate(cfg.model, cfg.micro_batch_size, *args)
        if needed.total > usable:
            raise ConfigError(
                f"--micro-batch-size {cfg.micro_batch_size}: preset {cfg.preset} at --seq-len {cfg.seq_len} "
                f"needs an estimated {needed.describe()} per rank, more than the {where}; use a smaller one"
                + ("" if cfg.activation_checkpointing else " or --activation-checkpointing")
            )
        return cfg
    per_rank = cfg.global_batch_size // world_size
    micro = memory.largest_fitting(cfg.model, per_rank, *args, budget)
    if micro is None:
        needed = memory.estimate(cfg.model, 1, *args)
        raise ConfigError(
            f"preset {cfg.preset} at --seq-len {cfg.seq_len} needs an estimated {needed.describe()} per rank "
            f"for a micro-batch of 1, more than the {where}"
        )
    rank, _, _ = parallel.world_from_env()
    if rank == 0:
        log(f"micro-batch {micro} of {per_rank} per rank fits the {where} "
            f"(estimated {memory.estimate(cfg.model, micro, *args).describe()})", rank)
    return replace(cfg, micro_batch_size=micro)

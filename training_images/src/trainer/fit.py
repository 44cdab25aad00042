"""The micro-batch a rank can hold: the memory model (trainer.memory) against the GPU's memory,
decided before the process group so that a refusal is one line and hangs nobody."""

from __future__ import annotations

from dataclasses import replace

import torch

from trainer import memory, parallel
from trainer.config import TrainConfig
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
    """`cfg` with its micro-batch decided by trainer.memory.micro_batch, or as given (the whole
    per-rank batch by default) when there is no GPU memory to respect."""
    budget = gpu_bytes(cfg)
    if budget is None:
        return cfg
    compute_bytes = 4 if precision.dtype is None else 2
    micro, needed = memory.micro_batch(cfg, world_size, parallel.local_world_size(), compute_bytes, budget)
    rank, _, _ = parallel.world_from_env()
    if rank == 0 and cfg.micro_batch_size is None:
        log(f"micro-batch {micro} of {cfg.global_batch_size // world_size} per rank fits "
            f"{budget / memory.GIB:.0f} GiB of GPU memory (estimated {needed.describe()})", rank)
    return replace(cfg, micro_batch_size=micro)

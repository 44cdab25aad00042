"""Speed defaults: contiguous batches for pinned copies, and compile where it pays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from trainer import parallel
from trainer.data import TokenFile


def test_a_batch_is_two_contiguous_tensors_so_pinning_copies_once(data_dir: Path) -> None:
    inputs, targets = TokenFile(data_dir, "train", 64).batch(np.array([3, 0, 5]))
    assert inputs.is_contiguous() and targets.is_contiguous()
    assert torch.equal(inputs[:, 1:], targets[:, :-1])


def test_compile_is_on_by_default_on_cuda_for_the_large_presets_only() -> None:
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert [p for p in ("tiny", "small", "medium", "large", "1b") if parallel.compile_by_default(p, cuda)] == [
        "medium", "large", "1b"]
    assert not any(parallel.compile_by_default(p, cpu) for p in ("tiny", "small", "medium", "large", "1b"))

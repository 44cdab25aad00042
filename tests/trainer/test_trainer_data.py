"""Data preparation and the global sample order that makes resume and resize exact."""

from __future__ import annotations

import json
import tracemalloc
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from trainer.config import ConfigError, PrepareConfig
from trainer.data import GlobalOrder, RankSlice, TokenFile, TrainBatches, eval_batches, prepare


def test_prepare_cli_writes_train_and_val_splits_of_the_raw_bytes(tmp_path: Path) -> None:
    text = "".join(f"line {i}: some text\n" for i in range(500)).encode()
    (tmp_path / "corpus.txt").write_bytes(text)
    out = tmp_path / "data"
    result = subprocess.run(
        [sys.executable, "-m", "trainer", "prepare", "--input", str(tmp_path / "corpus.txt"), "--output", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    meta = json.loads((out / "meta.json").read_text())
    assert meta["train_tokens"] + meta["val_tokens"] == len(text)
    assert meta["val_tokens"] == int(len(text) * 0.1)
    assert (out / "train.bin").read_bytes() + (out / "val.bin").read_bytes() == text
    assert json.loads(result.stdout) == meta


def test_prepare_concatenates_a_folder_in_sorted_order_and_skips_dotfiles(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "b").mkdir(parents=True)
    (corpus / "b" / "2.txt").write_bytes(b"B" * 50)
    (corpus / "a.txt").write_bytes(b"A" * 50)
    (corpus / ".hidden").write_bytes(b"H" * 50)
    prepare(PrepareConfig(input=corpus, output=tmp_path / "data", val_fraction=0.2))
    assert (tmp_path / "data" / "train.bin").read_bytes() == b"A" * 50 + b"B" * 30
    assert (tmp_path / "data" / "val.bin").read_bytes() == b"B" * 20


def test_prepare_rejects_a_corpus_too_small_to_split(tmp_path: Path) -> None:
    (tmp_path / "tiny.txt").write_bytes(b"abc")
    with pytest.raises(ConfigError, match="fewer than 2 tokens"):
        prepare(PrepareConfig(input=tmp_path / "tiny.txt", output=tmp_path / "data"))


def test_token_file_yields_inputs_and_next_token_targets(tmp_path: Path) -> None:
    (tmp_path / "c.txt").write_bytes(bytes(range(100)) * 2)
    prepare(PrepareConfig(input=tmp_path / "c.txt", output=tmp_path / "data", val_fraction=0.1))
    tokens = TokenFile(tmp_path / "data", "train", seq_len=8)
    assert tokens.num_samples == (180 - 1) // 8
    inputs, targets = tokens.batch(np.array([0, 2]))
    assert inputs.dtype == targets.dtype == torch.int64
    assert inputs[1].tolist() == list(range(16, 24))
    assert targets[1].tolist() == list(range(17, 25))


def test_global_order_visits_every_sample_once_per_epoch() -> None:
    order = GlobalOrder(num_samples=37, seed=3)
    epochs = [order.indices(epoch * 37, 37) for epoch in range(3)]
    for visited in epochs:
        assert sorted(visited.tolist()) == list(range(37))
    assert epochs[0].tolist() != epochs[1].tolist(), "each epoch should be shuffled anew"
    straddling = order.indices(30, 14)
    assert straddling.tolist() == epochs[0][30:].tolist() + epochs[1][:7].tolist()


@pytest.mark.parametrize(("world_size", "micro"), [(1, 12), (1, 3), (2, 6), (3, 2), (4, 1)])
def test_rank_slices_partition_each_global_batch(world_size: int, micro: int) -> None:
    covered: list[int] = []
    for rank in range(world_size):
        layout = RankSlice(rank, world_size, global_batch_size=12, micro_batch_size=micro)
        for start in layout.micro_batch_starts(batch_start=24):
            covered += range(start, start + micro)
    assert sorted(covered) == list(range(24, 36))


def _rank_streams(tokens: TokenFile, world_size: int, consumed: int, steps: int) -> list[list[int]]:
    """Per step, the first token of every sample read by all ranks together, in rank order."""
    order = GlobalOrder(tokens.num_samples, seed=5)
    loaders = [
        TrainBatches(tokens, order, RankSlice(rank, world_size, 8, 2), consumed) for rank in range(world_size)
    ]
    return [
        [int(row[0]) for loader in loaders for inputs, _ in loader.next_step() for row in inputs]
        for _ in range(steps)
    ]


def test_resume_position_continues_the_stream_with_any_world_size(tmp_path: Path) -> None:
    (tmp_path / "c.txt").write_bytes(np.random.default_rng(0).integers(0, 256, 20_000, dtype=np.uint8).tobytes())
    prepare(PrepareConfig(input=tmp_path / "c.txt", output=tmp_path / "data"))
    tokens = TokenFile(tmp_path / "data", "train", seq_len=16)
    uninterrupted = _rank_streams(tokens, world_size=2, consumed=0, steps=6)
    resumed_on_one = _rank_streams(tokens, world_size=1, consumed=3 * 8, steps=3)
    resumed_on_four = _rank_streams(tokens, world_size=4, consumed=3 * 8, steps=3)
    assert resumed_on_one == uninterrupted[3:]
    assert resumed_on_four == uninterrupted[3:]


def _eval_split(tmp_path: Path) -> TokenFile:
    (tmp_path / "c.txt").write_bytes(bytes(range(256)) * 40)
    prepare(PrepareConfig(input=tmp_path / "c.txt", output=tmp_path / "data", val_fraction=0.5))
    return TokenFile(tmp_path / "data", "val", seq_len=16)


def _eval_samples(tokens: TokenFile, samples: int, world_size: int) -> list[list[tuple[int, float]]]:
    """Per rank: (first token, weight) of every sample it evaluates."""
    return [
        [(int(row[0]), float(w)) for inputs, _, weights in eval_batches(tokens, samples, rank, world_size, 2)
         for row, w in zip(inputs, weights, strict=True)]
        for rank in range(world_size)
    ]


@pytest.mark.parametrize("world_size", [1, 2, 3, 7])
def test_eval_set_is_the_same_samples_for_any_world_size(tmp_path: Path, world_size: int) -> None:
    tokens = _eval_split(tmp_path)
    per_rank = _eval_samples(tokens, 5, world_size)
    weighted = sorted(first for rank in per_rank for first, w in rank if w == 1.0)
    assert weighted == sorted(first for first, _ in _eval_samples(tokens, 5, 1)[0])
    assert len(weighted) == 5


def test_every_rank_runs_as_many_eval_samples_even_with_more_ranks_than_samples(tmp_path: Path) -> None:
    """Under FSDP each rank must run the same forward passes; the padding weighs nothing."""
    tokens = _eval_split(tmp_path)
    per_rank = _eval_samples(tokens, 2, world_size=72)
    assert {len(samples) for samples in per_rank} == {1}
    assert sum(w for samples in per_rank for _, w in samples) == 2.0


@pytest.mark.parametrize("num_samples", [1, 2, 3, 37, 1000, 4096, 4097])
def test_global_order_is_a_bijection_for_any_dataset_size(num_samples: int) -> None:
    order = GlobalOrder(num_samples, seed=11)
    assert sorted(order.indices(0, num_samples).tolist()) == list(range(num_samples))


def test_global_order_depends_on_the_seed_and_is_not_the_identity() -> None:
    first, second = GlobalOrder(1000, seed=1), GlobalOrder(1000, seed=2)
    assert first.indices(0, 1000).tolist() != second.indices(0, 1000).tolist()
    assert first.indices(0, 1000).tolist() != list(range(1000))
    assert first.indices(0, 1000).tolist() == GlobalOrder(1000, seed=1).indices(0, 1000).tolist()


def test_global_order_of_fifty_million_samples_takes_no_memory_beyond_the_batch() -> None:
    """The epoch order used to be materialized: 50M samples took 400 MB per rank."""
    order = GlobalOrder(num_samples=50_000_000, seed=3)
    order.indices(0, 8)  # numpy's one-time set-up is not the order's
    tracemalloc.start()
    try:
        batch = order.indices(49_999_000, 2048)  # straddles epochs 0 and 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{peak} bytes traced"
    assert len(set(batch[:1000].tolist())) == 1000
    assert all(0 <= i < 50_000_000 for i in batch.tolist())

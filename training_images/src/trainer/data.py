"""Byte-level token files and a data order that survives restarts and resizes.

On disk a prepared data folder holds `train.bin` and `val.bin` (raw token ids, read through
numpy memmaps so a corpus larger than memory costs nothing to open) and `meta.json`, written
last so its presence means the folder is complete.

A sample is a fixed window of `seq_len + 1` tokens. The order of samples is a function of
(seed, epoch) alone, computed per position without materializing it; a run's position in it is
one number, the count of samples consumed.
Each step takes the next `global_batch_size` positions and each rank its own slice of them,
so the order does not depend on how many processes share the work: a run checkpointed with
2 processes and resumed with 1 reads exactly what an uninterrupted run would have read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainer import meta as data_meta
from trainer.config import ConfigError, PrepareConfig
from trainer.meta import FORMAT, META_FILE, SPLIT_FILES

_DTYPES = {"uint8": np.uint8, "uint16": np.uint16}
_CHUNK_BYTES = 16 << 20


def _input_files(root: Path) -> list[Path]:
    """Sorted so that the same folder always yields the same token stream; dotfiles skipped."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise ConfigError(f"--input {root}: no such file or folder")
    files = [
        p
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]
    if not files:
        raise ConfigError(f"--input {root}: the folder holds no files")
    return files


def prepare(cfg: PrepareConfig) -> dict[str, object]:
    """Stream the corpus into train/val token files; the last `val_fraction` is held out.

    Holding out the tail keeps validation text disjoint from training text without reading the
    corpus twice. Files are concatenated in sorted path order.
    """
    files = _input_files(cfg.input)
    total = sum(p.stat().st_size for p in files)
    val_tokens = int(total * cfg.val_fraction)
    train_tokens = total - val_tokens
    if train_tokens < 2 or val_tokens < 2:
        raise ConfigError(
            f"--input {cfg.input}: {total} bytes with --val-fraction {cfg.val_fraction} leaves "
            "a split with fewer than 2 tokens"
        )
    cfg.output.mkdir(parents=True, exist_ok=True)
    (cfg.output / META_FILE).unlink(missing_ok=True)
    with open(cfg.output / SPLIT_FILES["train"], "wb") as train, open(
        cfg.output / SPLIT_FILES["val"], "wb"
    ) as val:
        written = 0
        for path in files:
            with open(path, "rb") as src:
                while chunk := src.read(_CHUNK_BYTES):
                    to_train = max(0, min(len(chunk), train_tokens - written))
                    train.write(chunk[:to_train])
                    val.write(chunk[to_train:])
                    written += len(chunk)
    meta: dict[str, object] = {
        "format": FORMAT,
        "dtype": "uint8",
        "vocab_size": 256,
        "train_tokens": train_tokens,
        "val_tokens": val_tokens,
        "source": str(cfg.input),
    }
    (cfg.output / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def read_meta(data_dir: Path) -> dict[str, Any]:
    """A prepared folder's meta.json: its format, and what identifies the data (token counts,
    source), which a resumed run must share with the run that saved (trainer.resume)."""
    return data_meta.read(data_dir)


class TokenFile:
    """One split of a prepared folder, cut into non-overlapping windows of seq_len+1 tokens."""

    def __init__(self, data_dir: Path, split: str, seq_len: int, vocab_size: int = 256) -> None:
        meta = read_meta(data_dir)
        self.path = data_dir / SPLIT_FILES[split]
        self.vocab_size = vocab_size
        count = int(meta[f"{split}_tokens"])
        self.seq_len = seq_len
        self.num_samples = max(0, (count - 1) // seq_len)
        if self.num_samples == 0:
            raise ConfigError(
                f"--data {data_dir}: the {split} split has {count} tokens, fewer than "
                f"--seq-len {seq_len} + 1"
            )
        self.tokens = np.memmap(
            data_dir / SPLIT_FILES[split], dtype=_DTYPES[meta["dtype"]], mode="r", shape=(count,)
        )

    def batch(self, sample_indices: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and next-token targets for the given samples, as int64 tensors."""
        rows = np.stack(
            [self.tokens[i * self.seq_len : i * self.seq_len + self.seq_len + 1] for i in sample_indices]
        ).astype(np.int64)
        # trainer.meta scans only part of the file at start-up; a stray id past the vocabulary
        # is refused here, in one line, before the embedding fails on it.
        if rows.size and int(rows.max()) >= self.vocab_size:
            raise ConfigError(f"{self.path}: token id {int(rows.max())} is out of range ({self.vocab_size} tokens)")
        # Two contiguous tensors, not views of one window: pin_memory() of a strided view copies
        # through a pageable temporary, which makes the non-blocking copy to the GPU synchronous.
        return torch.from_numpy(np.ascontiguousarray(rows[:, :-1])), torch.from_numpy(np.ascontiguousarray(rows[:, 1:]))


# Rounds of the Feistel network below; with a well-mixing round function, more than the 3-4 that
# make it a pseudo-random permutation (Luby and Rackoff, 1988).
FEISTEL_ROUNDS = 6
_MASK_64 = (1 << 64) - 1


def _mix(x: int) -> int:
    """SplitMix64's finalizer (Steele, Lea and Flood, 2014): every input bit moves every output
    bit. Plain ints: a step looks up a few dozen samples, where numpy's per-call cost dominates."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK_64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK_64
    return x ^ (x >> 31)


class GlobalOrder:
    """Maps a global sample position to a sample index: a fresh seeded permutation per epoch,
    computed position by position in O(1) memory.

    The permutation is a balanced Feistel network over the smallest power of 4 that covers the
    samples, with round keys drawn from (seed, epoch); positions it maps past the last sample are
    mapped again until they land inside ("cycle walking", Black and Rogaway, 2002), which keeps it
    a bijection on [0, num_samples). The domain is under 4x the samples, so that takes under 4
    passes on average. Nothing is materialized: 50M samples cost no more than 50.
    """

    def __init__(self, num_samples: int, seed: int) -> None:
        self.num_samples = num_samples
        self.seed = seed
        self.half_bits = max(1, -(-max(num_samples - 1, 1).bit_length() // 2))
        self._mask = (1 << self.half_bits) - 1
        self._epoch_keys: tuple[int, list[int]] = (-1, [])

    def _keys(self, epoch: int) -> list[int]:
        if self._epoch_keys[0] != epoch:
            raw = np.random.PCG64([self.seed, epoch]).random_raw(FEISTEL_ROUNDS)
            self._epoch_keys = (epoch, [int(k) for k in raw])
        return self._epoch_keys[1]

    def _feistel(self, x: int, keys: list[int]) -> int:
        left, right = x >> self.half_bits, x & self._mask
        for key in keys:
            left, right = right, left ^ (_mix(right ^ key) & self._mask)
        return (left << self.half_bits) | right

    def sample(self, position: int) -> int:
        """The sample at a global position (epoch = position // num_samples)."""
        epoch, x = divmod(position, self.num_samples)
        keys = self._keys(epoch)
        x = self._feistel(x, keys)
        while x >= self.num_samples:
            x = self._feistel(x, keys)
        return x

    def indices(self, start: int, count: int) -> np.ndarray:
        """Samples at positions [start, start+count), crossing an epoch boundary if needed."""
        return np.fromiter((self.sample(p) for p in range(start, start + count)), dtype=np.int64, count=count)


@dataclass(frozen=True)
class RankSlice:
    """Which positions of each global batch one rank reads, micro-batch by micro-batch."""

    rank: int
    world_size: int
    global_batch_size: int
    micro_batch_size: int

    def micro_batch_starts(self, batch_start: int) -> list[int]:
        per_rank = self.global_batch_size // self.world_size
        first = batch_start + self.rank * per_rank
        return list(range(first, first + per_rank, self.micro_batch_size))


class TrainBatches:
    """The training stream of one rank, resumable from a consumed-samples count."""

    def __init__(self, tokens: TokenFile, order: GlobalOrder, layout: RankSlice, consumed: int) -> None:
        self.tokens = tokens
        self.order = order
        self.layout = layout
        self.consumed = consumed

    def next_step(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """This rank's micro-batches of the next step; its positions are contiguous, so their
        samples are looked up in one call."""
        micro = self.layout.micro_batch_size
        starts = self.layout.micro_batch_starts(self.consumed)
        samples = self.order.indices(starts[0], len(starts) * micro)
        self.consumed += self.layout.global_batch_size
        return [self.tokens.batch(samples[i : i + micro]) for i in range(0, len(samples), micro)]


def eval_sample_count(tokens: TokenFile, samples: int) -> int:
    """The held-out set: the first --eval-samples windows, or all the val split holds."""
    return min(samples, tokens.num_samples)


def eval_batches(
    tokens: TokenFile, samples: int, rank: int, world_size: int, micro_batch_size: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """The first validation windows in file order, dealt round-robin to ranks, with a weight per
    sample.

    A fixed set, not a shuffle, so successive eval losses of one run are comparable. Every rank
    runs ceil(count / world_size) samples, because under FSDP every rank must run the same number
    of forward passes or the all-gathers of the one with more would wait forever; the places past
    the set repeat window 0 with weight 0. So the loss is over exactly the same samples for any
    world size, including more ranks than samples.
    """
    count = eval_sample_count(tokens, samples)
    per_rank = -(-count // world_size)
    positions = np.arange(per_rank) * world_size + rank
    real = positions < count
    ids = np.where(real, positions, 0)
    for start in range(0, per_rank, micro_batch_size):
        inputs, targets = tokens.batch(ids[start : start + micro_batch_size])
        yield inputs, targets, torch.from_numpy(real[start : start + micro_batch_size].astype(np.float64))

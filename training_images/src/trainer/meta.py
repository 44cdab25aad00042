"""The prepared data folder checked against the model before any process group exists.

A token id the embedding cannot index fails only inside a forward pass (an IndexError on CPU, a
device-side assert on a GPU), after every rank has joined; a file shorter than its meta.json says
fails inside a memmap. Both are cheaper to refuse at start-up, in one line naming the file. Stdlib
only, so `gpu-platform job` runs the same check when it can see the data.
"""

from __future__ import annotations

import array
import json
import os
from pathlib import Path
from typing import Any

from trainer.config import ConfigError

META_FILE = "meta.json"
FORMAT = "trainer-tokens-v1"
SPLIT_FILES = {"train": "train.bin", "val": "val.bin"}
# Bytes per token and the largest id each dtype holds; array typecodes read them natively.
DTYPE_BYTES = {"uint8": 1, "uint16": 2}
_TYPECODES = {"uint8": "B", "uint16": "H"}
# The id scan reads this many evenly spaced chunks of each split: a file tokenized for another
# vocabulary (ids up to 50,256, say) shows in any chunk, while a start-up stays a few MiB of reads.
# A single stray id elsewhere is caught when its batch is read (trainer.data.TokenFile.batch).
SCAN_CHUNKS = 16
SCAN_CHUNK_BYTES = 1 << 18


def read(data_dir: Path) -> dict[str, Any]:
    """meta.json of a prepared folder: its format, dtype, vocabulary and token counts."""
    path = data_dir / META_FILE
    if not path.is_file():
        raise ConfigError(f"--data {data_dir}: no {META_FILE}; run `python -m trainer prepare` first")
    try:
        meta = json.loads(path.read_text())
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ConfigError(f"{path}: not a {FORMAT} file")
    if meta.get("dtype") not in DTYPE_BYTES:
        raise ConfigError(f"{path}: dtype {meta.get('dtype')!r}, expected one of {', '.join(DTYPE_BYTES)}")
    for key in ("vocab_size", "train_tokens", "val_tokens"):
        if not isinstance(meta.get(key), int) or isinstance(meta.get(key), bool) or meta[key] < 0:
            raise ConfigError(f"{path}: {key} {meta.get(key)!r}, expected a non-negative integer")
    return meta


def _max_id(path: Path, dtype: str, tokens: int) -> int:
    """The largest id in SCAN_CHUNKS evenly spaced chunks of the file (all of it when smaller)."""
    width = DTYPE_BYTES[dtype]
    size = tokens * width
    chunk = SCAN_CHUNK_BYTES - SCAN_CHUNK_BYTES % width
    if size <= chunk * SCAN_CHUNKS:
        starts = range(0, size, chunk)
    else:
        stride = (size - chunk) // (SCAN_CHUNKS - 1)
        starts = range(0, size - chunk + 1, stride - stride % width)
    largest = 0
    with open(path, "rb") as file:
        for start in starts:
            file.seek(start)
            values = array.array(_TYPECODES[dtype], file.read(min(chunk, size - start)))
            if values:
                largest = max(largest, max(values))
    return largest


def check(data_dir: Path, vocab_size: int, seq_len: int, preset: str) -> dict[str, Any]:
    """meta.json and the split files against a model of `vocab_size` tokens trained on windows
    of `seq_len` + 1: the dtype can hold the vocabulary, the vocabulary fits the model, each
    split is as long as meta.json says and holds a window, and no scanned id is out of range."""
    meta = read(data_dir)
    where = data_dir / META_FILE
    dtype = meta["dtype"]
    if meta["vocab_size"] > 256 ** DTYPE_BYTES[dtype]:
        raise ConfigError(f"{where}: vocab_size {meta['vocab_size']} does not fit dtype {dtype}")
    if meta["vocab_size"] > vocab_size:
        raise ConfigError(
            f"{where}: vocab_size {meta['vocab_size']}, but preset {preset!r} embeds {vocab_size} tokens"
        )
    for split, name in SPLIT_FILES.items():
        path = data_dir / name
        tokens = meta[f"{split}_tokens"]
        expected = tokens * DTYPE_BYTES[dtype]
        size = os.stat(path).st_size if path.is_file() else None
        if size != expected:
            found = "missing" if size is None else f"{size} bytes"
            raise ConfigError(f"{path}: {found}, but {where} says {tokens} {dtype} tokens ({expected} bytes)")
        if tokens < seq_len + 1:
            raise ConfigError(f"{path}: the {split} split has {tokens} tokens, fewer than --seq-len {seq_len} + 1")
        largest = _max_id(path, dtype, tokens)
        if largest >= vocab_size:
            raise ConfigError(
                f"{path}: token id {largest} is out of range for preset {preset!r} ({vocab_size} tokens)"
            )
    return meta

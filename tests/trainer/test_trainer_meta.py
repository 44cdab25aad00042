"""The prepared data is checked against the preset before any process group: one line naming the
file and the mismatch, exit 2."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from trainer import meta
from trainer.config import ConfigError


def _folder(root: Path, dtype: str = "uint16", vocab: int = 256, ids: tuple[int, ...] = (1, 2, 3),
            tokens: int = 4000) -> Path:
    width = meta.DTYPE_BYTES[dtype]
    body = b"".join(ids[i % len(ids)].to_bytes(width, "little") for i in range(tokens))
    root.mkdir(parents=True, exist_ok=True)
    for name in meta.SPLIT_FILES.values():
        (root / name).write_bytes(body)
    (root / meta.META_FILE).write_text(json.dumps({
        "format": meta.FORMAT, "dtype": dtype, "vocab_size": vocab, "train_tokens": tokens, "val_tokens": tokens}))
    return root


def _refusal(folder: Path, seq_len: int = 64) -> str:
    with pytest.raises(ConfigError) as error:
        meta.check(folder, 256, seq_len, "tiny")
    return str(error.value)


def test_a_folder_that_fits_the_preset_passes(tmp_path: Path) -> None:
    assert meta.check(_folder(tmp_path, ids=(0, 255)), 256, 64, "tiny")["vocab_size"] == 256


def test_a_vocabulary_larger_than_the_preset_s_is_refused_naming_meta_json(tmp_path: Path) -> None:
    folder = _folder(tmp_path, vocab=50257)
    assert _refusal(folder) == f"{folder / 'meta.json'}: vocab_size 50257, but preset 'tiny' embeds 256 tokens"


def test_token_ids_past_the_vocabulary_are_refused_naming_the_split_file(tmp_path: Path) -> None:
    # meta.json claims a byte vocabulary, but the uint16 file was tokenized for something larger.
    folder = _folder(tmp_path, ids=(17, 3000, 50256))
    assert _refusal(folder) == f"{folder / 'train.bin'}: token id 50256 is out of range for preset 'tiny' (256 tokens)"


def test_an_out_of_range_id_in_a_large_file_is_found_by_the_sampled_scan(tmp_path: Path) -> None:
    # Spread over 16 MiB, far more than the scan reads, every id but the first is 999.
    folder = _folder(tmp_path, ids=(5, *([999] * 7)), tokens=8 << 20)
    assert "token id 999 is out of range" in _refusal(folder)


def test_a_dtype_the_trainer_cannot_read_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    text = (folder / "meta.json").read_text().replace('"uint16"', '"int32"')
    (folder / "meta.json").write_text(text)
    assert _refusal(folder) == f"{folder / 'meta.json'}: dtype 'int32', expected one of uint8, uint16"


def test_a_split_shorter_than_meta_json_says_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, dtype="uint8")
    (folder / "val.bin").write_bytes(b"abc")
    assert _refusal(folder) == f"{folder / 'val.bin'}: 3 bytes, but {folder / 'meta.json'} says 4000 uint8 tokens (4000 bytes)"


def test_a_split_shorter_than_one_window_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, dtype="uint8", tokens=50)
    assert _refusal(folder) == f"{folder / 'train.bin'}: the train split has 50 tokens, fewer than --seq-len 64 + 1"


def test_a_mismatch_is_refused_before_the_process_group(tmp_path: Path) -> None:
    """Rank 1 of 2, with a rendezvous nobody hosts: were the check after init_process_group, the
    process would wait on the rendezvous until the timeout instead of exiting 2 at once."""
    folder = _folder(tmp_path / "data", ids=(1, 4000))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port)}
    argv = ["train", "--data", str(folder), "--checkpoint-dir", str(tmp_path / "ck"), "--preset", "tiny",
            "--max-steps", "2", "--checkpoint-every", "2", "--global-batch-size", "4", "--seq-len", "64",
            "--seed", "1", "--metrics-file", str(tmp_path / "m.jsonl"), "--dist-timeout", "300"]
    result = subprocess.run([sys.executable, "-m", "trainer", *argv], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"trainer: error: {folder / 'train.bin'}: token id 4000 is out of range for preset 'tiny' (256 tokens)"]
    assert not (tmp_path / "ck").exists()

"""Bad input ends with one clear line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = ["--checkpoint-dir", "ck", "--max-steps", "5", "--checkpoint-every", "5", "--seed", "1",
        "--metrics-file", "m.jsonl"]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["train", "--data", "{data}", "--preset", "huge", "--global-batch-size", "4", "--seq-len", "64", *GOOD],
         {}, "argument --preset: invalid choice: 'huge'"),
        (["train", "--data", "{missing}", "--preset", "tiny", "--global-batch-size", "4", "--seq-len", "64", *GOOD],
         {}, "no meta.json; run `python -m trainer prepare` first"),
        (["train", "--data", "{data}", "--preset", "tiny", "--global-batch-size", "4", "--seq-len", "4096", *GOOD],
         {}, "--seq-len 4096 exceeds the 256-token context of preset 'tiny'"),
        (["train", "--data", "{data}", "--preset", "tiny", "--global-batch-size", "5", "--seq-len", "64", *GOOD],
         {"WORLD_SIZE": "2", "RANK": "0"}, "--global-batch-size 5 is not divisible by the 2 processes"),
        (["export", "--checkpoint-dir", "{missing}", "--output", "o.pt", "--prune", "1.5", "--quantize", "int8"],
         {}, "argument --prune: expected a number in [0, 1), got '1.5'"),
        (["train", "--data", "{data}", "--preset", "tiny", "--global-batch-size", "6", "--seq-len", "64",
          "--parallel", "hsdp", *GOOD],
         {"WORLD_SIZE": "6", "RANK": "0", "LOCAL_WORLD_SIZE": "4"}, "--parallel hsdp: 6 processes do not split into nodes of 4"),
        (["prepare", "--input", "{missing}", "--output", "out", "--val-fraction", "0"],
         {}, "argument --val-fraction: expected a number in (0, 1), got '0'"),
    ],
    ids=["unknown-preset", "unprepared-data", "seq-len-over-context", "batch-not-divisible", "prune-out-of-range",
         "hsdp-uneven-nodes", "val-fraction-zero"],
)
def test_bad_arguments_give_one_line_error_and_nonzero_exit(
    tmp_path: Path, data_dir: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    argv = [a.format(data=data_dir, missing=tmp_path / "missing") for a in args]
    result = subprocess.run([sys.executable, "-m", "trainer", *argv], capture_output=True, text=True,
                            cwd=tmp_path, env={**os.environ, **env}, timeout=120)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]

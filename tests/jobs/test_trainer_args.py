"""Trainer arguments are judged by the trainer's own parser, every problem at once."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from components.jobs import trainer_args
from trainer import config

VALID = [
    "--data", "/d", "--checkpoint-dir", "/c", "--metrics-file", "/m", "--preset", "small", "--max-steps", "10",
    "--checkpoint-every", "5", "--global-batch-size", "32", "--seq-len", "512", "--seed", "1",
]


def parses(args: list[str]) -> bool:
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            config.parse(["train", *args])
        except (SystemExit, config.ConfigError):
            return False
    return True


@pytest.mark.parametrize(
    "args",
    [
        VALID,
        [*VALID, "--compile"],
        [*VALID, "--lr=0.001"],
        [*VALID, "--max-st", "3"],
        [*VALID, "--seed", "-3"],
        [*VALID, "--parallel", "tp"],
        [*VALID, "--keep-checkpoints", "-1"],
        [*VALID, "--compile=yes"],
        [*VALID, "extra"],
        [*VALID, "--min-lr-ratio", "1.0"],
        [*VALID, "--lr"],
        [*VALID, "--micro-batch-size", "abc"],
        VALID[:-2],
        [],
    ],
)
def test_the_walk_and_the_trainer_s_parser_agree(args: list[str]) -> None:
    assert (trainer_args.problems(args, None) == []) == parses(args)


def test_every_problem_is_reported_not_only_the_first() -> None:
    found = trainer_args.problems(["--preset", "nosuch", "--max-steps", "0"], None)
    assert "--preset: 'nosuch' is not one of 1b, large, medium, small, tiny" in found
    assert "--max-steps: expected a positive integer, got '0'" in found
    assert "--seed: required" in found


def test_an_ambiguous_abbreviation_names_the_candidates() -> None:
    assert trainer_args.problems([*VALID, "--eval=3"], None) == ["--eval: ambiguous, could be --eval-every, --eval-samples"]


def test_help_is_not_a_training_run() -> None:
    assert trainer_args.problems([*VALID, "--help"], None) == ["--help: prints help instead of training"]


def test_the_world_size_must_divide_the_batch() -> None:
    assert trainer_args.problems(VALID, 3) == ["--global-batch-size 32 is not divisible by the 3 processes; use a multiple of 3"]


def test_a_prepared_folder_this_machine_can_read_is_checked_against_the_preset(tmp_path: Path) -> None:
    (tmp_path / "train.bin").write_bytes(b"\x01\x00\x10\x27" * 1000)  # uint16 ids 1 and 10000
    (tmp_path / "val.bin").write_bytes(b"\x01\x00" * 2000)
    (tmp_path / "meta.json").write_text(json.dumps({"format": "trainer-tokens-v1", "dtype": "uint16",
                                                     "vocab_size": 256, "train_tokens": 2000, "val_tokens": 2000}))
    args = [a if a != "/d" else str(tmp_path) for a in VALID]
    assert trainer_args.problems(args, None) == [
        f"{tmp_path / 'train.bin'}: token id 10000 is out of range for preset 'small' (256 tokens)"]


def test_a_data_path_only_the_pods_see_is_left_to_the_trainer() -> None:
    assert trainer_args.problems(VALID, None) == []


def test_with_the_gpu_s_memory_a_micro_batch_that_cannot_fit_is_refused_naming_the_estimate() -> None:
    args = ["--data", "/d", "--checkpoint-dir", "/c", "--metrics-file", "/m", "--preset", "1b", "--max-steps", "10",
            "--checkpoint-every", "5", "--global-batch-size", "512", "--seq-len", "2048", "--seed", "1",
            "--parallel", "fsdp", "--gpu-memory-gib", "80"]
    assert trainer_args.problems(args, 16, 8) == []
    [refusal] = trainer_args.problems([*args, "--micro-batch-size", "32"], 16, 8)
    assert refusal.startswith("--micro-batch-size 32: preset 1b at --seq-len 2048 needs an estimated 92.53 GiB")

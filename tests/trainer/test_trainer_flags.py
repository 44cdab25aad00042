"""Every numeric flag of `train` is range-checked by the parser: one line, exit 2, no traceback."""

from __future__ import annotations

import pytest

from trainer.config import MAX_SEED, TrainConfig, parse

BASE = ["train", "--data", "d", "--checkpoint-dir", "ck", "--preset", "tiny", "--max-steps", "5",
        "--checkpoint-every", "5", "--global-batch-size", "4", "--seq-len", "64", "--metrics-file", "m.jsonl"]


def _train(*extra: str, seed: str = "1") -> list[str]:
    return [*BASE, "--seed", seed, *extra]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (_train(seed="-1"), f"argument --seed: expected an integer in [0, {MAX_SEED}], got '-1'"),
        (_train(seed=str(MAX_SEED + 1)), "argument --seed: expected an integer in"),
        (_train("--weight-decay", "-0.1"), "argument --weight-decay: expected a number >= 0, got '-0.1'"),
        (_train("--lr", "inf"), "argument --lr: expected a positive number, got 'inf'"),
        (_train("--lr", "nan"), "argument --lr: expected a positive number, got 'nan'"),
        (_train("--grad-clip", "0"), "argument --grad-clip: expected a positive number, got '0'"),
        (_train("--dist-timeout", "-5"), "argument --dist-timeout: expected a positive number"),
        (_train("--peak-tflops", "inf"), "argument --peak-tflops: expected a positive number"),
        (_train("--gpu-memory-gib", "0"), "argument --gpu-memory-gib: expected a positive number"),
        (_train("--min-lr-ratio", "nan"), "argument --min-lr-ratio: expected a number in [0, 1)"),
        (_train("--warmup-steps", "-1"), "argument --warmup-steps: expected an integer >= 0"),
        (_train("--micro-batch-size", "0"), "argument --micro-batch-size: expected a positive integer"),
    ],
    ids=["seed-negative", "seed-too-large", "weight-decay-negative", "lr-inf", "lr-nan", "grad-clip-zero",
         "dist-timeout-negative", "peak-tflops-inf", "gpu-memory-zero", "min-lr-ratio-nan", "warmup-negative",
         "micro-batch-zero"],
)
def test_an_out_of_range_number_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_the_seed_range_s_ends_are_accepted() -> None:
    for seed in ("0", str(MAX_SEED)):
        cfg = parse(_train(seed=seed))
        assert isinstance(cfg, TrainConfig) and cfg.seed == int(seed)


def test_compile_is_left_to_the_trainer_unless_a_flag_says_otherwise() -> None:
    assert [getattr(parse(_train(*flag)), "compile") for flag in ([], ["--compile"], ["--no-compile"])] == [
        None, True, False]

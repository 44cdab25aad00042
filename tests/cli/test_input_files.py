"""Inputs are regular files: a FIFO or a device as a stack file, a trace or a stack under
stacks/ is refused before anything reads it (exit 2, naming it), and never hangs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import REPO

from infra import cli

pytestmark = pytest.mark.usefixtures("fast_synth")

JOB_FLAGS = ["--pool", "a100-train", "--nodes", "1", "--gpus-per-node", "8", "--tier", "standard"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    (tmp_path / "stacks").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def exits_2_saying(argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2, argv
    err = capsys.readouterr().err
    assert line in err.splitlines(), (argv, err)
    assert "Traceback" not in err


def test_a_fifo_as_a_stack_file_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo("Pulumi.pipe.yaml")
    for argv in (["synth", "Pulumi.pipe.yaml"], ["check", "Pulumi.pipe.yaml"], ["job", "Pulumi.pipe.yaml", *JOB_FLAGS]):
        exits_2_saying(argv, "error: Pulumi.pipe.yaml: a FIFO (named pipe), not a regular file", capsys)


def test_dev_zero_as_a_stack_file_is_refused(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.symlink("/dev/zero", "Pulumi.zero.yaml")
    exits_2_saying(["check", "Pulumi.zero.yaml"], "error: Pulumi.zero.yaml: a character device, not a regular file", capsys)


def test_check_refuses_a_fifo_among_the_stacks(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo("stacks/Pulumi.pipe.yaml")
    exits_2_saying(["check"], f"error: {Path('stacks/Pulumi.pipe.yaml')}: a FIFO (named pipe), not a regular file", capsys)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_special_file_as_a_trace_is_refused(tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    if kind == "fifo":
        os.mkfifo(trace)
    else:
        os.symlink("/dev/zero", trace)
    word = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    stack = str(REPO / "stacks" / "Pulumi.onprem.yaml")
    exits_2_saying(
        ["simulate", stack, "--trace", str(trace), "--out", str(tmp_path / "out")],
        f"{trace}: cannot read the trace: {word}, not a regular file",
        capsys,
    )
    exits_2_saying(["review", stack, "--base", "HEAD", "--trace", str(trace)], f"{trace}: cannot read the trace: {word}, not a regular file", capsys)


def test_review_refuses_a_malformed_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("id,submit_s\n")
    exits_2_saying(
        ["review", str(REPO / "stacks" / "Pulumi.onprem.yaml"), "--base", "HEAD", "--trace", str(trace)],
        f"{trace}:1: column team: missing from the header",
        capsys,
    )


def test_a_lone_surrogate_escape_in_yaml_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (REPO / "stacks" / "Pulumi.onprem.yaml").read_text().replace("name: lab\n", 'name: "lab\\ud800"\n', 1)
    Path("Pulumi.sur.yaml").write_text(text)
    exits_2_saying(
        ["check", "Pulumi.sur.yaml"],
        "Pulumi.sur.yaml: platform.cluster.name: expected text without control characters, got 'lab\\ud800' (U+D800)",
        capsys,
    )


def test_a_lone_surrogate_in_a_config_key_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (REPO / "stacks" / "Pulumi.onprem.yaml").read_text().replace("config:\n", 'config:\n  "x\\udc80": 1\n', 1)
    Path("Pulumi.key.yaml").write_text(text)
    exits_2_saying(
        ["check", "Pulumi.key.yaml"],
        "Pulumi.key.yaml: 'x\\udc80': expected text without control characters, got 'x\\udc80' (U+DC80)",
        capsys,
    )

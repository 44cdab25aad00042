"""`--out/<stack>` is written whole or not at all: a failed write keeps the previous output, runs
that overlap leave one run's output, and the folder holds exactly what one synth produced."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from infra import cli, output_folder, synth

pytestmark = pytest.mark.usefixtures("fast_synth")


def contents(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_folder_holds_exactly_what_the_synth_produced(tmp_path: Path, onprem_synthesis: synth.Synthesis) -> None:
    target = tmp_path / "onprem"
    (target / "manifests" / "old").mkdir(parents=True)
    (target / "manifests" / "stale.yml").write_text("stale\n")
    (target / "manifests" / "old" / "x.yaml").write_text("stale\n")
    (target / "notes.txt").write_text("stale\n")
    assert cli.main(["synth", "onprem", "--out", str(tmp_path)]) == 0
    expected = synth.files(onprem_synthesis, "")
    assert set(contents(target)) == set(expected)
    assert [p.name for p in tmp_path.iterdir()] == ["onprem"], "no staging folder is left beside it"


def test_a_write_that_fails_midway_leaves_the_previous_output_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["synth", "onprem", "--out", str(tmp_path)]) == 0
    target = tmp_path / "onprem"
    previous = contents(target)
    capsys.readouterr()
    fifth = sorted(previous)[4]
    writes: list[Path] = []
    real_write_text = Path.write_text

    def disk_fills_up(path: Path, text: str, *args: object, **kwargs: object) -> int:
        writes.append(path)
        if len(writes) == 5:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write_text(path, text)

    monkeypatch.setattr(Path, "write_text", disk_fills_up)
    assert cli.main(["synth", "onprem", "--out", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f"error: {target / fifth}: cannot write: No space left on device ({target} is left as it was)\n"
    )
    assert contents(target) == previous
    assert [p.name for p in tmp_path.iterdir()] == ["onprem"], "the half-written folder is removed"


def test_overlapping_writes_of_one_stack_leave_one_whole_output(tmp_path: Path) -> None:
    """8 writers x 15 rounds into one folder, each output different: none fails, and the folder
    ends as one writer's output, complete."""
    target = tmp_path / "dev-aws"
    outputs = [{f"manifests/m{i}.yaml": f"{w}\n" for i in range(10)} | {"summary.md": f"{w}\n"} for w in range(8)]
    failures: list[BaseException] = []

    def writer(files: dict[str, str]) -> None:
        try:
            for _ in range(15):
                output_folder.write(files, target)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(files,)) for files in outputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert contents(target) in outputs
    assert [p.name for p in tmp_path.iterdir()] == ["dev-aws"]


def test_a_file_where_the_folder_goes_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "onprem").write_text("not a folder\n")
    output_folder.write({"summary.md": "s\n"}, tmp_path / "onprem")
    assert contents(tmp_path / "onprem") == {"summary.md": "s\n"}
    assert [p.name for p in tmp_path.iterdir()] == ["onprem"]


def test_out_that_is_a_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "out").write_text("")
    assert cli.main(["synth", "onprem", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"error: --out {tmp_path / 'out'}: not a folder\n"

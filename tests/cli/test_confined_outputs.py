"""synth, simulate and review --out share one writer (infra.output_folder): a symlink at the
output is replaced, never followed out of --out; a full disk leaves the previous output as it
was; no stale file survives; an empty --out and a folder as review's --out file are refused."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, Callable

import pytest
from helpers import REPO

from infra import cli

pytestmark = pytest.mark.usefixtures("fast_synth")

ONPREM = str(REPO / "stacks" / "Pulumi.onprem.yaml")
TRACE_ROWS = "id,submit_s,team,tier,pool,nodes,gpus_per_node,duration_s\nj1,0,research,production,a100-train,1,8,600\n"


def trace(tmp_path: Path) -> str:
    path = tmp_path / "trace.csv"
    path.write_text(TRACE_ROWS)
    return str(path)


def commands(tmp_path: Path, out: Path) -> dict[str, list[str]]:
    """Each writing command, aimed at `out` (a folder for synth and simulate, a file for review)."""
    return {
        "synth": ["synth", ONPREM, "--out", str(out)],
        "simulate": ["simulate", ONPREM, "--trace", trace(tmp_path), "--out", str(out)],
        "review": ["review", ONPREM, "--base", "HEAD", "--out", str(out / "onprem")],
    }


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command", ["synth", "simulate", "review"])
def test_a_symlink_at_the_output_is_replaced_not_followed(tmp_path: Path, command: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "onprem").symlink_to(elsewhere, target_is_directory=True)
    if command == "review":
        (out / "onprem").unlink()
        (out / "onprem").symlink_to(elsewhere / "keep.txt")
    assert cli.main(commands(tmp_path, out)[command]) in (0, 1)
    assert tree(elsewhere) == {"keep.txt": b"mine\n"}, "nothing was written through the link"
    assert not (out / "onprem").is_symlink()


@pytest.mark.parametrize("command", ["synth", "simulate", "review"])
def test_a_full_disk_leaves_the_previous_output_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    out = tmp_path / "out"
    argv = commands(tmp_path, out)[command]
    cli.main(argv)
    before = tree(out)
    assert before, "the first run wrote its output"
    capsys.readouterr()

    def disk_full(original: Callable[..., Any]) -> Callable[..., Any]:
        """The call writes part of its file (created empty, or the real call made), then the disk is full."""

        def write(self: Any, *args: Any, **kwargs: Any) -> Any:
            mode = str(args[0] if args else kwargs.get("mode", "r"))
            if original is Path.open and not set(mode) & set("wxa"):
                return original(self, *args, **kwargs)
            handle = original(self, *args, **kwargs)
            if hasattr(handle, "close"):
                handle.close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        return write

    import matplotlib.figure

    monkeypatch.setattr(Path, "write_text", disk_full(Path.write_text))
    monkeypatch.setattr(Path, "open", disk_full(Path.open))
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", disk_full(matplotlib.figure.Figure.savefig))
    assert cli.main(argv) == 1
    monkeypatch.undo()
    assert "No space left on device" in capsys.readouterr().err
    assert tree(out) == before
    assert [p.name for p in out.iterdir()] == ["onprem"], "no staging file or folder is left beside it"


def test_simulate_leaves_no_stale_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "onprem").mkdir(parents=True)
    (out / "onprem" / "stale.png").write_text("old\n")
    (out / "onprem" / "notes.txt").write_text("old\n")
    assert cli.main(commands(tmp_path, out)["simulate"]) == 0
    names = set(tree(out / "onprem"))
    assert "stale.png" not in names and "notes.txt" not in names and "report.md" in names


@pytest.mark.parametrize("command", ["synth", "simulate", "review"])
def test_an_empty_out_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    argv = commands(tmp_path, tmp_path)[command]
    argv[argv.index("--out") + 1] = ""
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert "expected a path, got an empty one" in capsys.readouterr().err


def test_review_out_that_is_a_folder_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["review", ONPREM, "--base", "HEAD", "--out", str(tmp_path)]) == 2
    assert f"error: --out {tmp_path}: a folder; review --out names the report's file" in capsys.readouterr().err.splitlines()

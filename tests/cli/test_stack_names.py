"""A stack's name comes from its file name, and names the output folder: only names Pulumi
accepts pass, and no name or `--out` value makes synth write outside `--out/<stack>`."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from conftest import ONPREM
from helpers import REPO

from infra import cli, stackfile

pytestmark = pytest.mark.usefixtures("fast_synth")


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def a_stack_file(folder: Path, name: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ONPREM.read_text())
    return path


@pytest.fixture
def earlier_output(tmp_path: Path) -> Path:
    """DIR/a/b holding what a user keeps there: a resources.json and manifests/keep.yaml."""
    folder = tmp_path / "a" / "b"
    (folder / "manifests").mkdir(parents=True)
    (folder / "resources.json").write_text("mine\n")
    (folder / "manifests" / "keep.yaml").write_text("keep: true\n")
    return folder


@pytest.mark.parametrize(("file_name", "stack"), [("Pulumi....yaml", ".."), ("Pulumi...yaml", "."), ("Pulumi..yaml", "")])
def test_a_stack_named_like_a_path_step_is_refused_and_nothing_is_written(
    tmp_path: Path, earlier_output: Path, capsys: pytest.CaptureFixture[str], file_name: str, stack: str
) -> None:
    path = a_stack_file(tmp_path / "files", file_name)
    before = files_under(tmp_path)
    assert cli.main(["synth", str(path), "--out", str(earlier_output / "out")]) == 2
    assert capsys.readouterr().err == (
        f"error: {path}: stack name {stack!r} is not allowed: a stack name is 1-100 letters, digits, '_', '.' or '-',"
        " and not '.' or '..'\n"
    )
    assert files_under(tmp_path) == before


def test_a_stack_name_with_characters_pulumi_refuses_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = a_stack_file(tmp_path, "Pulumi.dev aws.yaml")
    assert cli.main(["synth", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "stack name 'dev aws' is not allowed" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_stack_name_longer_than_pulumi_allows_exits_2(tmp_path: Path) -> None:
    path = a_stack_file(tmp_path, f"Pulumi.{'a' * 101}.yaml")
    assert cli.main(["synth", str(path), "--out", str(tmp_path / "out")]) == 2


def test_a_stack_name_given_on_the_command_line_is_checked_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["synth", ".."]) == 2
    assert "stack name '..' is not allowed" in capsys.readouterr().err


@pytest.mark.parametrize("stack", ["dev-aws", "a", "Prod_2.eu-west", "." * 3, "x" * 100])
def test_every_name_pulumi_accepts_except_path_steps_is_a_stack_name(stack: str) -> None:
    assert stackfile.stack_name_problem(stack) is None


# Pieces random stack names are made of: what Pulumi allows, and what a path or a shell gives
# meaning to.
NAME_PIECES = ["a", "Z", "0", "-", "_", ".", "..", "/", "\\", " ", "~", "$", "*", "é", ":", "Pulumi.", ".yaml"]
OUT_PIECES = ["o", "p", ".", "..", "deep/er", "o/../p"]


def random_name(rng: random.Random) -> str:
    return "".join(rng.choice(NAME_PIECES) for _ in range(rng.randint(0, 5)))


def random_out(rng: random.Random) -> str:
    return "/".join(rng.choice(OUT_PIECES) for _ in range(rng.randint(1, 4)))


def test_random_stack_names_and_out_folders_never_write_outside_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 seeded random (stack name, --out) pairs through `gpu-platform synth`: whatever the
    outcome, every file that appears or changes lies under --out/<stack>, and files already
    there that are not the synth's own are outside it."""
    rng = random.Random(12)
    sandbox = tmp_path / "sandbox"
    work = sandbox / "w1" / "w2" / "w3"
    work.mkdir(parents=True)
    (sandbox / "w1" / "keep.txt").write_text("keep\n")
    (sandbox / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    monkeypatch.chdir(work)
    written = refused = 0
    for _ in range(200):
        name, out = random_name(rng), random_out(rng)
        if not (work / out).resolve().is_relative_to(sandbox):
            continue
        try:
            path = a_stack_file(work / "stacks", f"Pulumi.{name}.yaml")
        except OSError:
            continue
        before = files_under(sandbox)
        code = cli.main(["synth", str(path), "--out", out])
        after = files_under(sandbox)
        touched = {f for f in after if before.get(f) != after[f]} | (set(before) - set(after))
        out_folder = (work / out).resolve()
        for f in touched:
            where = (sandbox / f).resolve()
            assert where.is_relative_to(out_folder) and where.relative_to(out_folder).parts[0] == name, (name, out, f)
        written += code == 0
        refused += code == 2
        assert code in (0, 2), (name, out)
        # What this synth wrote, all of it under --out/<stack> as just checked, goes again, so the
        # sandbox the next pair reads stays small (reading every earlier output twice per pair
        # cost most of this test's time).
        for f in set(after) - set(before):
            (sandbox / f).unlink()
    # Both outcomes were exercised, many times.
    assert written > 20 and refused > 20, (written, refused)

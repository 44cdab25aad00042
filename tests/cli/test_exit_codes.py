"""One exit-code contract for every command: 0 ok, 1 the command's own finding, 2 invalid input
of any kind (one line per problem, never a traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ONPREM
from helpers import REPO

from infra import cli

pytestmark = pytest.mark.usefixtures("fast_synth")

JOB_FLAGS = ["--pool", "a100-train", "--nodes", "1", "--gpus-per-node", "8", "--tier", "standard"]


def commands(path: str) -> list[list[str]]:
    """synth, check and job of one stack reference."""
    return [["synth", path], ["check", path], ["job", path, *JOB_FLAGS]]


def assert_invalid(argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2, argv
    err = capsys.readouterr().err
    assert line in err.splitlines(), (argv, err)
    assert "Traceback" not in err


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout-like folder (Pulumi.yaml, stacks/) as the current folder."""
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    (tmp_path / "stacks").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_yaml_syntax_error_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("Pulumi.tab.yaml").write_text("config:\n\taws:region: us-east-1\n")
    for argv in commands("Pulumi.tab.yaml"):
        assert_invalid(
            argv,
            "error: Pulumi.tab.yaml:2: not valid YAML: while scanning for the next token,"
            " found character '\\t' that cannot start any token",
            capsys,
        )


def test_a_file_that_is_not_a_mapping_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("Pulumi.list.yaml").write_text("- a\n- b\n")
    for argv in commands("Pulumi.list.yaml"):
        assert_invalid(argv, "error: Pulumi.list.yaml: expected a mapping with a `config:` mapping", capsys)


def test_a_missing_file_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in commands("Pulumi.gone.yaml"):
        assert_invalid(argv, "error: Pulumi.gone.yaml: no such stack file (stacks here: none)", capsys)


def test_a_folder_given_as_a_stack_file_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("Pulumi.dir.yaml").mkdir()
    for argv in commands("Pulumi.dir.yaml"):
        assert_invalid(argv, "error: Pulumi.dir.yaml: a folder, not a stack file", capsys)


def test_an_unknown_stack_name_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "stacks" / "Pulumi.lab.yaml").write_text(ONPREM.read_text())
    for argv in commands("nosuchstack"):
        assert_invalid(argv, "error: stacks/Pulumi.nosuchstack.yaml: no such stack file (stacks here: lab)", capsys)


def test_check_goes_on_after_broken_files_and_reports_all(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path("Pulumi.a.yaml").write_text(ONPREM.read_text().replace("maxNodes: 4", "maxNodes: 5"))
    Path("Pulumi.tab.yaml").write_text("config:\n\taws:region: us-east-1\n")
    (project / "stacks" / "Pulumi.onprem.yaml").write_text(ONPREM.read_text())
    assert cli.main(["check", "Pulumi.a.yaml", "Pulumi.tab.yaml", "onprem"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("Pulumi.a.yaml: platform.nodePools[0].maxNodes: existing nodes do not scale")
    assert err[1].startswith("error: Pulumi.tab.yaml:2: not valid YAML")
    assert err[2].startswith("checked 1 stack(s), 2 invalid: 0 mandatory")


def test_check_with_nothing_to_check_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_invalid(
        ["check"], f"error: nothing to check: no stack files in {project / 'stacks'}; name stacks or stack files", capsys
    )


def test_a_bad_flag_value_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["job", "onprem", "--pool", "a100-train", "--nodes", "two", "--gpus-per-node", "8", "--tier", "standard"])
    assert exited.value.code == 2
    assert "argument --nodes: invalid int value: 'two'" in capsys.readouterr().err


def test_a_closed_pipe_ends_the_command_quietly() -> None:
    """`gpu-platform schema | head -3`: the reader goes away before the command writes."""
    script = Path(sys.executable).with_name("gpu-platform")
    proc = subprocess.Popen([str(script), "schema"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert (proc.wait(timeout=60), err) == (0, "")

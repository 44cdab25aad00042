"""Where a stack belongs: the checkout its file lies in (found from the file, not from the
current folder), the checkout around the current folder for a stack name, or none at all."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ONPREM
from helpers import REPO

from infra import cli, stackfile, yamlfile

pytestmark = pytest.mark.usefixtures("fast_synth")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout of another project name, holding the onprem stack."""
    root = tmp_path / "checkout"
    (root / "stacks").mkdir(parents=True)
    (root / "Pulumi.yaml").write_text("name: lab-platform\nruntime: python\n")
    shutil.copy(ONPREM, root / "stacks" / "Pulumi.onprem.yaml")
    return root


def test_the_package_s_project_name_is_the_checkout_s() -> None:
    assert stackfile.PROJECT_NAME == yamlfile.load(REPO / "Pulumi.yaml")["name"]


def test_a_stack_file_belongs_to_the_checkout_it_lies_in(
    checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert cli.main(["synth", str(checkout / "stacks" / "Pulumi.onprem.yaml")]) == 0
    written = json.loads((checkout / "build" / "synth" / "onprem" / "resources.json").read_text())
    assert written["project"] == "lab-platform"
    assert list(elsewhere.iterdir()) == []


def test_a_stack_name_belongs_to_the_checkout_around_the_current_folder(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (checkout / "docs").mkdir()
    monkeypatch.chdir(checkout / "docs")
    assert cli.main(["synth", "onprem"]) == 0
    assert (checkout / "build" / "synth" / "onprem" / "summary.md").is_file()


def test_a_stack_file_outside_any_checkout_uses_the_package_s_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(ONPREM, tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["synth", "Pulumi.onprem.yaml"]) == 0
    written = json.loads((tmp_path / "build" / "synth" / "onprem" / "resources.json").read_text())
    assert written["project"] == stackfile.PROJECT_NAME


def test_check_with_no_checkout_and_no_stacks_named_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check"]) == 2
    assert capsys.readouterr().err == (
        "error: nothing to check: no gpu-platform checkout (Pulumi.yaml) here or above; name stack files\n"
    )

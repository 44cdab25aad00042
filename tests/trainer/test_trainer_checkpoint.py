"""Which checkpoint folders count: only complete ones, named by step."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from trainer.checkpoint import Checkpointer, complete_checkpoints, resolve
from trainer.config import ConfigError

if TYPE_CHECKING:
    from conftest import Run


def _folder(root: Path, name: str, complete: bool) -> Path:
    path = root / name
    path.mkdir(parents=True)
    if complete:
        (path / ".metadata").write_bytes(b"")
    return path


def test_only_step_folders_with_metadata_count_as_complete(tmp_path: Path) -> None:
    _folder(tmp_path, "step_00000010", complete=True)
    _folder(tmp_path, "step_00000030", complete=True)
    _folder(tmp_path, "step_00000040", complete=False)
    _folder(tmp_path, ".tmp_step_00000050", complete=True)
    _folder(tmp_path, "notes", complete=True)
    assert [step for step, _ in complete_checkpoints(tmp_path)] == [10, 30]


def test_resolve_picks_the_newest_complete_checkpoint_or_a_given_step_folder(tmp_path: Path) -> None:
    _folder(tmp_path, "step_00000010", complete=True)
    newest = _folder(tmp_path, "step_00000020", complete=True)
    _folder(tmp_path, "step_00000030", complete=False)
    assert resolve(tmp_path) == newest
    assert resolve(tmp_path / "step_00000010") == tmp_path / "step_00000010"


def test_resolve_rejects_a_folder_without_complete_checkpoints(tmp_path: Path) -> None:
    _folder(tmp_path, "step_00000010", complete=False)
    with pytest.raises(ConfigError, match="no complete checkpoint"):
        resolve(tmp_path)


def test_old_checkpoints_beyond_the_keep_count_are_removed(tmp_path: Path) -> None:
    for step in (10, 20, 30):
        _folder(tmp_path, f"step_{step:08d}", complete=True)
    Checkpointer(tmp_path, keep=2, is_main=True).remove_old()
    assert [step for step, _ in complete_checkpoints(tmp_path)] == [20, 30]


def test_training_run_writes_checkpoints_named_by_step_and_leaves_no_temporaries(reference_one: Run) -> None:
    checkpoint_dir = reference_one.checkpoint_dir
    assert sorted(p.name for p in checkpoint_dir.iterdir()) == [f"step_{s:08d}" for s in (10, 20, 30, 40)]
    for folder in checkpoint_dir.iterdir():
        assert (folder / ".metadata").is_file()
        assert (folder / "trainer.json").is_file()

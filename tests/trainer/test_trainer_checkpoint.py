"""Which checkpoint folders count: only committed ones (marker and .metadata), named by step."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from trainer.checkpoint import TrainerState, complete_checkpoints, remove_incomplete, remove_old, resolve
from trainer.optim import Schedule
from trainer.config import ConfigError
from trainer.storage import Store

if TYPE_CHECKING:
    from conftest import Harness, RunFiles


def _folder(root: Path, name: str, metadata: bool, marker: bool) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "__0_0.distcp").write_bytes(b"shard")
    if metadata:
        (path / ".metadata").write_bytes(b"")
    if marker:
        (path / ".complete").write_bytes(b"")
    return path


def test_only_step_folders_with_marker_and_metadata_count_as_complete(tmp_path: Path) -> None:
    _folder(tmp_path, "step_00000010", metadata=True, marker=True)
    _folder(tmp_path, "step_00000030", metadata=True, marker=True)
    _folder(tmp_path, "step_00000040", metadata=True, marker=False)
    _folder(tmp_path, "step_00000050", metadata=False, marker=False)
    _folder(tmp_path, "notes", metadata=True, marker=True)
    assert [step for step, _ in complete_checkpoints(Store(str(tmp_path)))] == [10, 30]


def test_start_up_cleanup_removes_uncommitted_step_folders_and_legacy_temporaries(tmp_path: Path) -> None:
    _folder(tmp_path, "step_00000010", metadata=True, marker=True)
    _folder(tmp_path, "step_00000020", metadata=True, marker=False)
    _folder(tmp_path, "step_00000030", metadata=False, marker=False)
    _folder(tmp_path, ".tmp_step_00000040", metadata=True, marker=False)
    _folder(tmp_path, "notes", metadata=False, marker=False)
    removed = remove_incomplete(Store(str(tmp_path)))
    assert removed == [".tmp_step_00000040", "step_00000020", "step_00000030"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes", "step_00000010"]


def test_start_up_keeps_an_earlier_trainer_s_checkpoints_and_marks_a_save_missing_only_its_marker(
    tmp_path: Path,
) -> None:
    legacy = _folder(tmp_path, "step_00000010", metadata=True, marker=False)
    (legacy / "trainer.json").write_text('{"step": 10, "consumed_samples": 80, "model": {}, "seq_len": 8, "data": "d"}')
    finished = _folder(tmp_path, "step_00000020", metadata=True, marker=False)
    state = TrainerState(20, 160, "tiny", {}, 8, "d", {}, Schedule(1e-3, 2, 40, 0.1), None)
    (finished / "trainer.json").write_text(state.to_json())
    torn = _folder(tmp_path, "step_00000030", metadata=True, marker=False)
    (torn / "trainer.json").write_text('{"step": 3')
    assert remove_incomplete(Store(str(tmp_path))) == ["step_00000030"]
    assert [step for step, _ in complete_checkpoints(Store(str(tmp_path)))] == [20]
    assert (legacy / "trainer.json").exists() and not (legacy / ".complete").exists()


def test_resolve_picks_the_newest_complete_checkpoint_or_a_given_step_folder(tmp_path: Path) -> None:
    _folder(tmp_path, "step_00000010", metadata=True, marker=True)
    newest = _folder(tmp_path, "step_00000020", metadata=True, marker=True)
    _folder(tmp_path, "step_00000030", metadata=True, marker=False)
    assert resolve(Store(str(tmp_path))) == str(newest)
    assert resolve(Store(str(tmp_path / "step_00000010"))) == str(tmp_path / "step_00000010")


def test_resolve_rejects_a_folder_without_complete_checkpoints(tmp_path: Path) -> None:
    _folder(tmp_path, "step_00000010", metadata=True, marker=False)
    with pytest.raises(ConfigError, match="no complete checkpoint"):
        resolve(Store(str(tmp_path)))


def test_old_checkpoints_beyond_the_keep_count_are_removed(tmp_path: Path) -> None:
    for step in (10, 20, 30):
        _folder(tmp_path, f"step_{step:08d}", metadata=True, marker=True)
    remove_old(Store(str(tmp_path)), keep=2)
    assert [step for step, _ in complete_checkpoints(Store(str(tmp_path)))] == [20, 30]


def test_an_object_store_url_without_its_fsspec_package_is_refused_naming_the_extra() -> None:
    with pytest.raises(ConfigError, match=r"--checkpoint-dir s3://bucket/run: .*gpu-platform-trainer\[s3\]"):
        Store("s3://bucket/run")


def test_the_test_file_system_refuses_renames_where_the_trainer_writes(harness: Harness) -> None:
    """Guards the no-rename tests: the hook must be active in every process the harness starts."""
    folder = harness.root / "rename-probe"
    folder.mkdir()
    script = "import os, sys; os.rename(sys.argv[1], sys.argv[1] + '.moved')"
    result = subprocess.run([sys.executable, "-c", script, str(folder)], env=harness.env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "rename refused" in result.stderr
    assert folder.is_dir()
    assert os.environ.get("TRAINER_TEST_REFUSE_RENAMES_UNDER") is None, "the hook is for child processes only"


def test_training_run_writes_committed_checkpoints_named_by_step(reference_one: RunFiles) -> None:
    checkpoint_dir = reference_one.checkpoint_dir
    assert sorted(p.name for p in checkpoint_dir.iterdir()) == [f"step_{s:08d}" for s in (10, 20, 30, 40)]
    for folder in checkpoint_dir.iterdir():
        assert {".metadata", "trainer.json", ".complete"} <= {p.name for p in folder.iterdir()}
        assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_checkpoints_go_straight_to_a_url_through_fsspec_and_resume_from_it(harness: Harness) -> None:
    url = f"file://{harness.root / 'url-run' / 'checkpoints'}"
    first = harness.run("url-run", checkpoint_dir=url, max_steps=20)
    assert sorted(p.name for p in first.checkpoint_dir.iterdir()) == ["step_00000010", "step_00000020"]
    resumed = harness.run("url-run", checkpoint_dir=url, max_steps=30)
    assert f"resumed from {url}/step_00000020 at step 20" in resumed.output()
    assert (resumed.checkpoint_dir / "step_00000030" / ".complete").is_file()

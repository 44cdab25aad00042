"""The review's synthesis cache: a key changes with every input the program reads, a stack the
same in both trees is synthesized once, a warm cache synthesizes nothing, and errors (which name
each tree's own path) are never shared."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import TINY_STACK, tiny_checkout

from infra.tools import synth_cache
from infra.tools.review import trees

STACK = TINY_STACK


def key_of(root: Path, stack: str = STACK) -> str:
    return synth_cache.key(synth_cache.tree_digest(root), root, stack, "recipe", "env")


@pytest.mark.parametrize("rel", ["components/spec.py", "infra/program.py", "training_images/Dockerfile", "Pulumi.yaml", STACK])
def test_a_changed_input_is_a_different_key(tmp_path: Path, rel: str) -> None:
    root = tiny_checkout(tmp_path)
    before = key_of(root)
    (root / rel).write_text((root / rel).read_text() + "# changed\n")
    assert key_of(root) != before


def test_bytecode_and_build_output_do_not_change_the_key(tmp_path: Path) -> None:
    root = tiny_checkout(tmp_path)
    before = key_of(root)
    (root / "components" / "__pycache__").mkdir()
    (root / "components" / "__pycache__" / "spec.cpython-311.pyc").write_bytes(b"\0")
    (root / "build").mkdir()
    (root / "build" / "out.json").write_text("{}")
    assert key_of(root) == before


def test_the_same_files_in_another_folder_are_the_same_key(tmp_path: Path) -> None:
    assert key_of(tiny_checkout(tmp_path / "one")) == key_of(tiny_checkout(tmp_path / "two"))


class FakeSnapshots:
    """Stands in for the snapshot processes: records what each would synthesize."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.jobs: list[tuple[str, list[str]]] = []

    def __call__(self, jobs: list[tuple[str, Path, list[str]]]) -> list[dict[str, Any]]:
        self.jobs += [(label, rels) for label, _, rels in jobs]
        return [{"a": self.value(tree)} for _, tree, _ in jobs]


def two_trees(tmp_path: Path) -> dict[str, Path]:
    base = tiny_checkout(tmp_path / "base")
    working = tmp_path / "working"
    shutil.copytree(base, working)
    return {"base": base, "working": working}


def test_a_stack_the_same_in_both_trees_is_synthesized_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSnapshots(lambda tree: {"resources": []})
    monkeypatch.setattr(trees, "_run_snapshots", fake)
    results = trees.snapshots(two_trees(tmp_path), [STACK], tmp_path / "cache")
    assert fake.jobs == [("base", [STACK])]
    assert results == {"base": {"a": {"resources": []}}, "working": {"a": {"resources": []}}}


def test_a_warm_cache_synthesizes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSnapshots(lambda tree: {"resources": []})
    monkeypatch.setattr(trees, "_run_snapshots", fake)
    folders = two_trees(tmp_path)
    cold = trees.snapshots(folders, [STACK], tmp_path / "cache")
    fake.jobs.clear()
    assert trees.snapshots(folders, [STACK], tmp_path / "cache") == cold
    assert fake.jobs == []


def test_an_error_is_not_shared_between_trees_nor_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSnapshots(lambda tree: {"error": f"{tree.name}: invalid"})
    monkeypatch.setattr(trees, "_run_snapshots", fake)
    results = trees.snapshots(two_trees(tmp_path), [STACK], tmp_path / "cache")
    assert results == {"base": {"a": {"error": "base: invalid"}}, "working": {"a": {"error": "working: invalid"}}}
    assert not (tmp_path / "cache").exists()


REPO = Path(__file__).resolve().parents[2]
REAL = "stacks/Pulumi.dev-aws.yaml"


def trees_with_a_real_stack(tmp_path: Path) -> dict[str, Path]:
    folders = two_trees(tmp_path)
    for tree in folders.values():
        shutil.copy(REPO / REAL, tree / REAL)
    return folders


def test_a_stack_with_the_same_key_in_both_trees_is_unchanged(tmp_path: Path) -> None:
    folders = trees_with_a_real_stack(tmp_path)
    assert trees.unchanged(folders["base"], folders["working"], [REAL]) == [REAL]


def test_a_stack_file_changed_in_one_tree_is_not_unchanged(tmp_path: Path) -> None:
    folders = trees_with_a_real_stack(tmp_path)
    (folders["working"] / REAL).write_text((folders["working"] / REAL).read_text() + "# edited\n")
    assert trees.unchanged(folders["base"], folders["working"], [REAL]) == []


def test_code_changed_in_one_tree_leaves_no_stack_unchanged(tmp_path: Path) -> None:
    folders = trees_with_a_real_stack(tmp_path)
    (folders["working"] / "components" / "spec.py").write_text("LIMIT = 2\n")
    assert trees.unchanged(folders["base"], folders["working"], [REAL]) == []


def test_a_stack_invalid_in_both_trees_is_left_to_synthesize(tmp_path: Path) -> None:
    folders = two_trees(tmp_path)
    assert trees.unchanged(folders["base"], folders["working"], [STACK]) == []


FLEET = "stacks/Pulumi.fleet.yaml"


def fleet_tree(root: Path) -> Path:
    """The tiny tree with the checkout's fleet manager, whose workers are prod-aws and prod-gcp."""
    shutil.copy(REPO / FLEET, tiny_checkout(root) / FLEET)
    return root


def test_a_fleet_managers_key_follows_its_workers_stack_files(tmp_path: Path) -> None:
    root = fleet_tree(tmp_path)
    worker = root / "stacks" / "Pulumi.prod-gcp.yaml"
    worker.write_text("config: {}\n")
    before = key_of(root, FLEET)
    worker.write_text("config: {edited: true}\n")
    assert key_of(root, FLEET) != before


def test_a_fleet_managers_key_counts_a_missing_worker_file(tmp_path: Path) -> None:
    root = fleet_tree(tmp_path)
    before = key_of(root, FLEET)
    (root / "stacks" / "Pulumi.prod-aws.yaml").write_text("config: {}\n")
    assert key_of(root, FLEET) != before


def test_a_fleet_managers_key_ignores_stack_files_that_are_not_its_workers(tmp_path: Path) -> None:
    root = fleet_tree(tmp_path)
    before = key_of(root, FLEET)
    (root / STACK).write_text("config: {edited: true}\n")
    assert key_of(root, FLEET) == before


def test_a_fleet_manager_whose_workers_do_not_read_is_keyed_on_every_stack_file(tmp_path: Path) -> None:
    root = tiny_checkout(tmp_path)
    (root / FLEET).write_text("config:\n  gpu-platform:platform: {cloud: fleet, fleet: {workers: 3}}\n")
    before = key_of(root, FLEET)
    (root / STACK).write_text("config: {edited: true}\n")
    assert key_of(root, FLEET) != before


def test_a_cluster_stacks_key_ignores_the_other_stack_files(tmp_path: Path) -> None:
    root = tiny_checkout(tmp_path)
    shutil.copy(REPO / REAL, root / REAL)
    before = key_of(root, REAL)
    (root / STACK).write_text("config: {edited: true}\n")
    assert key_of(root, REAL) == before

"""`gpu-platform review --base REF` end to end, on a scratch git repository holding a copy of this
one: a scripted change to a stack file is reported as exactly that change, identical trees as
no change, and the base worktree never outlives the review."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import REPO

from components.checks import declared
from infra import cli
from infra.tools.review import diff, trees

GIT = ["git", "-c", "user.name=review-test", "-c", "user.email=review-test@example.invalid"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def copy_of_this_repository(dest: Path) -> Path:
    """The files of this repository as they are now (committed or not), as one commit."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    for name in listed:
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "base")
    return dest


def edit_stack(repo: Path, stack: str, edit) -> None:
    path = repo / "stacks" / f"Pulumi.{stack}.yaml"
    document = yaml.safe_load(path.read_text())
    edit(document["config"]["gpu-platform:platform"])
    path.write_text(yaml.safe_dump(document, sort_keys=False))


def scripted_change(platform: dict) -> None:
    """dev-aws: resize l4-shared, move l4-train to a bigger instance type, add an L40S pool."""
    pools = {p["name"]: p for p in platform["nodePools"]}
    pools["l4-shared"]["maxNodes"] = 6
    pools["l4-train"]["instanceType"] = "g6.48xlarge"
    platform["nodePools"].append({"name": "l40s", "instanceType": "g6e.xlarge", "minNodes": 0, "maxNodes": 2, "capacity": "spot"})


TRAINER_IMAGE = "docker-build:index:Image"


@pytest.fixture(scope="module")
def changed_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This repository with dev-aws-karpenter building the trainer image in its base commit (no
    checked-in stack does), and the scripted change to dev-aws left uncommitted."""
    repo = copy_of_this_repository(tmp_path_factory.mktemp("changed"))
    edit_stack(repo, "dev-aws-karpenter", lambda platform: platform.update(trainer={"image": "build"}))
    git(repo, "commit", "-qam", "build the trainer")
    edit_stack(repo, "dev-aws", scripted_change)
    return repo


@pytest.fixture(scope="module")
def changed_reviews(changed_repo: Path) -> dict[str, diff.StackReview]:
    root = changed_repo
    sha = trees.resolve_commit(root, "HEAD")
    with trees.base_worktree(root, sha) as base:
        rels = trees.stack_paths([], root, [base, root])
        snaps = trees.snapshots({"base": base, "working": root}, rels)
    stacks = sorted(set(snaps["base"]) | set(snaps["working"]))
    return {s: diff.review_stack(s, snaps["base"].get(s), snaps["working"].get(s)) for s in stacks}


@pytest.fixture(scope="module")
def changed_report(changed_repo: Path) -> str:
    return trees.run("HEAD", [], cwd=changed_repo)


def test_only_the_edited_stack_changes(changed_reviews: dict[str, diff.StackReview]) -> None:
    assert {s: r.status for s, r in changed_reviews.items()} == {
        "dev-aws": "changed",
        "dev-aws-karpenter": "unchanged",
        "dev-gcp": "unchanged",
        "onprem": "unchanged",
        "prod-aws": "unchanged",
        "prod-gcp": "unchanged",
        "fleet": "unchanged",
    }


def test_the_stack_file_diff_is_exactly_the_scripted_change(changed_reviews: dict[str, diff.StackReview]) -> None:
    assert [c.path for c in changed_reviews["dev-aws"].settings] == [
        "gpu-platform:platform.nodePools[name=l4-shared].maxNodes",
        "gpu-platform:platform.nodePools[name=l4-train].instanceType",
        "gpu-platform:platform.nodePools[name=l40s]",
    ]


def test_pools_are_resized_retyped_and_added(changed_reviews: dict[str, diff.StackReview]) -> None:
    pools = {p.name: (p.status, [c.path for c in p.changes]) for p in changed_reviews["dev-aws"].pools}
    assert pools == {
        "l4-shared": ("changed", ["maxNodes"]),
        "l4-train": ("changed", ["gpusPerNode", "instanceType"]),
        "l40s": ("added", []),
    }


def test_only_the_instance_type_change_is_a_replacement(changed_reviews: dict[str, diff.StackReview]) -> None:
    result = changed_reviews["dev-aws"]
    assert {p.name for p in result.pools if p.replacing} == {"l4-train"}
    # Once the wings declare node groups / node pools, the replaced resources are l4-train's.
    assert all("l4-train" in c.key for c in result.changed if c.replacing)
    pool_resources = [c for c in result.changed if c.key.split("::")[0] in (declared.EKS_NODE_GROUP, declared.GKE_NODE_POOL)]
    assert all(bool(c.replacing) == ("l4-train" in c.key) for c in pool_resources)


def test_new_resources_belong_to_the_new_pool_and_none_are_removed(changed_reviews: dict[str, diff.StackReview]) -> None:
    result = changed_reviews["dev-aws"]
    assert result.removed == []
    assert all("l40s" in key for key in result.added)


def test_the_report_shows_capacity_and_the_replacement_warning(changed_report: str) -> None:
    assert "| `dev-aws` | changed |" in changed_report
    # l4-shared 4 -> 6 GPUs, l4-train 8 -> 16, l40s 0 -> 2
    assert "12 → 24 (+12)" in changed_report
    assert "> - pool `l4-train`: `gpusPerNode` 4 → 8, `instanceType` g6.12xlarge → g6.48xlarge replaces" in changed_report
    assert "- `prod-gcp`: no changes" in changed_report


def test_the_report_is_stable_for_identical_inputs(changed_repo: Path, changed_report: str) -> None:
    assert trees.run("HEAD", [], cwd=changed_repo) == changed_report


def test_the_base_worktree_is_removed_afterwards(changed_repo: Path, changed_report: str) -> None:
    assert len(git(changed_repo, "worktree", "list").splitlines()) == 1


def test_identical_trees_give_a_no_changes_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = copy_of_this_repository(tmp_path / "same")
    monkeypatch.chdir(repo)
    out_file = tmp_path / "review.md"
    assert cli.main(["review", "--base", "HEAD", "--out", str(out_file)]) == 0
    printed = capsys.readouterr().out
    assert printed == out_file.read_text()
    assert "**No changes**: all 7 stack(s) synthesize identically." in printed
    assert printed.count(": no changes") == 7


def test_added_and_removed_stack_files_are_reported_as_such(tmp_path: Path) -> None:
    repo = copy_of_this_repository(tmp_path / "stacks")
    stacks = repo / "stacks"
    shutil.copy(stacks / "Pulumi.dev-aws.yaml", stacks / "Pulumi.staging-aws.yaml")
    (stacks / "Pulumi.onprem.yaml").unlink()
    report = trees.run("HEAD", ["staging-aws", "onprem"], cwd=repo)
    assert "| `staging-aws` | added |" in report
    assert "| `onprem` | removed |" in report
    assert "`dev-aws`" not in report


def test_an_unknown_base_ref_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = copy_of_this_repository(tmp_path / "ref")
    monkeypatch.chdir(repo)
    assert cli.main(["review", "--base", "no-such-branch"]) == 2
    assert "--base no-such-branch: not a commit of this repository" in capsys.readouterr().err


def test_an_unknown_stack_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(copy_of_this_repository(tmp_path / "unknown"))
    assert cli.main(["review", "--base", "HEAD", "nosuchstack"]) == 2
    assert capsys.readouterr().err == (
        "error: nosuchstack: no stack file stacks/Pulumi.nosuchstack.yaml in the working tree or at the base\n"
    )


def test_a_folder_outside_git_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    assert cli.main(["review", "--base", "HEAD"]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path}: not in a git repository; review compares git commits\n"


def break_stack(platform: dict) -> None:
    platform["nodePools"][0]["maxNodes"] = -1


@pytest.mark.parametrize("broken_side", ["base", "working tree"])
def test_a_stack_invalid_at_either_side_is_reported_invalid_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], broken_side: str
) -> None:
    repo = copy_of_this_repository(tmp_path / "invalid")
    stack_file = repo / "stacks" / "Pulumi.dev-aws.yaml"
    good = stack_file.read_text()
    edit_stack(repo, "dev-aws", break_stack)
    if broken_side == "base":
        git(repo, "commit", "-qam", "break dev-aws")
        stack_file.write_text(good)
    monkeypatch.chdir(repo)
    assert cli.main(["review", "--base", "HEAD", "dev-aws"]) == 1
    out, err = capsys.readouterr()
    assert f"| `dev-aws` | invalid ({broken_side}) | - | - | - | - | - |" in out.splitlines()
    where = "at the base" if broken_side == "base" else "in the working tree"
    assert f"The stack file {where} is invalid; nothing was synthesized or compared:" in out
    assert "stacks/Pulumi.dev-aws.yaml: platform.nodePools[0].maxNodes: " in out
    assert "pass" not in out and "resources" not in out.split("### `dev-aws`")[0].split("|---|")[-1]
    assert err == f"error: dev-aws: invalid ({broken_side}); the report shows its errors\n"


def test_a_trainer_build_context_is_no_change_between_checkouts(changed_reviews: dict[str, diff.StackReview]) -> None:
    """The base is synthesized in another folder (its worktree), and without the synthesis
    cache: the build context is recorded relative to each checkout, so a stack that builds the
    trainer and did not change shows no change. (Through `review`, a stack whose files did not
    change is not synthesized at all, so only this comparison can show it.)"""
    review = changed_reviews["dev-aws-karpenter"]
    assert review.base is not None and review.head is not None
    images = [[r for r in side["resources"] if r["type"] == TRAINER_IMAGE] for side in (review.base, review.head)]
    assert len(images[0]) == 1 and images[0] == images[1]
    assert review.status == "unchanged"

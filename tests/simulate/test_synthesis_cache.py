"""`simulate` keeps a stack's synthesis under build/synth-cache (infra.tools.synth_cache.synthesis):
an unchanged stack is synthesized once, a changed stack file or a failure is never read from the
cache, and a run from the kept synthesis writes the same files as one from a fresh synthesis."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO, TINY_STACK, tiny_checkout

from components.spec import Problem, SpecError
from infra import cli, offline, stackfile, synth
from infra.tools import synth_cache

STACK = TINY_STACK
EXAMPLE = REPO / "examples" / "traces" / "prod-aws-week.csv"


class CountingSynthesis:
    """Stands in for infra.offline.synthesize: counts its runs, fails where told to."""

    def __init__(self, fail: bool = False) -> None:
        self.runs = 0
        self.fail = fail

    def __call__(self, ref: str, root: Path | None = None) -> tuple[stackfile.StackFile, object, synth.Synthesis]:
        self.runs += 1
        if self.fail:
            raise SpecError(ref, [Problem("platform.cloud", "expected aws or gcp")])
        stack_file = stackfile.read(ref, root)
        resources = [{"type": "test:index:Thing", "name": "t", "inputs": {"run": self.runs, "file": stack_file.path.read_text()}}]
        return stack_file, None, synth.Synthesis("gpu-platform", stack_file.stack, resources, {"kubeconfig": "k"})


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> CountingSynthesis:
    counting = CountingSynthesis()
    monkeypatch.setattr(offline, "synthesize", counting)
    return counting


def test_an_unchanged_stack_is_synthesized_once_and_read_back_the_same(tmp_path: Path, fake: CountingSynthesis) -> None:
    root = tiny_checkout(tmp_path)
    _, first = synth_cache.synthesis(str(root / STACK))
    stack_file, second = synth_cache.synthesis(str(root / STACK))
    assert fake.runs == 1
    assert (second.project, second.stack, second.resources, second.outputs) == (
        first.project, first.stack, first.resources, first.outputs
    )
    assert stack_file.stack == "a" and any((root / synth_cache.FOLDER).iterdir())


@pytest.mark.parametrize("rel", [STACK, "components/spec.py"])
def test_a_changed_stack_file_or_program_is_synthesized_again(tmp_path: Path, fake: CountingSynthesis, rel: str) -> None:
    root = tiny_checkout(tmp_path)
    synth_cache.synthesis(str(root / STACK))
    (root / rel).write_text((root / rel).read_text() + "# changed\n")
    _, again = synth_cache.synthesis(str(root / STACK))
    assert fake.runs == 2 and again.resources[0]["inputs"]["run"] == 2


def test_a_failed_synthesis_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tiny_checkout(tmp_path)
    failing = CountingSynthesis(fail=True)
    monkeypatch.setattr(offline, "synthesize", failing)
    for _ in range(2):
        with pytest.raises(SpecError):
            synth_cache.synthesis(str(root / STACK))
    assert failing.runs == 2 and not (root / synth_cache.FOLDER).exists()


def test_a_stack_file_outside_any_checkout_is_synthesized_every_time(tmp_path: Path, fake: CountingSynthesis) -> None:
    (tmp_path / "Pulumi.a.yaml").write_text("config: {}\n")
    for _ in range(2):
        synth_cache.synthesis(str(tmp_path / "Pulumi.a.yaml"))
    assert fake.runs == 2 and not (tmp_path / synth_cache.FOLDER).exists()


def test_a_simulation_from_the_kept_synthesis_writes_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An absolute folder: root / FOLDER is this test's own cache, not the checkout's.
    monkeypatch.setattr(synth_cache, "FOLDER", tmp_path / "cache")
    argv = ["simulate", "prod-aws", "--trace", str(EXAMPLE), "--seed", "3"]
    assert cli.main([*argv, "--out", str(tmp_path / "fresh")]) == 0
    assert len(list((tmp_path / "cache").iterdir())) == 1

    def refused(*_: object) -> None:
        raise AssertionError("synthesized again")

    monkeypatch.setattr(offline, "synthesize", refused)
    assert cli.main([*argv, "--out", str(tmp_path / "kept")]) == 0
    capsys.readouterr()
    fresh, kept = tmp_path / "fresh" / "prod-aws", tmp_path / "kept" / "prod-aws"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == sorted(p.name for p in kept.iterdir()) and "pool-h100-train.png" in names
    for name in names:
        assert (kept / name).read_bytes() == (fresh / name).read_bytes(), name

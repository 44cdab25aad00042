"""The README and guides say what the code does: their commands run, their interfaces exist."""

from __future__ import annotations

import re
import shlex

import pytest
import yaml
from helpers import REPO

from infra import cli, stackfile

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def job_commands() -> list[tuple[str, list[str]]]:
    """Every `gpu-platform job ...` line in the docs, continuation lines joined, pipe dropped."""
    found = []
    for doc in DOCS:
        text = doc.read_text().replace("\\\n", " ")
        for line in text.splitlines():
            match = re.search(r"gpu-platform job .*", line)
            if match and "STACK" not in match.group(0):
                command = re.sub(r'"\$REGISTRY(?:/trainer)?:([^"]+)"', r"registry.example.com/trainer:\1", match.group(0).split("|")[0])
                found.append((doc.name, shlex.split(command)[1:]))
    return found


COMMANDS = job_commands()


def test_the_docs_show_job_commands_for_both_clouds() -> None:
    stacks = {argv[1] for _, argv in COMMANDS}
    assert {"dev-aws", "dev-gcp"} <= stacks


@pytest.mark.parametrize(("doc", "argv"), COMMANDS, ids=[f"{d}:{a[1]}" for d, a in COMMANDS])
def test_every_documented_job_command_renders(doc: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert yaml.safe_load(capsys.readouterr().out)["kind"] == "JobSet"


def _efa_pools(stack: str) -> set[str]:
    return {pool.name for pool in stackfile.read(stack, REPO).spec().node_pools if pool.efa}


def test_jobs_on_efa_pools_use_an_image_built_with_the_efa_stage() -> None:
    """The Dockerfile's default stage has no libfabric or aws-ofi-nccl: NCCL would not use EFA."""
    checked = 0
    for doc in DOCS:
        text = doc.read_text().replace("\\\n", " ")
        builds = {
            image: "--target trainer-efa" in line
            for line in text.splitlines()
            if "docker build" in line
            for image in re.findall(r'-t ("?[^ ]+"?)', line)
        }
        for line in text.splitlines():
            job = re.search(r"gpu-platform job (\S+) .*--pool (\S+).*--image (\S+)", line)
            if job and job.group(1) != "STACK" and job.group(2) in _efa_pools(job.group(1)):
                assert builds.get(job.group(3)) is True, f"{doc.name}: {job.group(3)} is not built with --target trainer-efa"
                checked += 1
    assert checked, "no documented job runs on an EFA pool"


def test_the_readme_s_two_commands_are_make_targets() -> None:
    readme = (REPO / "README.md").read_text()
    makefile = (REPO / "Makefile").read_text()
    for target in ("synth", "test"):
        assert f"make {target} " in readme
        assert re.search(rf"^{target}:", makefile, re.M)


def test_ci_runs_exactly_the_readme_s_test_command() -> None:
    script = (REPO / ".ci" / "run").read_text()
    commands = [line for line in script.splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    assert commands == ["make test"]


@pytest.mark.parametrize("link", sorted(set(re.findall(r"\]\((docs/[^)]+)\)", (REPO / "README.md").read_text()))))
def test_readme_links_point_at_files(link: str) -> None:
    assert (REPO / link).is_file()

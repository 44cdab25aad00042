"""The package as users install it: a wheel built from this checkout, in a fresh virtualenv,
runs synth, check and job on a copied stack file in an empty folder, with no checkout around."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml
from helpers import REPO

# The README's job, trainer arguments included.
JOB = [
    *("--pool", "l4-train", "--nodes", "2", "--gpus-per-node", "4", "--team", "research", "--tier", "standard"),
    *("--image", "registry.example/trainer:v1", "--", "--preset", "small", "--max-steps", "500"),
    *("--checkpoint-every", "100", "--global-batch-size", "32", "--seq-len", "512", "--seed", "1"),
    *("--data", "/data/datasets/corpus"),
]


def tracked_files(dest: Path) -> Path:
    """This checkout's files as they are now (committed or not), without build output."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    for name in listed:
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `gpu-platform` script of a fresh virtualenv holding only the wheel; its dependencies
    are this virtualenv's, seen through a path file (not its editable install of the checkout)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tracked_files(tmp / "source")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"), str(source)], check=True)
    (wheel,) = (tmp / "dist").glob("gpu_platform-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "--no-deps", str(wheel)], check=True)
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True, text=True
    ).stdout.strip()
    Path(site, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin" / "gpu-platform"


@pytest.fixture
def empty_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "empty"
    folder.mkdir()
    shutil.copy(REPO / "stacks" / "Pulumi.dev-aws.yaml", folder)
    shutil.copy(REPO / "stacks" / "Pulumi.onprem.yaml", folder)
    return folder


def run(script: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def test_the_wheel_s_code_is_what_runs(installed: Path, empty_folder: Path) -> None:
    python = installed.with_name("python")
    done = subprocess.run(
        [str(python), "-c", "import components, infra; print(infra.__file__); print(components.__file__)"],
        cwd=empty_folder, capture_output=True, text=True, check=True,
    )
    assert all(Path(line).is_relative_to(installed.parents[1]) for line in done.stdout.splitlines())


def test_synth_a_copied_stack_file_in_an_empty_folder(installed: Path, empty_folder: Path) -> None:
    done = run(installed, empty_folder, "synth", "./Pulumi.onprem.yaml")
    assert (done.returncode, done.stderr) == (0, "")
    out = empty_folder / "build" / "synth" / "onprem"
    assert {p.name for p in out.iterdir()} == {"manifests", "outputs.json", "resources.json", "summary.md"}


def test_check_a_copied_stack_file_in_an_empty_folder(installed: Path, empty_folder: Path) -> None:
    done = run(installed, empty_folder, "check", "Pulumi.onprem.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("checked 1 stack(s): 0 mandatory")


def test_job_from_a_copied_stack_file_in_an_empty_folder(installed: Path, empty_folder: Path) -> None:
    done = run(installed, empty_folder, "job", "Pulumi.dev-aws.yaml", *JOB)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["kind"] == "JobSet"


def test_building_the_image_without_a_checkout_is_a_clear_error(installed: Path, empty_folder: Path) -> None:
    stack_file = empty_folder / "Pulumi.dev-aws.yaml"
    document = yaml.safe_load(stack_file.read_text())
    document["config"]["gpu-platform:platform"]["trainer"] = {"image": "build"}
    stack_file.write_text(yaml.safe_dump(document))
    done = run(installed, empty_folder, "synth", "Pulumi.dev-aws.yaml")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "error: Pulumi.dev-aws.yaml: platform.trainer.image: `build` builds training_images/ of a gpu-platform checkout,"
        " and there is none here: run from a checkout, or set trainer.image to a pushed image\n"
    )


def test_a_stack_name_without_a_checkout_asks_for_the_path(installed: Path, empty_folder: Path) -> None:
    done = run(installed, empty_folder, "synth", "dev-aws")
    assert done.returncode == 2
    assert done.stderr == (
        "error: dev-aws: a stack name needs a gpu-platform checkout (Pulumi.yaml) here or above;"
        " outside one, give the stack file's path (e.g. ./Pulumi.dev-aws.yaml)\n"
    )

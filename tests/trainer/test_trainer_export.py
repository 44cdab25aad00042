"""Export: prune + int8 quantize a checkpoint, smaller file, loss change reported."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from trainer.data import TokenFile
from trainer.export import eval_loss, load_exported

if TYPE_CHECKING:
    from conftest import RunFiles


@pytest.fixture(scope="module")
def exported(reference_one: RunFiles, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    output = tmp_path_factory.mktemp("export") / "model.pt"
    result = subprocess.run(
        [sys.executable, "-m", "trainer", "export", "--checkpoint-dir", str(reference_one.checkpoint_dir),
         "--output", str(output), "--prune", "0.5", "--quantize", "int8"],
        capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), output


def test_export_shrinks_the_model_and_reports_the_loss_change(exported: tuple[dict[str, Any], Path]) -> None:
    report, output = exported
    assert report["step"] == 40
    assert report["size_bytes_after"] == output.stat().st_size
    assert report["size_bytes_after"] < 0.6 * report["size_bytes_before"]
    assert report["sparsity"] == pytest.approx(0.5, abs=0.01)
    before, after = report["eval_loss_before"], report["eval_loss_after"]
    assert math.isfinite(before) and math.isfinite(after)
    assert report["eval_loss_change"] == pytest.approx(after - before)
    assert abs(report["eval_loss_change"]) < 1.0, "half sparsity plus int8 should not wreck a trained model"


def test_exported_file_loads_and_reproduces_the_reported_loss(
    exported: tuple[dict[str, Any], Path], data_dir: Path
) -> None:
    report, output = exported
    model, seq_len = load_exported(output)
    loss = eval_loss(model, TokenFile(data_dir, "val", seq_len), samples=int(report["eval_samples"]))
    assert loss == pytest.approx(report["eval_loss_after"], rel=1e-6)


def test_export_prefers_torchao_when_installed(exported: tuple[dict[str, Any], Path]) -> None:
    report, _ = exported
    if importlib.util.find_spec("torchao") is None:
        assert report["quantizer"] == "torch.ao.quantization"
        pytest.skip("torchao is not installed (pip install 'gpu-platform-trainer[torchao]'): fallback checked")
    assert report["quantizer"] == "torchao"

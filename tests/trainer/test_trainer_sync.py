"""Between sync steps the loop never waits for the device: no collective of its own on the
training process group, no tensor value read back to the host (`.tolist()`, `float(tensor)`).

On a GPU each of those stops the host from queueing the next step until the device catches up.
CPU has no such queue, so this test records the calls themselves; benchmarks/trainer_gpu.py
checks the same on a GPU with torch.cuda.set_sync_debug_mode("error")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Harness

PROBE = Path(__file__).resolve().parent / "sync_probe.py"


def test_only_log_eval_and_checkpoint_steps_sync_with_the_host(harness: Harness, tmp_path: Path) -> None:
    args = harness.train_args(tmp_path / "checkpoints", tmp_path / "metrics.jsonl", max_steps=12, log_every=5,
                              eval_every=0, checkpoint_every=100)
    result = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True,
                            env=harness.env, timeout=240)
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["code"] == 0
    by_step = {int(step): calls for step, calls in report["events"].items() if 1 <= int(step) <= 12}
    assert sorted(by_step) == [5, 10, 12], f"host syncs outside the log steps: {by_step}"
    assert by_step[5] == ["all_reduce", "tolist"], "one all-reduce and one read per log step"

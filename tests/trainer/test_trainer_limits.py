"""Start-up limits: the soft open-file limit is raised to the hard one, and a hard limit below what
the world size needs is refused with the figure, before any process group."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from trainer import limits

if TYPE_CHECKING:
    from conftest import Harness

LOW_NOFILE = Path(__file__).resolve().parent / "low_nofile.py"


@pytest.fixture
def restored_nofile() -> Iterator[tuple[int, int]]:
    saved = resource.getrlimit(resource.RLIMIT_NOFILE)
    yield saved
    resource.setrlimit(resource.RLIMIT_NOFILE, saved)


def test_the_soft_open_file_limit_is_raised_to_the_hard_one(restored_nofile: tuple[int, int]) -> None:
    _, hard = restored_nofile
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    assert limits.raise_open_files(8) == hard
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)


def test_a_hard_limit_below_the_world_s_need_is_refused_with_the_figure_before_the_process_group(
    tmp_path: Path, data_dir: Path
) -> None:
    """Rank 999 of 1000 with a rendezvous nobody hosts: a check after init_process_group would wait."""
    env = {**os.environ, "WORLD_SIZE": "1000", "RANK": "999", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "9"}
    argv = ["train", "--data", str(data_dir), "--checkpoint-dir", str(tmp_path / "ck"), "--preset", "tiny",
            "--max-steps", "2", "--checkpoint-every", "2", "--global-batch-size", "1000", "--seq-len", "64",
            "--seed", "1", "--metrics-file", str(tmp_path / "m.jsonl")]
    result = subprocess.run([sys.executable, "-m", "trainer", *argv], capture_output=True, text=True, env=env,
                            cwd=tmp_path, timeout=120,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512)))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == ["trainer: error: the open-file limit (RLIMIT_NOFILE) is 512 at most, and 1000 processes need "
                     "about 3253 per process (3 x (N-1) gloo and store sockets + 256); raise the hard limit (the container "
                     "runtime's nofile ulimit)"], result.stderr


def test_two_ranks_start_when_each_worker_s_soft_limit_is_below_what_gloo_needs(harness: Harness) -> None:
    """Each worker starts with a soft limit of 20 descriptors. Without the raise, two ranks fail
    there (measured twice at 20, and at 14 to 28): gloo cannot open a socket ("socket: Too many
    open files", gloo/transport/tcp/socket.cc), and the peer sees the connection close. Two
    ranks show it as well as four and eight did, with torch processes fewer."""
    run = harness.start("two-ranks-low-nofile", nproc=2, entry=(str(LOW_NOFILE), "20"), max_steps=2,
                        checkpoint_every=2, global_batch_size=2, micro_batch_size=1, seq_len=64, eval_every=0,
                        eval_samples=2)
    assert harness.finish(run) == 0, run.output()[-3000:]
    assert [r["step"] for r in run.metrics() if r["event"] == "train"] == [1, 2]

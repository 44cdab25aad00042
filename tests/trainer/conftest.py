"""Shared harness: tiny data, trainer launches with hard timeouts, and two reference runs.

Every launch goes through `Harness`, which starts the trainer (plain or under torchrun) in its
own session, writes its output to a log file, and on a timeout kills the whole process tree and
fails the test: a hang must fail, never block the suite. Every launch also runs on a file system
that refuses renames below the harness's folder (no_rename/sitecustomize.py), as bucket mounts
do, so every checkpoint the tests write was committed without one.

The reference runs are uninterrupted trainings with one fixed configuration (tiny preset, 40
steps, a checkpoint every 10). Interrupted, resized and sharded runs are compared against them.
They and the prepared corpus are made once per test session, by the first pytest-xdist worker
that needs them, in a folder all workers read (`_once`): each is a torch process or three that
every worker would otherwise start again. So is the HSDP two-node run with the fabric probe in
warn mode (`hsdp_missed_floor`), which test_trainer_distributed and test_trainer_fabric both read.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from components.jobs.fabric import MARKER_ENV
from components.jobs.torchrun import WAIT_THEN_TORCHRUN
from trainer.config import PrepareConfig
from trainer.data import prepare

TRAIN_DEFAULTS: dict[str, Any] = {
    "preset": "tiny",
    "max-steps": 40,
    "checkpoint-every": 10,
    "global-batch-size": 16,
    "micro-batch-size": 8,
    # 64 tokens, not the preset's 256: every run's steps cost half what 128 did (tests/trainer: 17 s
    # less CPU), and nothing compared here depends on the length.
    "seq-len": 64,
    "seed": 7,
    "log-every": 1,
    "warmup-steps": 5,
    "lr": 3e-3,
    "eval-every": 20,
    "eval-samples": 32,
    "keep-checkpoints": 0,
    "dist-timeout": 60,
}
RUN_TIMEOUT_S = 240.0
# The longest the other pods of a failed JobSet run on before the JobSet controller deletes them
# (in the test: SIGTERM), long enough for a restarted attempt on every node to stop by itself;
# a test's `settled` ends the wait as soon as what it reads has happened.
JOBSET_GRACE_S = 30.0
NO_RENAME_HOOK = Path(__file__).resolve().parent / "no_rename"
NO_RENAME_ENV = "TRAINER_TEST_REFUSE_RENAMES_UNDER"


@dataclass
class RunFiles:
    """What a run leaves behind, all the tests of a shared reference run read."""

    log: Path
    checkpoint_dir: Path
    metrics_file: Path

    @classmethod
    def in_folder(cls, folder: Path, node: int | None = None) -> RunFiles:
        """Where a run named after `folder` writes, unless told otherwise; the agents of a
        multi-node run (Harness.run_nodes) share all but their logs."""
        log = folder / ("output.log" if node is None else f"node{node}.log")
        return cls(log, folder / "checkpoints", folder / "metrics.jsonl")

    def metrics(self) -> list[dict[str, Any]]:
        if not self.metrics_file.exists():
            return []
        return [json.loads(line) for line in self.metrics_file.read_text().splitlines()]

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def train_losses(self) -> dict[int, float]:
        """Loss per step; after a restart the later attempt's value for a step wins."""
        return {int(r["step"]): float(r["loss"]) for r in self.metrics() if r["event"] == "train"}

    def eval_losses(self) -> dict[int, float]:
        return {
            int(r["step"]): float(r["eval_loss"])
            for r in self.metrics()
            if r["event"] == "train" and r["eval_loss"] is not None
        }


@dataclass
class Run(RunFiles):
    proc: subprocess.Popen[bytes]


def max_rel_diff(a: dict[int, float], b: dict[int, float]) -> float:
    assert a.keys() == b.keys(), f"different steps: {sorted(a)} vs {sorted(b)}"
    return max(abs(a[k] - b[k]) / abs(b[k]) for k in a)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def _process_tree(pid: int) -> list[int]:
    tree, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        tree.append(current)
        frontier.extend(_children(current))
    return tree


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Harness:
    max_rel_diff = staticmethod(max_rel_diff)

    def __init__(self, root: Path, data_dir: Path, no_rename_root: Path) -> None:
        self.root = root
        self.data_dir = data_dir
        self.no_rename_root = no_rename_root
        self.env = dict(
            os.environ,
            TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1",
            OMP_NUM_THREADS="1",
            PYTHONUNBUFFERED="1",
            PYTHONPATH=os.pathsep.join(filter(None, [str(NO_RENAME_HOOK), os.environ.get("PYTHONPATH")])),
            **{NO_RENAME_ENV: str(no_rename_root)},
        )

    @contextmanager
    def env_with(self, **values: str) -> Iterator[None]:
        """Every launch inside also gets these variables (a run's own metrics port, say)."""
        saved = self.env
        self.env = {**saved, **values}
        try:
            yield
        finally:
            self.env = saved

    def train_args(self, checkpoint_dir: Path | str, metrics_file: Path, **overrides: Any) -> list[str]:
        """Overrides are flags by name (underscores for dashes); an empty string is a switch."""
        options = {**TRAIN_DEFAULTS, **{k.replace("_", "-"): v for k, v in overrides.items()}}
        args = ["train", "--data", str(self.data_dir), "--checkpoint-dir", str(checkpoint_dir),
                "--metrics-file", str(metrics_file)]
        for key, value in options.items():
            args += [f"--{key}"] + ([str(value)] if value != "" else [])
        return args

    def start(self, name: str, nproc: int | None = None, max_restarts: int = 0,
              checkpoint_dir: Path | str | None = None, entry: tuple[str, ...] = ("-m", "trainer"),
              **overrides: Any) -> Run:
        """nproc None runs a plain process; a number runs under torchrun (elastic, c10d). `entry`
        is what the interpreter (or torchrun) runs with the trainer's arguments."""
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        files = RunFiles.in_folder(folder)
        ckpt, metrics = checkpoint_dir or files.checkpoint_dir, files.metrics_file
        trainer_args = self.train_args(ckpt, metrics, **overrides)
        if nproc is None:
            command = [sys.executable, *entry, *trainer_args]
        else:
            command = [
                sys.executable, "-m", "torch.distributed.run",
                "--nnodes", "1:1", "--nproc-per-node", str(nproc),
                "--max-restarts", str(max_restarts),
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{_free_port()}",
                "--monitor-interval", "0.2",
                *entry, *trainer_args,
            ]
        with open(files.log, "wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                    cwd=folder, start_new_session=True)
        local = Path(ckpt.removeprefix("file://")) if isinstance(ckpt, str) else ckpt
        return Run(files.log, local, metrics, proc)

    def run_nodes(self, name: str, nodes: int, nproc_per_node: int, expect_code: int = 0,
                  pod_entry: bool = False, max_restarts: int = 0, jobset_fails: bool = False,
                  settled: Callable[[list[Run]], bool] | None = None, **overrides: Any) -> Run:
        """`nodes` torchrun agents on this machine, joined by one c10d rendezvous as separate
        nodes would be (each gets its own LOCAL_WORLD_SIZE). The Run is the first agent's; the
        metrics file is shared (rank 0 writes it), each agent logs to node<i>.log. Every agent
        must exit with `expect_code`. `pod_entry` starts each agent through the pod's entry
        (components.jobs.torchrun) with the environment `gpu-platform job` gives it, the fabric
        marker in a file of each node's own. `jobset_fails` plays the JobSet's part once a pod's
        entry exits with `expect_code` (podFailurePolicy FailJob, then the JobSet's failurePolicy
        deletes the other pods, components.jobs.fabric): the other agents, which may still wait in
        the next rendezvous round for the node that left, get SIGTERM once `settled(runs)` holds
        (what the test reads has happened) or after JOBSET_GRACE_S; the first to end must exit
        with `expect_code` and the others end non-zero."""
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        endpoint = f"127.0.0.1:{_free_port()}"
        runs = []
        for node in range(nodes):
            files = RunFiles.in_folder(folder, node)
            agent = [
                f"--nnodes={nodes}", f"--nproc-per-node={nproc_per_node}", f"--max-restarts={max_restarts}",
                "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", f"--rdzv-id={name}",
                "--monitor-interval=0.2",
                "-m", "trainer", *self.train_args(files.checkpoint_dir, files.metrics_file, **overrides),
            ]
            env = dict(self.env)
            if pod_entry:
                command = [sys.executable, "-c", WAIT_THEN_TORCHRUN, *agent]
                env.update(NODE_RANK=str(node), RDZV_WAIT_SECONDS="30", **{MARKER_ENV: str(folder / f"fabric{node}")})
            else:
                command = [sys.executable, "-m", "torch.distributed.run", *agent]
            with open(files.log, "wb") as out:
                proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                        cwd=folder, start_new_session=True)
            runs.append(Run(files.log, files.checkpoint_dir, files.metrics_file, proc))
        if jobset_fails:
            first = self.first_to_end(runs)
            deadline = time.monotonic() + JOBSET_GRACE_S
            while time.monotonic() < deadline and any(run.proc.poll() is None for run in runs):
                if settled is not None and settled(runs):
                    break
                time.sleep(0.2)
            for run in runs:
                if run.proc.poll() is None:
                    os.killpg(run.proc.pid, signal.SIGTERM)
            codes = [self.finish(run) for run in runs]
            assert first.proc.returncode == expect_code and all(code != 0 for code in codes), "\n".join(
                f"node {i} exited {c}; log:\n{r.output()[-3000:]}" for i, (r, c) in enumerate(zip(runs, codes, strict=True)))
            return runs[0]
        codes = [self.finish(run) for run in runs]
        assert codes == [expect_code] * nodes, "\n".join(f"node {i} exited {c}; log:\n{r.output()[-3000:]}"
                                                for i, (r, c) in enumerate(zip(runs, codes, strict=True)))
        return runs[0]

    def first_to_end(self, runs: list[Run], timeout: float = RUN_TIMEOUT_S) -> Run:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for run in runs:
                if run.proc.poll() is not None:
                    return run
            time.sleep(0.2)
        for run in runs:
            self.kill_tree(run)
        pytest.fail(f"no agent finished within {timeout:.0f}s (hang); log:\n{runs[0].output()[-4000:]}")

    def finish(self, run: Run, timeout: float = RUN_TIMEOUT_S) -> int:
        try:
            return run.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_tree(run)
            pytest.fail(f"trainer did not finish within {timeout:.0f}s (hang); log:\n{run.output()[-4000:]}")

    def run(self, name: str, nproc: int | None = None, **overrides: Any) -> Run:
        run = self.start(name, nproc, **overrides)
        code = self.finish(run)
        assert code == 0, f"{name} exited {code}; log:\n{run.output()[-4000:]}"
        return run

    def workers(self, run: Run, count: int, timeout: float = 60.0) -> list[int]:
        """Worker pids under a torchrun agent, once all `count` exist."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            kids = _children(run.proc.pid)
            if len(kids) == count:
                return kids
            time.sleep(0.05)
        self.kill_tree(run)
        pytest.fail(f"torchrun did not start {count} workers within {timeout:.0f}s")

    def wait_for(self, run: Run, condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            if run.proc.poll() is not None:
                pytest.fail(f"trainer exited ({run.proc.returncode}) before {what}; log:\n{run.output()[-4000:]}")
            time.sleep(0.02)
        self.kill_tree(run)
        pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")

    def kill_tree(self, run: Run) -> None:
        for pid in reversed(_process_tree(run.proc.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        run.proc.wait()


def write_corpus(path: Path, words: int = 60_000, seed: int = 0) -> None:
    """Sentences over a small vocabulary: learnable in a few steps, so losses move visibly."""
    rng = random.Random(seed)
    vocab = ("the river carries light stones past quiet towns while old bridges hum "
             "under trains and children count boats at dusk near green hills").split()
    lines = [" ".join(rng.choice(vocab) for _ in range(12)) + ".\n" for _ in range(words // 12)]
    path.write_text("".join(lines))


def _session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This test session's own folder: a pytest-xdist worker's base folder is one of its folders."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def _once(folder: Path) -> Iterator[bool]:
    """Holds `folder`'s lock (fcntl.flock, so one worker at a time) and yields whether what goes
    into it is still to be made; it counts as made once the block ends without an error, so a
    failed attempt is made again by the next worker that needs it, from an empty folder (a
    reference run must not resume from a failed attempt's checkpoints)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    made = folder.with_name(f"{folder.name}.made")
    with open(folder.with_name(f"{folder.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        to_make = not made.exists()
        if to_make:
            shutil.rmtree(folder, ignore_errors=True)
        yield to_make
        if to_make:
            made.touch()


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _session_root(tmp_path_factory) / "trainer-shared"


@pytest.fixture(scope="session")
def data_dir(shared_dir: Path) -> Path:
    root = shared_dir / "corpus"
    with _once(root) as to_make:
        if to_make:
            root.mkdir()
            write_corpus(root / "corpus.txt")
            prepare(PrepareConfig(input=root / "corpus.txt", output=root / "data"))
    return root / "data"


@pytest.fixture(scope="session")
def harness(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Harness:
    return Harness(tmp_path_factory.mktemp("runs"), data_dir, no_rename_root=_session_root(tmp_path_factory))


def _sharing(harness: Harness, shared_dir: Path) -> Harness:
    """The harness whose runs land in the folder every worker reads."""
    return Harness(shared_dir, harness.data_dir, no_rename_root=harness.no_rename_root)


def _reference(harness: Harness, shared_dir: Path, name: str, nproc: int | None = None) -> RunFiles:
    folder = shared_dir / name
    with _once(folder) as to_make:
        if to_make:
            _sharing(harness, shared_dir).run(name, nproc)
    return RunFiles.in_folder(folder)


@pytest.fixture(scope="session")
def reference_one(harness: Harness, shared_dir: Path) -> RunFiles:
    """Uninterrupted, one plain process (no torchrun), two micro-batches per step."""
    return _reference(harness, shared_dir, "reference-1proc")


@pytest.fixture(scope="session")
def reference_two(harness: Harness, shared_dir: Path) -> RunFiles:
    """Uninterrupted, two processes under torchrun, one micro-batch each per step."""
    return _reference(harness, shared_dir, "reference-2proc", nproc=2)


def _scrape_while(url: str, running: threading.Thread) -> dict[str, float]:
    """The fabric series rank 0's endpoint serves, read while the run lasts (the endpoint ends
    with the process); empty if the run ended before one read found them."""
    while running.is_alive():
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                text = response.read().decode()
        except OSError:
            time.sleep(0.02)
            continue
        found = {f"{s.name}{{{s.labels.get('check', '')},{s.labels.get('transport', '')}}}": s.value
                 for family in text_string_to_metric_families(text) for s in family.samples
                 if s.name.startswith("trainer_fabric_")}
        if found:
            return found
    return {}


@dataclass
class FabricSeries:
    """A run and the trainer_fabric_* series its endpoint served while it trained."""

    run: RunFiles
    series: dict[str, float]


@pytest.fixture(scope="session")
def hsdp_missed_floor(harness: Harness, shared_dir: Path) -> FabricSeries:
    """Two torchrun agents, one process each, as two nodes: HSDP (2 replicas x 1 shard) under
    --fabric-check warn with a floor no CPU reaches (a verdict that fails), rank 0's endpoint
    scraped while it trains. Read by the HSDP test (test_trainer_distributed: the probe, all-reduces
    of constant buffers, must leave the losses alone) and by both tests of what warn does with a
    missed floor (test_trainer_fabric), so the four torch processes start once per session."""
    name = "hsdp-warn-floor"
    folder = shared_dir / name
    series_file = folder / "fabric-series.json"
    with _once(folder) as to_make:
        if to_make:
            shared = _sharing(harness, shared_dir)
            port = _free_port()
            failures: list[BaseException] = []

            def run() -> None:
                try:
                    shared.run_nodes(name, nodes=2, nproc_per_node=1, parallel="hsdp", fabric_check="warn",
                                     fabric_floor_gbps=1e6, fabric_probe_max_mib=4)
                except BaseException as error:  # noqa: BLE001 - re-raised below, in the test's thread
                    failures.append(error)

            with shared.env_with(TRAINER_METRICS_PORT=str(port)):
                running = threading.Thread(target=run)
                running.start()
                series = _scrape_while(f"http://127.0.0.1:{port}/metrics", running)
                running.join()
            if failures:
                raise failures[0]
            series_file.write_text(json.dumps(series))
    return FabricSeries(RunFiles.in_folder(folder, node=0), json.loads(series_file.read_text()))

"""The rendered container entry run for real: the installed torchrun, two agents on this machine
standing in for two pods, the c10d rendezvous flags exactly as `gpu-platform job` renders them.

Only the host is changed (pod 0's DNS name becomes localhost, the port a free one, the pod IP
127.0.0.1, NODE_RANK the pod's index as the downward API would set it) and the trainer is
replaced by a worker that dies once, so torchrun's own restarts are exercised. Every agent runs
in a session of its own and is killed with its whole process group at the end, whatever happened.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from k8s_support import REPO

from components.jobs import renderer
from infra import stackfile

# A marker file per rank tells a worker's first run from its second (TORCHELASTIC_RESTART_COUNT
# is per agent, and under c10d an agent whose workers were healthy restarts them uncounted).
CRASH_ONCE = """\
import datetime, os, pathlib, sys
import torch, torch.distributed as dist
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
marker = pathlib.Path(sys.argv[0]).parent / f"ran_{rank}"
run = 2 if marker.exists() else 1
marker.touch()
store, _, _ = next(dist.rendezvous("env://", rank, world, timeout=datetime.timedelta(seconds=60)))
dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
total = torch.ones(1)
dist.all_reduce(total)
print(f"rank {rank} run {run} sum {int(total.item())}", flush=True)
if run == 1 and rank == world - 1:
    os._exit(7)
dist.barrier()
dist.destroy_process_group()
"""

# The survivor of the kill below is busy outside any collective (a long computation, a slow
# read): it would notice nothing of its peer's death. Only its agent can restart it. A marker
# file per rank tells a worker's first run from its second: c10d restarts the healthy pod's
# workers without counting a failure, so TORCHELASTIC_RESTART_COUNT differs between the pods.
KILLED_ONCE = """\
import datetime, os, pathlib, signal, sys, time
import torch.distributed as dist
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
marker = pathlib.Path(sys.argv[0]).parent / f"ran_{rank}"
run = 2 if marker.exists() else 1
marker.touch()
store, _, _ = next(dist.rendezvous("env://", rank, world, timeout=datetime.timedelta(seconds=60)))
dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
dist.barrier()
print(f"rank {rank} run {run} started {time.time():.3f}", flush=True)
if run == 1:
    if rank == world - 1:
        time.sleep(1)
        print(f"rank {rank} killed {time.time():.3f}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(600)
dist.barrier()
dist.destroy_process_group()
"""
TIMEOUT_S = 180
RESTART_WITHIN_S = 60


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rendered_container(gpus_per_node: int = 2) -> dict[str, Any]:
    spec = stackfile.read("onprem", REPO).spec()
    jobset = renderer.render(
        spec,
        renderer.JobRequest(
            pool="a100-train", nodes=2, gpus_per_node=gpus_per_node, team="research", tier="standard", image="ghcr.io/a/t:1",
            trainer_args=["--preset", "tiny", "--max-steps", "1", "--checkpoint-every", "1", "--global-batch-size", "4",
                          "--seq-len", "64", "--seed", "0", "--data", "/data/x"],
        ),
    )
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]


def pod_command(container: dict[str, Any], port: int, script: Path) -> list[str]:
    """The container's command and args as the kubelet would run them (it expands $(POD_IP))."""
    args = [a.replace("$(POD_IP)", "127.0.0.1") for a in container["args"]]
    args = [f"--rdzv-endpoint=localhost:{port}" if a.startswith("--rdzv-endpoint=") else a for a in args]
    # The worker stands in for `-m trainer train ...`.
    args = args[: args.index("-m")] + [str(script)]
    return [sys.executable if c == "python3" else c for c in container["command"]] + args


def pod_env(container: dict[str, Any], rank: int = 0, **extra: str) -> dict[str, str]:
    values = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    # What the downward API fills in: the completion index and the pod's address.
    fields = {"NODE_RANK": str(rank), "POD_IP": "127.0.0.1"}
    return {**os.environ, **values, **fields, "PATH": path, "OMP_NUM_THREADS": "1",
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", **extra}


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants, read from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(parent, []).append(int(entry.name))
    tree, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        tree.append(current)
        frontier.extend(parents.get(current, []))
    return tree


@contextmanager
def two_pods(container: dict[str, Any], script: Path, logs: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Two agents, each in its own session, logging to logs/pod<i>.log; on leaving, each agent's
    whole process group (the agent and its workers) is killed, so nothing outlives the test."""
    port = free_port()
    pods = []
    try:
        for rank in (0, 1):
            with open(logs / f"pod{rank}.log", "wb") as out:
                pods.append(subprocess.Popen(pod_command(container, port, script), env=pod_env(container, rank),
                                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        yield pods
    finally:
        # torchrun starts its workers in sessions of their own, so the agent's process group does
        # not hold them: the whole tree is collected first, then killed.
        for pod in pods:
            for pid in reversed(process_tree(pod.pid)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            pod.wait()


def output(logs: Path) -> str:
    return "".join((logs / f"pod{rank}.log").read_text(errors="replace") for rank in (0, 1))


def wait_all(pods: list[subprocess.Popen[bytes]], logs: Path) -> list[int]:
    deadline = time.monotonic() + TIMEOUT_S
    for pod in pods:
        try:
            pod.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"the pods did not finish within {TIMEOUT_S} s; logs:\n{output(logs)[-4000:]}")
    return [pod.returncode for pod in pods]


def test_two_pods_rendezvous_and_torchrun_restarts_a_crashed_worker(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "worker.py"
    script.write_text(CRASH_ONCE)
    with two_pods(rendered_container(), script, tmp_path) as pods:
        codes = wait_all(pods, tmp_path)
    finished = output(tmp_path)
    assert codes == [0, 0], finished[-4000:]
    for rank in range(4):
        assert f"rank {rank} run 2 sum 4" in finished, finished


def test_one_pod_s_killed_worker_restarts_both_pods_together_within_a_minute(tmp_path: Path) -> None:
    """The other pod's worker sits outside any collective; c10d tells its agent that a node
    waits for a new round, and it restarts it without counting a failure. One worker per pod is
    enough to show it (the crash test above has two), and four torch processes fewer."""
    pytest.importorskip("torch")
    script = tmp_path / "worker.py"
    script.write_text(KILLED_ONCE)
    with two_pods(rendered_container(gpus_per_node=1), script, tmp_path) as pods:
        codes = wait_all(pods, tmp_path)
    finished = output(tmp_path)
    assert codes == [0, 0], finished[-4000:]
    killed = float(re.findall(r"rank 1 killed ([0-9.]+)", finished)[0])
    restarted = {int(r): float(t) for r, t in re.findall(r"rank (\d) run 2 started ([0-9.]+)", finished)}
    assert sorted(restarted) == [0, 1], finished[-4000:]
    assert max(restarted.values()) - killed < RESTART_WITHIN_S, (killed, restarted)


def test_a_pod_gives_up_when_pod_0_s_name_never_resolves() -> None:
    container = rendered_container()
    args = [a if not a.startswith("--rdzv-endpoint=") else "--rdzv-endpoint=train-node-0-0.invalid:29400"
            for a in container["args"]]
    command = [sys.executable if c == "python3" else c for c in container["command"]] + args
    done = subprocess.run(command, env=pod_env(container, RDZV_WAIT_SECONDS="1"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "rendezvous host train-node-0-0.invalid:29400 was not ready (one address, store listening) within 1 s"
    )


def _entry(container: dict[str, Any], endpoint: str) -> list[str]:
    args = [a if not a.startswith("--rdzv-endpoint=") else f"--rdzv-endpoint={endpoint}" for a in container["args"]]
    return [sys.executable if c == "python3" else c for c in container["command"]] + args


def _fake_torchrun(tmp_path: Path) -> str:
    """A PYTHONPATH whose `torch.distributed.run` only says it started, so the entry's wait is
    what is tested."""
    run = tmp_path / "fake" / "torch" / "distributed"
    run.mkdir(parents=True)
    (run.parent / "__init__.py").write_text("")
    (run / "__init__.py").write_text("")
    (run / "run.py").write_text("print('torchrun started')\n")
    return str(tmp_path / "fake")


def test_a_worker_pod_waits_for_pod_0_s_store_not_only_its_name(tmp_path: Path) -> None:
    container = rendered_container()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    env = pod_env(container, 1, RDZV_WAIT_SECONDS="2", PYTHONPATH=_fake_torchrun(tmp_path))
    done = subprocess.run(_entry(container, f"127.0.0.1:{port}"), env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout
    assert "was not ready" in done.stderr
    with socket.socket() as store:
        store.bind(("127.0.0.1", 0))
        store.listen()
        endpoint = f"127.0.0.1:{store.getsockname()[1]}"
        done = subprocess.run(_entry(container, endpoint), env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "torchrun started"


def test_pod_0_does_not_wait_for_its_own_store(tmp_path: Path) -> None:
    container = rendered_container()
    env = pod_env(container, 0, RDZV_WAIT_SECONDS="2", PYTHONPATH=_fake_torchrun(tmp_path))
    done = subprocess.run(_entry(container, "127.0.0.1:1"), env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "torchrun started"


def test_the_wait_ends_on_sigterm() -> None:
    container = rendered_container()
    env = pod_env(container, 1, RDZV_WAIT_SECONDS="60")
    waiting = subprocess.Popen(_entry(container, "train-node-0-0.invalid:29400"), env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        waiting.send_signal(signal.SIGTERM)
        assert waiting.wait(timeout=10) == 143
    finally:
        waiting.kill()
        waiting.wait()


def _entry_with_plugin(tmp_path: Path, plugin: Path, wait: str) -> subprocess.CompletedProcess[str]:
    from components.jobs import fabric, torchrun

    env = {**os.environ, fabric.PLUGIN_ENV: str(plugin), fabric.PLUGIN_WAIT_ENV: wait, "RDZV_WAIT_SECONDS": "0", "NODE_RANK": "1"}
    # A rendezvous host that never resolves: past the plugin wait the entry stops at the next wait.
    args = ["--rdzv-endpoint=fit-proof.invalid:1"]
    return subprocess.run([sys.executable, "-c", torchrun.WAIT_THEN_TORCHRUN, *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)


def test_the_entry_gives_up_on_a_missing_nccl_plugin_after_its_wait_with_a_retryable_status(tmp_path: Path) -> None:
    done = _entry_with_plugin(tmp_path, tmp_path / "libnccl-net.so", "1")
    assert done.returncode == 1 and "NCCL plugin" in done.stderr and "within 1 s" in done.stderr


def test_the_entry_goes_on_once_the_nccl_plugin_is_there(tmp_path: Path) -> None:
    (tmp_path / "libnccl-net.so").touch()
    done = _entry_with_plugin(tmp_path, tmp_path / "libnccl-net.so", "1")
    assert "NCCL plugin" not in done.stderr and "rendezvous host fit-proof.invalid:1 was not ready" in done.stderr

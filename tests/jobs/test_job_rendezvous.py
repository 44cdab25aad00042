"""The rendered container entry run for real: the installed torchrun, two agents on this machine
standing in for two pods, the static rendezvous flags exactly as `gpu-platform job` renders them.

Only the host is changed (pod 0's DNS name becomes localhost, the port a free one) and the trainer
is replaced by a worker that crashes once, so torchrun's own restarts are exercised.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from k8s_support import REPO

from components.jobs import renderer
from infra import stackfile

CRASH_ONCE = """\
import datetime, os
import torch, torch.distributed as dist
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
store, _, _ = next(dist.rendezvous("env://", rank, world, timeout=datetime.timedelta(seconds=60)))
dist.init_process_group("gloo", store=dist.PrefixStore(f"t/{attempt}", store), rank=rank, world_size=world)
total = torch.ones(1)
dist.all_reduce(total)
print(f"rank {rank} attempt {attempt} sum {int(total.item())}", flush=True)
if attempt == "0" and rank == world - 1:
    os._exit(7)
dist.barrier()
dist.destroy_process_group()
"""
TIMEOUT_S = 180


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rendered_container() -> dict[str, Any]:
    spec = stackfile.read("onprem", REPO).spec()
    jobset = renderer.render(
        spec,
        renderer.JobRequest(
            pool="a100-train", nodes=2, gpus_per_node=2, team="research", tier="standard", image="ghcr.io/a/t:1",
            trainer_args=["--preset", "tiny", "--max-steps", "1", "--checkpoint-every", "1", "--global-batch-size", "4",
                          "--seq-len", "64", "--seed", "0", "--data", "/data/x"],
        ),
    )
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]


def pod_command(container: dict[str, Any], rank: int, port: int, script: Path) -> list[str]:
    """The container's command and args as the kubelet would run them in pod `rank`."""
    args = [a.replace("$(NODE_RANK)", str(rank)) for a in container["args"]]
    args = ["--master-addr=localhost" if a.startswith("--master-addr=") else a for a in args]
    args = [f"--master-port={port}" if a.startswith("--master-port=") else a for a in args]
    # The worker stands in for `-m trainer train ...`.
    args = args[: args.index("-m")] + [str(script)]
    return [sys.executable if c == "python3" else c for c in container["command"]] + args


def pod_env(container: dict[str, Any], **extra: str) -> dict[str, str]:
    values = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return {**os.environ, **values, "PATH": path, "OMP_NUM_THREADS": "1", **extra}


def test_two_pods_rendezvous_and_torchrun_restarts_a_crashed_worker(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    container = rendered_container()
    script = tmp_path / "worker.py"
    script.write_text(CRASH_ONCE)
    port = free_port()
    pods = [
        subprocess.Popen(
            pod_command(container, rank, port, script),
            env=pod_env(container),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    try:
        outputs = [pod.communicate(timeout=TIMEOUT_S)[0] for pod in pods]
    finally:
        for pod in pods:
            pod.kill()
    assert [pod.returncode for pod in pods] == [0, 0], outputs
    finished = "".join(outputs)
    for rank in range(4):
        assert f"rank {rank} attempt 1 sum 4" in finished, finished


def test_a_pod_gives_up_when_pod_0_s_name_never_resolves() -> None:
    container = rendered_container()
    args = [a if not a.startswith("--master-addr=") else "--master-addr=train-node-0-0.invalid" for a in container["args"]]
    command = [sys.executable if c == "python3" else c for c in container["command"]] + args
    done = subprocess.run(command, env=pod_env(container, RDZV_WAIT_SECONDS="1"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == "rendezvous host train-node-0-0.invalid did not resolve within 1 s"

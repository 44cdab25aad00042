"""How a job's pods start torchrun: a bounded wait for pod 0's DNS name, then a static rendezvous on
it, each pod's node rank its completion index (docs/scheduling.md says why)."""

from __future__ import annotations

# torchrun's static rendezvous: the TCPStore pod 0's agent hosts (torch/distributed/run.py
# --master-port; elastic/rendezvous/static_tcp_rendezvous.py).
RDZV_PORT = 29400
# How long a pod waits for pod 0's DNS record before it gives up (and the JobSet restarts).
RDZV_WAIT_S = 300
# torchrun restarts a pod's workers this many times before the pod fails.
TORCHRUN_MAX_RESTARTS = 3

# The container's entry: wait (bounded) until pod 0's name resolves, then become torchrun, so
# torchrun is PID 1 and receives the kubelet's SIGTERM. The name is torchrun's --master-addr.
WAIT_THEN_TORCHRUN = """\
import os, socket, sys, time
host = next(arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--master-addr="))
limit = int(os.environ["RDZV_WAIT_SECONDS"])
deadline = time.monotonic() + limit
while True:
    try:
        socket.getaddrinfo(host, None)
        break
    except socket.gaierror:
        if time.monotonic() > deadline:
            sys.exit(f"rendezvous host {host} did not resolve within {limit} s")
        time.sleep(1)
os.execvp("torchrun", ["torchrun", *sys.argv[1:]])
"""


def torchrun_args(nodes: int, gpus_per_node: int, host0: str, shutdown_timeout: int, args: list[str]) -> list[str]:
    """torchrun's arguments: a static rendezvous on pod 0, this pod's rank its completion index."""
    return [
        f"--nnodes={nodes}",
        f"--nproc-per-node={gpus_per_node}",
        f"--max-restarts={TORCHRUN_MAX_RESTARTS}",
        "--rdzv-backend=static",
        f"--master-addr={host0}",
        f"--master-port={RDZV_PORT}",
        "--node-rank=$(NODE_RANK)",
        f"--shutdown-timeout={shutdown_timeout}",
        "-m",
        "trainer",
        "train",
        *args,
    ]

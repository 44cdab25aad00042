"""How a job's pods start torchrun: a bounded wait for pod 0's DNS name and store, then a c10d rendezvous
whose store pod 0 hosts because it is told so (docs/scheduling.md says why)."""

from __future__ import annotations

from components.jobs.fabric import EXIT_FABRIC, MARKER_ENV, PLUGIN_ENV, PLUGIN_WAIT_ENV

# The c10d rendezvous store pod 0's agent hosts (torch/distributed/run.py --rdzv-endpoint;
# elastic/rendezvous/c10d_rendezvous_backend.py, DEFAULT_PORT).
RDZV_PORT = 29400
# How long a pod waits for pod 0's DNS record and store before it gives up (and the JobSet restarts).
RDZV_WAIT_S = 300
# torchrun restarts a pod's workers this many times before the pod fails.
TORCHRUN_MAX_RESTARTS = 3
# Set from the pod's status.podIP (downward API): the address this agent publishes to the others,
# so no worker depends on a pod's own DNS record (torch/distributed/run.py --local-addr).
POD_IP_ENV = "POD_IP"

# The JobSet's uid, from the label JobSet puts on every pod (jobset v0.12.0 docs, "JobSet labels":
# jobset.sigs.k8s.io/jobset-uid), makes the rendezvous id differ between a job and the same job
# resubmitted under its name while the old pods still terminate.
JOBSET_UID_ENV = "JOBSET_UID"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"

# The container's entry: wait (bounded) until pod 0's name resolves to one address per IP family
# (a terminating pod 0 of a deleted job of the same name can stay in DNS beside the new one: the
# headless Service publishes not-ready addresses), and on the other pods until pod 0's store
# accepts connections (torchrun connects to it once, then fails after its read timeout:
# elastic/rendezvous/c10d_rendezvous_backend.py, _create_tcp_store); the wait exits on SIGTERM
# (as PID 1 without a handler it would ignore it). A GPUDirect pod first waits, bounded, for its NCCL
# plugin library (components.jobs.fabric PLUGIN_ENV). Then run torchrun (torch's `torchrun` console
# script is torch.distributed.run:main) as its only child. Pod 0 (completion index NODE_RANK 0) is
# told to host the rendezvous store and every other pod told not to: c10d's `is_host` option,
# instead of its guess from matching the endpoint name to the pod's own names, which fails before
# pod 0's record exists. As PID 1 the entry passes the kubelet's SIGTERM (and SIGINT) on to
# torchrun. When torchrun ends and a rank recorded a stopped fabric gate (components.jobs.fabric),
# the entry exits with that status instead of torchrun's 1, and leaves the message where the
# kubelet reads the container's termination message (terminationMessagePath,
# /dev/termination-log by default, a file the kubelet mounts).
WAIT_THEN_TORCHRUN = """\
import os, signal, socket, subprocess, sys, time
signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
plugin = os.environ.get("%(plugin_env)s", "")
plugin_wait = int(os.environ.get("%(plugin_wait_env)s", "0"))
plugin_deadline = time.monotonic() + plugin_wait
while plugin and not os.path.exists(plugin):
    if time.monotonic() > plugin_deadline:
        sys.exit(f"NCCL plugin {plugin} did not appear within {plugin_wait} s (is the installer DaemonSet running on this node?)")
    time.sleep(1)
endpoint = next(arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--rdzv-endpoint="))
host, port = endpoint.rsplit(":", 1)
limit = int(os.environ["RDZV_WAIT_SECONDS"])
deadline = time.monotonic() + limit
is_host = "1" if os.environ["NODE_RANK"] == "0" else "0"
def ready():
    try:
        infos = socket.getaddrinfo(host, int(port), proto=socket.IPPROTO_TCP)
    except socket.gaierror:
        return False
    by_family = {}
    for family, _, _, _, address in infos:
        by_family.setdefault(family, set()).add(address[0])
    if any(len(addresses) > 1 for addresses in by_family.values()):
        return False
    if is_host == "1":
        return True
    for _, _, _, _, address in infos:
        try:
            socket.create_connection((address[0], int(port)), timeout=2).close()
            return True
        except OSError:
            pass
    return False
while not ready():
    if time.monotonic() > deadline:
        sys.exit(f"rendezvous host {host}:{port} was not ready (one address, store listening) within {limit} s")
    time.sleep(1)
child = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", f"--rdzv-conf=is_host={is_host}", *sys.argv[1:]])
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda signum, frame: child.send_signal(signum))
code = child.wait()
marker = os.environ.get("%(marker_env)s", "")
if marker and os.path.exists(marker):
    if os.path.exists("/dev/termination-log"):
        with open("/dev/termination-log", "w") as log:
            log.write(open(marker).read())
    sys.exit(%(exit_fabric)d)
sys.exit(128 - code if code < 0 else code)
""" % {"marker_env": MARKER_ENV, "exit_fabric": EXIT_FABRIC, "plugin_env": PLUGIN_ENV, "plugin_wait_env": PLUGIN_WAIT_ENV}


def torchrun_args(nodes: int, gpus_per_node: int, host0: str, shutdown_timeout: int, args: list[str],
                  run_id: str = "trainer") -> list[str]:
    """torchrun's arguments: a c10d rendezvous of exactly `nodes` agents on pod 0's store."""
    return [
        f"--nnodes={nodes}",
        f"--nproc-per-node={gpus_per_node}",
        f"--max-restarts={TORCHRUN_MAX_RESTARTS}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={host0}:{RDZV_PORT}",
        f"--rdzv-id={run_id}-$({JOBSET_UID_ENV})",
        f"--local-addr=$({POD_IP_ENV})",
        f"--shutdown-timeout={shutdown_timeout}",
        "-m",
        "trainer",
        "train",
        *args,
    ]

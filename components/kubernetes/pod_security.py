"""Pod Security Admission levels of the team namespaces.

Team namespaces enforce `restricted` (Kubernetes "Pod Security Standards"): jobs run as a
non-root user with no privilege escalation, every capability dropped and the runtime's seccomp
profile, which is how `gpu-platform job` renders them. The one exception is GKE's own MPS, whose
clients share the host's IPC namespace (`hostIPC: true`, GKE docs "Share GPUs with multiple
workloads using NVIDIA MPS"); host namespaces are refused by both `baseline` and `restricted`, so
a stack with such a pool enforces `privileged` in its team namespaces, and says so in the
namespace's own annotation.

GKE GPUDirect pools (components.pools) are the other: their multi-node jobs mount the host's
NCCL plugin libraries (hostPath, refused by `baseline`), and on TCPX/TCPXO run the receive-datapath
daemon as root with NET_ADMIN, which `baseline` does not allow either (Google's least-privileged
manifests, container-engine-accelerators gpudirect-tcpx(o)/nccl-test-unprivileged-without-hostnetwork.yaml,
need no more and neither do ours: no privileged container, no host namespaces). So such a stack's
team namespaces enforce `privileged` too, with the reason in the annotation; the trainer container
itself stays as `restricted` asks.
"""

from __future__ import annotations

from typing import Literal

from components.pools import Pool, fabric_pools
from components.spec import PlatformSpec

# Namespace labels Pod Security Admission reads (kubernetes.io/docs "Pod Security Admission").
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
WARN_LABEL = "pod-security.kubernetes.io/warn"
REASON_ANNOTATION = "gpu-platform.io/pod-security-reason"

Level = Literal["restricted", "baseline", "privileged"]


def mps_through_gke(spec: PlatformSpec, pool: Pool) -> bool:
    """GKE's own MPS: clients share the host's IPC namespace, where its MPS daemon lives."""
    return pool.sharing_mode == "mps" and spec.cloud == "gcp" and spec.device_plugin == "managed"


def team_level(spec: PlatformSpec, pools: list[Pool]) -> tuple[Level, str]:
    """The level every team namespace enforces, and why. Any team may borrow any pool, so one
    GKE-MPS pool sets the level of them all."""
    mps = [pool.name for pool in pools if mps_through_gke(spec, pool)]
    if mps:
        return "privileged", f"pods on GKE MPS pools ({', '.join(mps)}) need hostIPC, which baseline and restricted refuse"
    fabric = [pool.pool for pool in fabric_pools(spec)]
    if fabric:
        return "privileged", (
            f"multi-node jobs on GKE GPUDirect pools ({', '.join(fabric)}) mount the host's NCCL plugin (hostPath) "
            "and run its NET_ADMIN datapath daemon, which baseline and restricted refuse"
        )
    return "restricted", "jobs run as non-root, no privilege escalation, all capabilities dropped, RuntimeDefault seccomp"


def namespace_labels(level: Level) -> dict[str, str]:
    return {ENFORCE_LABEL: level, WARN_LABEL: level}

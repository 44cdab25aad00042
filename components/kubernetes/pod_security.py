"""Pod Security Admission levels of the team namespaces.

Team namespaces enforce `restricted` (Kubernetes "Pod Security Standards"): jobs run as a
non-root user with no privilege escalation, every capability dropped and the runtime's seccomp
profile, which is how `gpu-platform job` renders them. The one exception is GKE's own MPS, whose
clients share the host's IPC namespace (`hostIPC: true`, GKE docs "Share GPUs with multiple
workloads using NVIDIA MPS"); host namespaces are refused by both `baseline` and `restricted`, so
a stack with such a pool enforces `privileged` in its team namespaces, and says so in the
namespace's own annotation.

GKE GPUDirect pools (components.pools) need hostPath mounts of the host's NCCL plugin and, on
TCPX/TCPXO, a root NET_ADMIN daemon sidecar, which `baseline` and `restricted` refuse. Pod Security
Admission exempts nothing outside the API server's configuration file, which GKE does not expose,
so such a stack's team namespaces enforce `privileged` for PSA but keep `warn` and `audit` at
`restricted`, and a ValidatingAdmissionPolicy bound to them (components.kubernetes.gpudirect_admission)
enforces `restricted` on every container except that exact daemon, with hostPath only at the
documented plugin paths. Host namespaces and privileged containers stay refused there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from components.kubernetes import gpudirect_admission
from components.pools import Pool, fabric_pools
from components.spec import PlatformSpec

# Namespace labels Pod Security Admission reads (kubernetes.io/docs "Pod Security Admission").
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
WARN_LABEL = "pod-security.kubernetes.io/warn"
AUDIT_LABEL = "pod-security.kubernetes.io/audit"
REASON_ANNOTATION = "gpu-platform.io/pod-security-reason"

Level = Literal["restricted", "baseline", "privileged"]


def mps_through_gke(spec: PlatformSpec, pool: Pool) -> bool:
    """GKE's own MPS: clients share the host's IPC namespace, where its MPS daemon lives."""
    return pool.sharing_mode == "mps" and spec.cloud == "gcp" and spec.device_plugin == "managed"


@dataclass(frozen=True)
class TeamPodSecurity:
    """What PSA enforces and warns at in every team namespace, why, and whether the GPUDirect
    admission policy holds the namespace to `restricted` instead of PSA."""

    enforce: Level
    warn: Level
    reason: str
    admission_policy: bool = False

    def labels(self) -> dict[str, str]:
        labels = {ENFORCE_LABEL: self.enforce, WARN_LABEL: self.warn}
        if self.admission_policy:
            labels[AUDIT_LABEL] = self.warn
        return labels


def team_level(spec: PlatformSpec, pools: list[Pool]) -> TeamPodSecurity:
    """The levels every team namespace carries, and why. Any team may borrow any pool, so one
    GKE-MPS or GPUDirect pool sets the levels of them all."""
    mps = [pool.name for pool in pools if mps_through_gke(spec, pool)]
    if mps:
        reason = f"pods on GKE MPS pools ({', '.join(mps)}) need hostIPC, which baseline and restricted refuse"
        return TeamPodSecurity("privileged", "privileged", reason)
    fabric = [pool.pool for pool in fabric_pools(spec)]
    if fabric:
        return TeamPodSecurity(
            "privileged",
            "restricted",
            f"multi-node jobs on GKE GPUDirect pools ({', '.join(fabric)}) mount the host's NCCL plugin (hostPath) and run its NET_ADMIN "
            f"datapath daemon, which PSA restricted refuses; ValidatingAdmissionPolicy {gpudirect_admission.POLICY_NAME} "
            "enforces restricted on every other container and allows hostPath only at the plugin's paths",
            admission_policy=True,
        )
    return TeamPodSecurity(
        "restricted", "restricted", "jobs run as non-root, no privilege escalation, all capabilities dropped, RuntimeDefault seccomp"
    )

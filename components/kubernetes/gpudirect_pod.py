"""The pod side of GKE GPUDirect, as the Job controller and the API server will hold it: the
family's receive-datapath daemon as a native sidecar, the host paths it and the trainer mount,
the interfaces and device annotations. One shape for two readers: the job renderer
(components.jobs.fabric) writes it and the team namespaces' admission policy
(components.kubernetes.gpudirect_admission) pins it, so the two cannot drift."""

from __future__ import annotations

from typing import Any

from components.facts.gpudirect import DAEMON_CPU_M, DAEMON_MEMORY_MIB, DEVICE_ANNOTATION_PREFIX, GpuDirect
from components.node_resources import NOTHING, Requests, cpu_quantity, memory_quantity
from components.pools import gpudirect_annotations

# The TCPX daemon and NCCL's plugin meet on a Unix socket in this directory (the daemon's
# --uds_path, NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX): an emptyDir of the pod, not the host's.
TCPX_SOCKET_VOLUME = "tcpx-socket"
TCPX_SOCKET_DIR = "/run/tcpx"
# The Job controller appends this entry to every init container and container of an Indexed
# Job's pods unless the container already has an env of that name (kubernetes/kubernetes@v1.32
# pkg/controller/job/indexed_job_utils.go addCompletionIndexEnvVariable); the API server then
# defaults fieldRef.apiVersion to "v1". The daemon carries it already, in the defaulted form, so
# the pod that reaches admission holds the daemon exactly as rendered, whose env the policy pins
# (components.kubernetes.gpudirect_admission). The annotation is set on every version
# (addCompletionIndexAnnotation), the label only with PodIndexLabel.
COMPLETION_INDEX_ENV = {
    "name": "JOB_COMPLETION_INDEX",
    "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}},
}


def gke_annotations(pool: str, family: GpuDirect) -> dict[str, str]:
    """The pod's interfaces and, where the family has a daemon, the GPU devices the NRI device
    injector hands that container (`devices.gke.io/container.<name>`)."""
    annotations = gpudirect_annotations(pool, family)
    if family.daemon is not None:
        devices = "".join(f"- path: {device}\n" for device in family.daemon.devices)
        annotations[DEVICE_ANNOTATION_PREFIX + family.daemon.name] = devices
    return annotations


def gke_volumes(family: GpuDirect) -> list[dict[str, Any]]:
    """Host paths the trainer and the daemon mount, and the TCPX socket directory."""
    mounts = {name: host for name, host, _ in family.trainer_mounts}
    if family.daemon is not None:
        mounts |= {name: host for name, host, _ in family.daemon.host_mounts}
    volumes: list[dict[str, Any]] = [{"name": name, "hostPath": {"path": host}} for name, host in mounts.items()]
    if family.stack == "tcpx":
        volumes.append({"name": TCPX_SOCKET_VOLUME, "emptyDir": {}})
    return volumes


def _socket_mount(family: GpuDirect) -> list[dict[str, Any]]:
    return [{"name": TCPX_SOCKET_VOLUME, "mountPath": TCPX_SOCKET_DIR}] if family.stack == "tcpx" else []


def gke_trainer_mounts(family: GpuDirect) -> list[dict[str, Any]]:
    """The plugin libraries (and gIB's configs, TCPXO's aperture devices), read-only."""
    return [{"name": name, "mountPath": path, "readOnly": True} for name, _, path in family.trainer_mounts] + _socket_mount(family)


def daemon_requests(family: GpuDirect | None) -> Requests:
    """What the family's daemon sidecar takes of the pod's node (none without a daemon)."""
    return Requests(DAEMON_CPU_M, DAEMON_MEMORY_MIB) if family is not None and family.daemon is not None else NOTHING


def daemon_resources() -> dict[str, str]:
    return {"cpu": cpu_quantity(DAEMON_CPU_M), "memory": memory_quantity(DAEMON_MEMORY_MIB)}


def gke_sidecars(family: GpuDirect) -> list[dict[str, Any]]:
    """The receive-datapath daemon as a native sidecar (an init container that keeps running,
    Kubernetes >= 1.29 SidecarContainers): it starts before the trainer and stops after it, so
    the Job's pod completes when training does. It runs as root with the capabilities Google's
    unprivileged manifests give it (NET_ADMIN; TCPXO also NET_BIND_SERVICE), not privileged."""
    daemon = family.daemon
    if daemon is None:
        return []
    env = [{"name": name, "value": value} for name, value in daemon.env]
    probe: dict[str, Any] = {}
    if daemon.health_check_file is not None:
        # The kubelet starts the trainer only once a sidecar's startup probe passed, and restarts
        # a daemon that never initializes (a bad node's host components) instead of letting the
        # trainer fall back. Timings: gpudirect-tcpxo/best-practice.md "Setup Startup Probe".
        env.append({"name": "HEALTH_CHECK_LOG_FILE", "value": daemon.health_check_file})
        probe = {"startupProbe": {
            "exec": {"command": ["cat", daemon.health_check_file]},
            "initialDelaySeconds": 1, "periodSeconds": 5, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 6,
        }}
    return [{
        "name": daemon.name,
        "image": daemon.image,
        "restartPolicy": "Always",
        "command": list(daemon.command),
        "args": list(daemon.args),
        "env": [*env, COMPLETION_INDEX_ENV],
        **probe,
        "resources": {"requests": daemon_resources(), "limits": daemon_resources()},
        "securityContext": {"runAsUser": 0, "runAsNonRoot": False, "capabilities": {"add": list(daemon.capabilities)}},
        "volumeMounts": [{"name": name, "mountPath": path} for name, _, path in daemon.host_mounts] + _socket_mount(family),
    }]

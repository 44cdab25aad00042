"""The Kubernetes side of GKE GPUDirect: a `Network` and a `GKENetworkParamSet` per extra NIC of
each GPUDirect pool, the family's NCCL plugin installer on the pools' nodes, and (TCPX/TCPXO)
the NRI device injector that hands the GPU devices to the pods' receive-datapath daemon.

The objects follow Google's manifests (components.facts.gpudirect names them): the installers
are container-engine-accelerators' gpudirect-*/nccl-*-installer.yaml with the node affinity
narrowed from the accelerator label to the GPUDirect pools, so a single-node A3 pool gets none.
Field names of the networking.gke.io/v1 objects: GoogleCloudPlatform/gke-networking-api@39b01c2
apis/network/v1/network_types.go and gkenetworkparamset_types.go.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.pools import NODE_POOL_LABEL, FabricPool
from components.facts import gpudirect as facts
from components.gcp.network import FabricNics
from components.gcp.wing import Wing

NETWORKING_API = "networking.gke.io/v1"
KUBE_SYSTEM = "kube-system"
NRI_INJECTOR = "device-injector"
# The host directory the TCPX/TCPXO installers unpack into (mounted at /usr/local in the installer).
_HOST_BIN = "/home/kubernetes/bin"


def network_param_set(vpc: str, subnet: str, device_mode: str) -> dict[str, Any]:
    return {"vpc": vpc, "vpcSubnet": subnet, "deviceMode": device_mode}


def network_spec(param_set: str) -> dict[str, Any]:
    return {"type": "Device", "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": param_set}}


def _pool_affinity(pools: list[str]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": NODE_POOL_LABEL, "operator": "In", "values": sorted(pools)}]}
                ]
            }
        }
    }


def _host(name: str, path: str, kind: str | None = None) -> dict[str, Any]:
    return {"name": name, "hostPath": {"path": path, **({"type": kind} if kind else {})}}


def _installer_step(family: facts.GpuDirect) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(volumes, mounts, script) of the installer's init container: the plugin image's own
    container_entry.sh installs the plugin, which is then copied where the pods' library mount
    reads it (/home/kubernetes/bin/nvidia/lib64; gIB also /home/kubernetes/bin/gib)."""
    if family.stack == "rdma":
        volumes = [_host("library-dir-host", facts.HOST_NVIDIA_LIB64, "DirectoryOrCreate"), _host("gib", facts.HOST_GIB)]
        mounts = [
            {"name": "library-dir-host", "mountPath": f"/usr/local{facts.HOST_NVIDIA_LIB64}"},
            {"name": "gib", "mountPath": f"/usr/local{facts.HOST_GIB}"},
        ]
        script = (
            "set -ex\n/scripts/container_entry.sh install\n"
            f"cp -r /var/lib/gib/lib64/. /usr/local{facts.HOST_NVIDIA_LIB64}\n"
            f"cp -r /var/lib/gib/. /usr/local{facts.HOST_GIB}\n"
        )
        return volumes, mounts, script
    volumes = [_host("var-lib", "/var/lib"), _host("library-dir-host", _HOST_BIN)]
    mounts = [{"name": "var-lib", "mountPath": "/var/lib"}, {"name": "library-dir-host", "mountPath": "/usr/local"}]
    script = (
        "set -ex\n/scripts/container_entry.sh install --install-nccl\nmkdir -p /usr/local/nvidia/lib64\n"
        f"cp -r /var/lib/{family.stack}/lib64/. /usr/local/nvidia/lib64\n"
    )
    return volumes, mounts, script


# TCPXO's host preparation (gpudirect-tcpxo/nccl-tcpxo-installer.yaml, its first init container):
# in the host's namespaces, accept the plugin's TCP flows, load the dma-buf import helper, and bind
# each aperture PCI device (vendor:device 1ae0:0084) under /dev/aperture_devices, readable by pods.
_TCPXO_HOST_PREP = """set -e
/sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT
modprobe import-helper
mkdir -p /dev/aperture_devices
for bdf in $(lspci -nn -D | grep '1ae0:0084' | cut -d' ' -f1); do
  mkdir -p /dev/aperture_devices/$bdf
  umount -R /dev/aperture_devices/$bdf 2>/dev/null || true
  mount --bind "$(readlink -f /sys/bus/pci/devices/$bdf)" /dev/aperture_devices/$bdf
done
chmod -R a+r /dev/aperture_devices
chmod a+rw /dev/aperture_devices/*/resource*
"""
# The image the host preparation runs in: only nsenter is used, the rest are the host's tools.
# Pinned by tag, not digest: Google's manifest runs plain `ubuntu` (gpudirect-tcpxo/
# nccl-tcpxo-installer.yaml, pre-installation), so no upstream digest exists to copy, and none is
# reachable to resolve from here. Pin it by digest (`docker buildx imagetools inspect ubuntu:24.04`)
# or mirror it to the project's registry before a production deploy (docs/gcp.md).
HOST_PREP_IMAGE = "ubuntu:24.04"


def installer(family: facts.GpuDirect, pools: list[str]) -> dict[str, Any]:
    """The family's NCCL plugin installer DaemonSet, on the GPUDirect pools' nodes only."""
    volumes, mounts, script = _installer_step(family)
    init: list[dict[str, Any]] = []
    if family.stack == "tcpxo":
        init.append({
            "name": "host-preparation",
            "image": HOST_PREP_IMAGE,
            "securityContext": {"privileged": True},
            "command": ["nsenter", "-at", "1", "--", "sh", "-c", _TCPXO_HOST_PREP],
        })
    init.append({
        "name": family.installer_name,
        "image": family.installer_image,
        "resources": {"requests": {"cpu": "150m"}},
        "securityContext": {"privileged": True},
        "command": ["/bin/sh", "-c", script],
        "volumeMounts": mounts,
    })
    return _node_daemon_set(family.installer_name, pools, {
        "volumes": volumes,
        "initContainers": init,
        "containers": [{"name": "pause", "image": facts.PAUSE_IMAGE}],
    })


def _node_daemon_set(name: str, pools: list[str], pod: dict[str, Any]) -> dict[str, Any]:
    """A host agent in kube-system on the GPUDirect pools' nodes, as Google's manifests run theirs
    (system-node-critical, every taint tolerated, the host's network and PID namespaces); `pod`
    is the rest of its pod spec."""
    labels = {"k8s-app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": KUBE_SYSTEM, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "affinity": _pool_affinity(pools),
                    "tolerations": [{"operator": "Exists"}],
                    "hostNetwork": True,
                    "hostPID": True,
                    **pod,
                },
            },
        },
    }


def device_injector(pools: list[str]) -> dict[str, Any]:
    """The NRI device injector (nri_device_injector/nri-device-injector.yaml) on the TCPX/TCPXO
    pools: it reads each pod's `devices.gke.io/container.<name>` annotation and adds those device
    nodes to that container, which is how the daemon sees the GPUs without claiming them."""
    return _node_daemon_set(NRI_INJECTOR, pools, {
        "containers": [{
            "name": NRI_INJECTOR,
            "image": facts.NRI_DEVICE_INJECTOR_IMAGE,
            "resources": {"requests": {"cpu": "150m"}},
            "securityContext": {"privileged": True},
            "volumeMounts": [{"name": "dev", "mountPath": "/dev"}, {"name": "nri", "mountPath": "/var/run/nri"}],
        }],
        "volumes": [_host("nri", "/var/run/nri"), _host("dev", "/dev")],
    })


def daemon_sets(pools: list[FabricPool]) -> list[dict[str, Any]]:
    """One installer per family present, and the device injector where a family has a daemon."""
    by_family: dict[str, tuple[facts.GpuDirect, list[str]]] = {}
    for pool in pools:
        by_family.setdefault(pool.family.installer_name, (pool.family, []))[1].append(pool.pool)
    objects = [installer(family, names) for family, names in by_family.values()]
    with_daemon = [pool.pool for pool in pools if pool.family.daemon is not None]
    if with_daemon:
        objects.append(device_injector(with_daemon))
    return objects


def declare(wing: Wing, provider: k8s.Provider, pools: list[FabricPool], nics: dict[str, FabricNics],
            depends_on: list[pulumi.Resource]) -> list[pulumi.Resource]:
    opts = wing.child(provider=provider, depends_on=depends_on)
    made: list[pulumi.Resource] = []
    for pool in pools:
        for (_, subnet), (vpc_name, subnet_name) in zip(pool.subnets, nics[pool.pool].nics):
            params = k8s.apiextensions.CustomResource(
                f"{wing.name}-{subnet.network_object}-params",
                api_version=NETWORKING_API,
                kind="GKENetworkParamSet",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=subnet.network_object),
                spec=pulumi.Output.all(vpc_name, subnet_name).apply(
                    lambda names, mode=subnet.device_mode: network_param_set(names[0], names[1], mode)
                ),
                opts=opts,
            )
            made.append(params)
            made.append(k8s.apiextensions.CustomResource(
                f"{wing.name}-{subnet.network_object}-network",
                api_version=NETWORKING_API,
                kind="Network",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=subnet.network_object),
                spec=network_spec(subnet.network_object),
                opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[params])),
            ))
    for obj in daemon_sets(pools):
        made.append(k8s.apps.v1.DaemonSet(
            f"{wing.name}-{obj['metadata']['name']}",
            metadata=obj["metadata"],
            spec=obj["spec"],
            opts=opts,
        ))
    return made

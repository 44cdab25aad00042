"""GKE GPUDirect per machine family: the extra networks a node needs, the NCCL plugin installer
that puts the family's net plugin on the host, the daemon a pod runs beside the trainer where the
family has one, and the NCCL environment the family documents.

Every row is read from Google's own manifests and guides, named in `source`:
- GKE docs "Maximize GPU network bandwidth with GPUDirect and multi-networking"
  (cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx): A3 High
  (GPUDirect-TCPX, 4 extra gVNIC networks) and A3 Mega (GPUDirect-TCPXO, 8), VPCs with MTU 8244,
  `Network`/`GKENetworkParamSet` of deviceMode NetDevice named vpc1..vpcN, pod interfaces eth1..ethN.
- GKE docs "Run NCCL on custom GKE clusters that use A4 or A3 Ultra" and AI Hypercomputer
  "Create an AI-optimized GKE cluster" (cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute):
  A3 Ultra and A4 (GPUDirect RDMA over RoCE, gIB plugin): one extra gVNIC VPC and one VPC with the
  zone's RoCE network profile (`<zone>-vpc-roce`, VPC docs "RDMA RoCE network profile") holding
  8 subnets, MTU 8896; GKENetworkParamSets gvnic-1 (NetDevice) and rdma-0..7 (deviceMode RDMA).
- GoogleCloudPlatform/container-engine-accelerators@992db81257553607f1477945f1b3219632991829:
  gpudirect-tcpx/nccl-tcpx-installer.yaml, gpudirect-tcpx/nccl-test-unprivileged-without-hostnetwork.yaml,
  gpudirect-tcpx/nccl-config.yaml, gpudirect-tcpxo/nccl-tcpxo-installer.yaml,
  gpudirect-tcpxo/nccl-test-latest.yaml, gpudirect-rdma/nccl-rdma-installer.yaml,
  gpudirect-rdma/nccl-test.yaml, nri_device_injector/nri-device-injector.yaml (images pinned below).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Stack = Literal["tcpx", "tcpxo", "rdma"]

CEA = "GoogleCloudPlatform/container-engine-accelerators@992db81257553607f1477945f1b3219632991829"
GKE_TCPX_DOC = "https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx"
GKE_RDMA_DOC = "https://cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute"

# The pause container every installer DaemonSet keeps running after its init container installed
# the plugin (each installer manifest above, same digest).
PAUSE_IMAGE = "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
# NRI device injector: gives the TCPX/TCPXO daemon the GPU devices a pod's
# `devices.gke.io/container.<name>` annotation lists (nri_device_injector/nri-device-injector.yaml).
NRI_DEVICE_INJECTOR_IMAGE = (
    "gcr.io/gke-release/nri-device-injector@sha256:6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970"
)
DEVICE_ANNOTATION_PREFIX = "devices.gke.io/container."
# Where GKE's COS nodes keep the driver and where the installers put the plugins.
HOST_NVIDIA_LIB64 = "/home/kubernetes/bin/nvidia/lib64"
HOST_NVIDIA = "/home/kubernetes/bin/nvidia"
HOST_GIB = "/home/kubernetes/bin/gib"
HOST_APERTURE_DEVICES = "/dev/aperture_devices"
# The GPU NICs' subnets: one /24 each out of this /16 (the range GKE's guides use), a run of
# SUBNETS_PER_POOL per GPUDirect pool (a pool needs at most 9), so at most 16 such pools a stack.
GPU_SUBNET_BLOCK = "192.168.0.0/16"
SUBNETS_PER_POOL = 16
MAX_GPUDIRECT_POOLS = 256 // SUBNETS_PER_POOL
# The GPU device nodes the daemon needs (the manifests' devices.gke.io annotation).
_GPU_DEVICES = tuple(f"/dev/nvidia{i}" for i in range(8)) + ("/dev/nvidiactl", "/dev/nvidia-uvm")


# What the receive-datapath daemon requests, and is limited to (cpu millicores, memory MiB). Google's
# manifests (gpudirect-tcpx/nccl-test-unprivileged-without-hostnetwork.yaml,
# gpudirect-tcpxo/nccl-test-latest.yaml, CEA above) set no resources on it; in a team namespace the
# LimitRange would then default it to 500m/1Gi, unseen by the trainer's share of the node. Stated
# here so the renderer subtracts it from the trainer and the fit proof counts it (a native sidecar
# adds to the pod's requests). The figure is ours, not Google's: two cores and 4 GiB, above the
# 1 GiB memory-backed scratch the older TCPXO manifests gave the daemon.
DAEMON_CPU_M = 2000
DAEMON_MEMORY_MIB = 4096


@dataclass(frozen=True)
class Daemon:
    """The receive-datapath manager a TCPX/TCPXO pod runs beside the trainer."""

    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    capabilities: tuple[str, ...]
    devices: tuple[str, ...]
    # Host paths the daemon mounts: (volume name, host path, mount path).
    host_mounts: tuple[tuple[str, str, str], ...]
    # The daemon's environment: the node's driver libraries (the manifests' LD_LIBRARY_PATH).
    env: tuple[tuple[str, str], ...] = (("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64"),)
    # The file the daemon writes once initialized, named by its HEALTH_CHECK_LOG_FILE (no
    # underscore allowed in the name), for a startup probe; None where none is documented.
    health_check_file: str | None = None


@dataclass(frozen=True)
class GpuDirect:
    stack: Stack
    # The plugin NCCL uses (trainer.fabric's transport names, components.facts.fabric).
    net: str
    # Extra gVNIC networks (one VPC and subnet each): the GPU NICs of TCPX/TCPXO, the second
    # gVNIC of RDMA shapes.
    gvnic_networks: int
    # RDMA NICs (CX-7), one subnet each in one RoCE VPC.
    rdma_networks: int
    mtu: int
    installer_name: str
    installer_image: str
    # The daemon a pod runs beside the trainer (None: the plugin needs none).
    daemon: Daemon | None
    # Host paths the trainer mounts: (volume name, host path, mount path).
    trainer_mounts: tuple[tuple[str, str, str], ...]
    env: dict[str, str] = field(default_factory=dict)
    source: str = ""
    # The NCCL net plugin library as the trainer sees it once the installer put it on the host:
    # the pod waits for it before NCCL starts (components.jobs.torchrun).
    plugin_library: str = "/usr/local/nvidia/lib64/libnccl-net.so"

    @property
    def network_names(self) -> list[str]:
        """The GKE `Network` names of the family, in pod interface order (eth1, eth2, ...)."""
        if self.stack == "rdma":
            return ["gvnic-1", *(f"rdma-{i}" for i in range(self.rdma_networks))]
        return [f"vpc{i + 1}" for i in range(self.gvnic_networks)]

    @property
    def pod_networks(self) -> list[tuple[str, str]]:
        """(interface, network) a pod attaches beside eth0. RDMA pods attach the RDMA NICs as
        eth2..eth9 and leave the node's second gVNIC (eth1) to the host (gpudirect-rdma/nccl-test.yaml)."""
        if self.stack == "rdma":
            return [(f"eth{i + 2}", f"rdma-{i}") for i in range(self.rdma_networks)]
        return [(f"eth{i + 1}", name) for i, name in enumerate(self.network_names)]


_LIBS = ("libraries", HOST_NVIDIA_LIB64, "/usr/local/nvidia/lib64")
_SYS = ("sys", "/sys", "/hostsysfs")
_PROC_SYS = ("proc-sys", "/proc/sys", "/hostprocsysfs")

TCPX = GpuDirect(
    stack="tcpx",
    net="GPUDirectTCPX",
    gvnic_networks=4,
    rdma_networks=0,
    mtu=8244,
    installer_name="nccl-tcpx-installer",
    installer_image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9",
    daemon=Daemon(
        name="tcpx-daemon",
        image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12",
        command=("/tcpgpudmarxd/build/app/tcpgpudmarxd",),
        args=("--gpu_nic_preset", "a3vm", "--gpu_shmem_type", "fd", "--uds_path", "/run/tcpx",
              "--setup_param", "--verbose 128 2 0 "),
        capabilities=("NET_ADMIN",),
        devices=_GPU_DEVICES,
        host_mounts=(_LIBS, _SYS, _PROC_SYS),
    ),
    trainer_mounts=(_LIBS,),
    # gpudirect-tcpx/nccl-config.yaml (run-nccl.sh): the plugin's interfaces, control device,
    # CPU bindings and chunk sizes; the daemon's socket directory is the pod's /run/tcpx.
    env={
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_ALGO": "Ring,Tree",
        "NCCL_PROTO": "Simple",
        "NCCL_CROSS_NIC": "0",
        "NCCL_NET_GDR_LEVEL": "PIX",
        "NCCL_P2P_PXN_LEVEL": "0",
        "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": "eth1,eth2,eth3,eth4",
        "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
        "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
        "NCCL_P2P_PCI_CHUNKSIZE": "524288",
        "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
        "NCCL_BUFFSIZE": "4194304",
        "NCCL_NSOCKS_PERTHREAD": "4",
        "NCCL_SOCKET_NTHREADS": "1",
        "NCCL_GPUDIRECTTCPX_TX_BINDINGS": "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177",
        "NCCL_GPUDIRECTTCPX_RX_BINDINGS": "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191",
        "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "500000",
        "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX": "/run/tcpx",
    },
    source=f"{GKE_TCPX_DOC}; {CEA} gpudirect-tcpx/",
)

# The "NCCL configs" of the installer release pinned below (v1.0.15, daemon v1.0.21; gpudirect-tcpxo/
# README.md "Jan 9, 2026", CEA above), as the release notes list them. Since v1.0.12 ("Aug 21,
# 2025") the guest config checker aborts a workload without NCCL_NVLSTREE_MAX_CHUNKSIZE=131072 and
# flags NCCL_ALGO and NCCL_NVLS_ENABLE=0 as unexpected (best-practice.md "Use NVLSTree and LL128"),
# so the list is taken whole rather than merged with older releases'. The notes write the library
# directory as /usr/local/tcpxo/lib64/ and say to replace it with where the workload mounts the
# installer's libraries.
TCPXO_RELEASE = "v1.0.15"
TCPXO_NOTES_LIB_DIR = "/usr/local/tcpxo/lib64/"
TCPXO_NCCL_CONFIGS: tuple[str, ...] = (
    "NCCL_FASTRAK_CTRL_DEV=eth0",
    "NCCL_FASTRAK_IFNAME=eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8",
    "NCCL_SOCKET_IFNAME=eth0",
    "NCCL_CROSS_NIC=0",
    "NCCL_PROTO=Simple,LL128",
    "NCCL_MIN_NCHANNELS=4",
    "NCCL_TUNER_PLUGIN=libnccl-tuner.so",
    "NCCL_TUNER_CONFIG_PATH=/usr/local/tcpxo/lib64/a3plus_tuner_config.textproto",
    "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE=/usr/local/tcpxo/lib64/a3plus_guest_config.textproto",
    "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7",
    "NCCL_NVLSTREE_MAX_CHUNKSIZE=131072",
    "NCCL_P2P_NET_CHUNKSIZE=524288",
    "NCCL_P2P_PCI_CHUNKSIZE=524288",
    "NCCL_P2P_NVL_CHUNKSIZE=1048576",
    "NCCL_FASTRAK_NUM_FLOWS=2",
    "NCCL_FASTRAK_USE_SNAP=1",
    "NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS=600000",
    "NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL=0",
    "NCCL_BUFFSIZE=8388608",
    "NCCL_NET_GDR_LEVEL=PIX",
    "NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING=0",
    "NCCL_FASTRAK_USE_LLCM=1",
    "NCCL_NVLS_ENABLE=1",
    "NCCL_DEBUG=WARN",
    "NCCL_DEBUG_SUBSYS=INIT,NET,ENV,COLL,GRAPH",
)


def tcpxo_nccl_env(configs: tuple[str, ...], lib_dir: str) -> dict[str, str]:
    """The release's KEY=VALUE lines as an environment, with the notes' library directory
    replaced by the one the trainer mounts."""
    return dict(line.replace(TCPXO_NOTES_LIB_DIR, lib_dir).split("=", 1) for line in configs)


TCPXO = GpuDirect(
    stack="tcpxo",
    net="FasTrak",
    gvnic_networks=8,
    rdma_networks=0,
    mtu=8244,
    installer_name="nccl-tcpxo-installer",
    installer_image=f"us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:{TCPXO_RELEASE}",
    daemon=Daemon(
        name="tcpxo-daemon",
        image="us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21",
        command=("/bin/sh", "-c"),
        args=("chmod 755 /fts/entrypoint_rxdm_container.sh && exec /fts/entrypoint_rxdm_container.sh --num_hops=2",),
        capabilities=("NET_ADMIN", "NET_BIND_SERVICE"),
        devices=(*_GPU_DEVICES, "/dev/dmabuf_import_helper"),
        host_mounts=(_LIBS, _SYS, _PROC_SYS),
        # gpudirect-tcpxo/best-practice.md "Setup Startup Probe for the TCPXO-daemon Sidecar".
        health_check_file="/run/health-check",
    ),
    trainer_mounts=(_LIBS, ("aperture-devices", HOST_APERTURE_DEVICES, HOST_APERTURE_DEVICES)),
    # gpudirect-tcpxo/nccl-test-latest.yaml: the library path and the LLCM devices; then the NCCL
    # configs of the pinned installer's release (TCPXO_NCCL_CONFIGS), word for word.
    env={
        "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
        "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": HOST_APERTURE_DEVICES,
        **tcpxo_nccl_env(TCPXO_NCCL_CONFIGS, "/usr/local/nvidia/lib64/"),
    },
    source=f"{GKE_TCPX_DOC}; {CEA} gpudirect-tcpxo/",
)


def _rdma(tuner: str) -> GpuDirect:
    return GpuDirect(
        stack="rdma",
        net="gIB",
        gvnic_networks=1,
        rdma_networks=8,
        mtu=8896,
        installer_name="nccl-rdma-installer",
        installer_image="us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1",
        daemon=None,
        trainer_mounts=(("library-dir-host", HOST_NVIDIA, "/usr/local/nvidia"), ("gib", HOST_GIB, "/usr/local/gib")),
        # What /usr/local/gib/scripts/set_nccl_env.sh exports (gpudirect-rdma/nccl-test.yaml sources
        # it; GKE's "Run Ray on A4 / A3 Ultra" guide lists the values); NCCL_NET=gIB makes NCCL
        # fail rather than fall back to sockets when the plugin is missing.
        env={
            "LD_LIBRARY_PATH": "/usr/local/nvidia/lib64",
            "NCCL_NET": "gIB",
            # NCCL's bootstrap and torch's Gloo groups on the pod network: the pod has eth0 and
            # the RDMA NICs only (the node's second gVNIC, eth1, stays on the host: pod_networks),
            # so a list naming eth1 as well would name an interface these pods lack.
            "NCCL_SOCKET_IFNAME": "eth0",
            "GLOO_SOCKET_IFNAME": "eth0",
            "NCCL_CROSS_NIC": "0",
            "NCCL_NET_GDR_LEVEL": "PIX",
            "NCCL_P2P_NET_CHUNKSIZE": "131072",
            "NCCL_NVLS_CHUNKSIZE": "524288",
            "NCCL_IB_ADAPTIVE_ROUTING": "1",
            "NCCL_IB_QPS_PER_CONNECTION": "4",
            "NCCL_IB_TC": "52",
            "NCCL_IB_FIFO_TC": "84",
            "NCCL_TUNER_CONFIG_PATH": f"/usr/local/gib/configs/{tuner}",
        },
        source=f"{GKE_RDMA_DOC}; {CEA} gpudirect-rdma/",
        plugin_library="/usr/local/gib/lib64/libnccl-net.so",
    )


# Machine type -> its GPUDirect stack. The smaller A3 High types have no GPU NICs.
GPUDIRECT: dict[str, GpuDirect] = {
    "a3-highgpu-8g": TCPX,
    "a3-megagpu-8g": TCPXO,
    "a3-ultragpu-8g": _rdma("tuner_config_a3u.txtpb"),
    "a4-highgpu-8g": _rdma("tuner_config_a4.txtpb"),
}

"""The GPU fabric of each fast-interconnect shape: its published network bandwidth, the NCCL
network that carries it, and the bus-bandwidth floor the trainer's fabric gate holds a
multi-node job to (trainer.fabric, `--fabric-floor-gbps`).

The floor is FLOOR_FRACTION of the published bandwidth of the node's GPU NICs, in GB/s. A
multi-node all-reduce's bus bandwidth (nccl-tests' busbw) approaches the node's aggregate NIC
bandwidth when every rail is used (NVIDIA/nccl-tests doc/PERFORMANCE.md: busbw is comparable to
the hardware's peak). A quarter is far above the socket fallback (one primary NIC, a few GB/s:
"~4 GB/s vs ~340 GB/s with TCPXO" in NVIDIA AI Cluster Runtime's GKE TCPXO guide) and below what
a healthy two-node job reaches at the probe's 256 MiB, so the gate stops fallbacks and missing
rails without stopping healthy jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

FLOOR_FRACTION = 0.25

# NCCL's names for the networks (the ncclNet_t `name` it logs as "Using network <name>").
LIBFABRIC = "Libfabric"  # aws/aws-ofi-nccl over EFA
GPUDIRECT_TCPX = "GPUDirectTCPX"  # google/nccl-plugin-gpudirecttcpx (A3 High)
FASTRAK = "FasTrak"  # GPUDirect-TCPXO plugin (A3 Mega)
GIB = "gIB"  # Google's RDMA plugin over RoCE (A3 Ultra, A4)

EC2_SPECS = "EC2 instance types, accelerated computing: Network bandwidth (Gbps) with EFA"
GKE_BANDWIDTH = "GKE docs, Maximize GPU network bandwidth (machine types table: GPU NICs x Gbps)"


@dataclass(frozen=True)
class Fabric:
    network: str
    nic_gbps: int
    source: str

    @property
    def floor_gbps(self) -> float:
        """The bus bandwidth (GB/s) below which the fabric gate stops a job."""
        return round(self.nic_gbps / 8 * FLOOR_FRACTION, 2)


FABRICS: dict[str, Fabric] = {
    # AWS: every EFA shape of the catalog; the EFA figure is the instance's network bandwidth.
    "g4dn.8xlarge": Fabric(LIBFABRIC, 50, EC2_SPECS),
    "g4dn.12xlarge": Fabric(LIBFABRIC, 50, EC2_SPECS),
    "g4dn.16xlarge": Fabric(LIBFABRIC, 50, EC2_SPECS),
    "g4dn.metal": Fabric(LIBFABRIC, 100, EC2_SPECS),
    "g5.8xlarge": Fabric(LIBFABRIC, 25, EC2_SPECS),
    "g5.12xlarge": Fabric(LIBFABRIC, 40, EC2_SPECS),
    "g5.16xlarge": Fabric(LIBFABRIC, 25, EC2_SPECS),
    "g5.24xlarge": Fabric(LIBFABRIC, 50, EC2_SPECS),
    "g5.48xlarge": Fabric(LIBFABRIC, 100, EC2_SPECS),
    "g6.8xlarge": Fabric(LIBFABRIC, 25, EC2_SPECS),
    "g6.12xlarge": Fabric(LIBFABRIC, 40, EC2_SPECS),
    "g6.16xlarge": Fabric(LIBFABRIC, 25, EC2_SPECS),
    "g6.24xlarge": Fabric(LIBFABRIC, 50, EC2_SPECS),
    "g6.48xlarge": Fabric(LIBFABRIC, 100, EC2_SPECS),
    "g6e.8xlarge": Fabric(LIBFABRIC, 25, EC2_SPECS),
    "g6e.12xlarge": Fabric(LIBFABRIC, 100, EC2_SPECS),
    "g6e.16xlarge": Fabric(LIBFABRIC, 35, EC2_SPECS),
    "g6e.24xlarge": Fabric(LIBFABRIC, 200, EC2_SPECS),
    "g6e.48xlarge": Fabric(LIBFABRIC, 400, EC2_SPECS),
    "p4d.24xlarge": Fabric(LIBFABRIC, 400, EC2_SPECS),
    "p4de.24xlarge": Fabric(LIBFABRIC, 400, EC2_SPECS),
    "p5.48xlarge": Fabric(LIBFABRIC, 3200, EC2_SPECS),
    "p5e.48xlarge": Fabric(LIBFABRIC, 3200, EC2_SPECS),
    "p5en.48xlarge": Fabric(LIBFABRIC, 3200, EC2_SPECS),
    "p6-b200.48xlarge": Fabric(LIBFABRIC, 3200, EC2_SPECS),
    # GCP: the GPU NICs only (the primary gVNIC carries no NCCL traffic with GPUDirect).
    # A3 High: 4 x 200 Gbps; A3 Mega: 8 x 200 Gbps; A3 Ultra and A4: 8 x 400 Gbps CX-7 (RoCE).
    "a3-highgpu-8g": Fabric(GPUDIRECT_TCPX, 800, GKE_BANDWIDTH),
    "a3-megagpu-8g": Fabric(FASTRAK, 1600, GKE_BANDWIDTH),
    "a3-ultragpu-8g": Fabric(GIB, 3200, GKE_BANDWIDTH),
    "a4-highgpu-8g": Fabric(GIB, 3200, GKE_BANDWIDTH),
}

# libfabric's EFA provider (ofiwg/libfabric prov/efa, fi_efa(7)): FI_EFA_USE_DEVICE_RDMA=1 makes
# it use the device's RDMA read, which EFA offers on p4d and later (the EFA-with-EKS guide and
# aws-samples' nccl-tests manifests set it on p4d/p5); set on a device without RDMA read the
# provider refuses to start, so only these shapes get it. FI_EFA_FORK_SAFE=1: the data loader's
# workers fork after libfabric registered memory (fi_efa(7)).
EFA_RDMA_TYPES = frozenset({"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"})


def efa_env(instance_type: str) -> dict[str, str]:
    """NCCL and libfabric environment of a multi-node job on an EFA shape."""
    env = {"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1"}
    if instance_type in EFA_RDMA_TYPES:
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return env

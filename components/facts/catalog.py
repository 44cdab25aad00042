"""The GPU catalog: hardware facts as data, one table per cloud.

Everything that depends on hardware (spec validation, labels, Kueue quotas, autoscaler
templates, cost figures, MFU in the trainer) reads these tables; no other module spells out
a GPU count or a price. Facts come from the clouds' instance-type pages and NVIDIA's data
sheets (late 2026). Prices are reference list prices for planning, not quotes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Literal

Cloud = Literal["aws", "gcp"]

# Where the reference prices come from; printed beside every $ figure we show.
PRICE_NOTE = "estimate: on-demand list price, us-east-1 (AWS) / us-central1 (GCP), 2026-11"

# Kubernetes minor versions the platform has pins for (autoscaler images, EKS add-ons), all in the
# range kubernetes-validate bundles schemas for (1.25-1.37). Whether a minor is still in standard
# support is the table below's business.
SUPPORTED_KUBERNETES_VERSIONS: tuple[str, ...] = ("1.31", "1.32", "1.33", "1.34", "1.35")
# New clusters start here: in standard support on both clouds at the pins' date (late 2026).
DEFAULT_KUBERNETES_VERSION = "1.35"

# The day each minor leaves standard support, per cloud; after it EKS charges extended support
# (or upgrades, with upgrade policy STANDARD) and GKE moves clusters on. EKS: 14 months after
# release (EKS user guide, "Understand the Kubernetes version lifecycle on EKS", release calendar).
# GKE: about 14 months after availability in the Regular channel ("GKE versioning and support";
# "GKE release schedule", end of standard support column); dates not yet reached are Google's
# estimates as published late 2026.
STANDARD_SUPPORT_ENDS: dict[Cloud, dict[str, date]] = {
    "aws": {
        "1.31": date(2025, 11, 26),
        "1.32": date(2026, 3, 23),
        "1.33": date(2026, 7, 29),
        "1.34": date(2026, 12, 2),
        "1.35": date(2027, 3, 27),
    },
    "gcp": {
        "1.31": date(2026, 1, 16),
        "1.32": date(2026, 4, 11),
        "1.33": date(2026, 8, 3),
        "1.34": date(2026, 10, 1),
        "1.35": date(2027, 4, 11),
    },
}


def in_standard_support(cloud: Cloud, version: str, today: date) -> bool:
    """Whether `version` is still in `cloud`'s standard support on `today` (the end day is out)."""
    end = STANDARD_SUPPORT_ENDS[cloud].get(version)
    return end is not None and today < end


@dataclass(frozen=True)
class GpuModel:
    """One NVIDIA GPU model. `mig_profiles` maps a profile to instances per GPU (empty: no MIG)."""

    name: str
    memory_gib: int
    # Dense bf16 tensor peak (sparsity excluded). T4 has no bf16 units: its fp16 peak stands in.
    peak_bf16_tflops: float
    mig_profiles: dict[str, int]
    # Value of the `k8s.amazonaws.com/accelerator` node label (the lowercase NVIDIA product id).
    accelerator_label: str


# MIG profiles from NVIDIA's MIG user guide (supported profiles per GPU).
GPU_MODELS: dict[str, GpuModel] = {
    gpu.name: gpu
    for gpu in (
        GpuModel("T4", 16, 65.0, {}, "nvidia-tesla-t4"),
        GpuModel("A10G", 24, 70.0, {}, "nvidia-a10g"),
        GpuModel("L4", 24, 121.0, {}, "nvidia-l4"),
        GpuModel("L40S", 48, 362.0, {}, "nvidia-l40s"),
        GpuModel(
            "A100-40GB",
            40,
            312.0,
            {"1g.5gb": 7, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
            "nvidia-tesla-a100",
        ),
        GpuModel(
            "A100-80GB",
            80,
            312.0,
            {"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
            "nvidia-a100-80gb",
        ),
        GpuModel(
            "H100-80GB",
            80,
            989.0,
            {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
            "nvidia-h100-80gb",
        ),
        GpuModel(
            "H200-141GB",
            141,
            989.0,
            {"1g.18gb": 7, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1},
            "nvidia-h200-141gb",
        ),
        GpuModel(
            "B200-180GB",
            180,
            2250.0,
            {"1g.23gb": 7, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1, "7g.180gb": 1},
            "nvidia-b200",
        ),
    )
}


@dataclass(frozen=True)
class InstanceType:
    """A node shape a GPU pool can use.

    `gpu_counts` lists the GPU counts the shape can carry: one value for shapes with GPUs built
    in, several for GCP N1 machines, where T4s are attached (1, 2 or 4).
    """

    name: str
    cloud: Cloud
    gpu: str
    gpu_counts: tuple[int, ...]
    vcpus: int
    memory_gib: int
    # AWS: EFA interfaces; GCP: GPUDirect (TCPX/TCPXO/RDMA) networking.
    fast_interconnect: bool
    usd_per_hour: float
    # GKE `guest_accelerators[].type`; empty on AWS.
    gke_accelerator: str = ""
    # NVMe instance store: number of disks and GB each; (0, 0) for none. AWS only.
    instance_store: tuple[int, int] = (0, 0)

    @property
    def gpus_per_node(self) -> int:
        """The default GPU count: the built-in count, or the smallest attachable one."""
        return self.gpu_counts[0]

    @property
    def gpu_model(self) -> GpuModel:
        return GPU_MODELS[self.gpu]


def _aws(
    name: str, gpu: str, gpus: int, vcpus: int, mem: int, efa: bool, usd: float, store: tuple[int, int]
) -> InstanceType:
    return InstanceType(name, "aws", gpu, (gpus,), vcpus, mem, efa, usd, instance_store=store)


def _gcp(
    name: str,
    gpu: str,
    gpus: tuple[int, ...],
    vcpus: int,
    mem: int,
    gpudirect: bool,
    usd: float,
    accelerator: str,
) -> InstanceType:
    return InstanceType(name, "gcp", gpu, gpus, vcpus, mem, gpudirect, usd, accelerator)


# name, GPU, GPUs per node, vCPUs, memory GiB, EFA, $/h, NVMe instance store (disks, GB each). AWS
# instance type pages (accelerated computing); EFA support from the EC2 EFA supported-instance list;
# instance store from "Amazon EC2 instance types", accelerated computing, instance store
# specifications (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html#ac_instance-store):
# every NVIDIA type listed here has NVMe SSD instance store. The p5 family in GB as EC2
# DescribeInstanceTypes totals it (InstanceStorageInfo.TotalSizeInGB, which Karpenter labels
# karpenter.k8s.aws/instance-local-nvme: aws/karpenter-provider-aws
# website/content/en/docs/reference/instance-types.md, 30400 for p5/p5e/p5en/p6-b200.48xlarge, 3800
# for p5.4xlarge) over the spec pages' disk count (8 and 1): 8 x 3800 and 1 x 3800, where the spec
# pages print 3840.
_AWS_TYPES = (
    _aws("g4dn.xlarge", "T4", 1, 4, 16, False, 0.526, (1, 125)),
    _aws("g4dn.2xlarge", "T4", 1, 8, 32, False, 0.752, (1, 225)),
    _aws("g4dn.4xlarge", "T4", 1, 16, 64, False, 1.204, (1, 225)),
    _aws("g4dn.8xlarge", "T4", 1, 32, 128, True, 2.176, (1, 900)),
    _aws("g4dn.12xlarge", "T4", 4, 48, 192, True, 3.912, (1, 900)),
    _aws("g4dn.16xlarge", "T4", 1, 64, 256, True, 4.352, (1, 900)),
    _aws("g4dn.metal", "T4", 8, 96, 384, True, 7.824, (2, 900)),
    _aws("g5.xlarge", "A10G", 1, 4, 16, False, 1.006, (1, 250)),
    _aws("g5.2xlarge", "A10G", 1, 8, 32, False, 1.212, (1, 450)),
    _aws("g5.4xlarge", "A10G", 1, 16, 64, False, 1.624, (1, 600)),
    _aws("g5.8xlarge", "A10G", 1, 32, 128, True, 2.448, (1, 900)),
    _aws("g5.12xlarge", "A10G", 4, 48, 192, True, 5.672, (1, 3800)),
    _aws("g5.16xlarge", "A10G", 1, 64, 256, True, 4.096, (1, 1900)),
    _aws("g5.24xlarge", "A10G", 4, 96, 384, True, 8.144, (1, 3800)),
    _aws("g5.48xlarge", "A10G", 8, 192, 768, True, 16.288, (2, 3800)),
    _aws("g6.xlarge", "L4", 1, 4, 16, False, 0.805, (1, 250)),
    _aws("g6.2xlarge", "L4", 1, 8, 32, False, 0.978, (1, 450)),
    _aws("g6.4xlarge", "L4", 1, 16, 64, False, 1.323, (1, 600)),
    _aws("g6.8xlarge", "L4", 1, 32, 128, True, 2.014, (1, 900)),
    _aws("g6.12xlarge", "L4", 4, 48, 192, True, 4.602, (4, 940)),
    _aws("g6.16xlarge", "L4", 1, 64, 256, True, 3.397, (2, 940)),
    _aws("g6.24xlarge", "L4", 4, 96, 384, True, 6.675, (4, 940)),
    _aws("g6.48xlarge", "L4", 8, 192, 768, True, 13.350, (8, 940)),
    _aws("g6e.xlarge", "L40S", 1, 4, 32, False, 1.861, (1, 250)),
    _aws("g6e.2xlarge", "L40S", 1, 8, 64, False, 2.242, (1, 450)),
    _aws("g6e.4xlarge", "L40S", 1, 16, 128, False, 3.004, (1, 600)),
    _aws("g6e.8xlarge", "L40S", 1, 32, 256, True, 4.529, (1, 900)),
    _aws("g6e.12xlarge", "L40S", 4, 48, 384, True, 10.493, (2, 1900)),
    _aws("g6e.16xlarge", "L40S", 1, 64, 512, True, 7.577, (1, 1900)),
    _aws("g6e.24xlarge", "L40S", 4, 96, 768, True, 15.066, (2, 1900)),
    _aws("g6e.48xlarge", "L40S", 8, 192, 1536, True, 30.131, (4, 1900)),
    _aws("p4d.24xlarge", "A100-40GB", 8, 96, 1152, True, 21.958, (8, 1000)),
    _aws("p4de.24xlarge", "A100-80GB", 8, 96, 1152, True, 27.447, (8, 1000)),
    _aws("p5.4xlarge", "H100-80GB", 1, 16, 256, False, 6.880, (1, 3800)),
    _aws("p5.48xlarge", "H100-80GB", 8, 192, 2048, True, 55.040, (8, 3800)),
    _aws("p5e.48xlarge", "H200-141GB", 8, 192, 2048, True, 63.296, (8, 3800)),
    _aws("p5en.48xlarge", "H200-141GB", 8, 192, 2048, True, 63.296, (8, 3800)),
    _aws("p6-b200.48xlarge", "B200-180GB", 8, 192, 2048, True, 113.932, (8, 3800)),
)

# name, GPU, GPU counts, vCPUs, memory GiB, GPUDirect, $/h (GPU included), GKE accelerator.
# Compute Engine GPU machine types page; N1 prices are the machine plus its T4s at the minimum count.
_GCP_TYPES = (
    _gcp("g2-standard-4", "L4", (1,), 4, 16, False, 0.707, "nvidia-l4"),
    _gcp("g2-standard-8", "L4", (1,), 8, 32, False, 0.854, "nvidia-l4"),
    _gcp("g2-standard-12", "L4", (1,), 12, 48, False, 1.001, "nvidia-l4"),
    _gcp("g2-standard-16", "L4", (1,), 16, 64, False, 1.147, "nvidia-l4"),
    _gcp("g2-standard-24", "L4", (2,), 24, 96, False, 2.001, "nvidia-l4"),
    _gcp("g2-standard-32", "L4", (1,), 32, 128, False, 1.735, "nvidia-l4"),
    _gcp("g2-standard-48", "L4", (4,), 48, 192, False, 4.002, "nvidia-l4"),
    _gcp("g2-standard-96", "L4", (8,), 96, 384, False, 8.004, "nvidia-l4"),
    _gcp("a2-highgpu-1g", "A100-40GB", (1,), 12, 85, False, 3.673, "nvidia-tesla-a100"),
    _gcp("a2-highgpu-2g", "A100-40GB", (2,), 24, 170, False, 7.347, "nvidia-tesla-a100"),
    _gcp("a2-highgpu-4g", "A100-40GB", (4,), 48, 340, False, 14.694, "nvidia-tesla-a100"),
    _gcp("a2-highgpu-8g", "A100-40GB", (8,), 96, 680, False, 29.387, "nvidia-tesla-a100"),
    _gcp("a2-megagpu-16g", "A100-40GB", (16,), 96, 1360, False, 55.740, "nvidia-tesla-a100"),
    _gcp("a2-ultragpu-1g", "A100-80GB", (1,), 12, 170, False, 5.069, "nvidia-a100-80gb"),
    _gcp("a2-ultragpu-2g", "A100-80GB", (2,), 24, 340, False, 10.138, "nvidia-a100-80gb"),
    _gcp("a2-ultragpu-4g", "A100-80GB", (4,), 48, 680, False, 20.275, "nvidia-a100-80gb"),
    _gcp("a2-ultragpu-8g", "A100-80GB", (8,), 96, 1360, False, 40.550, "nvidia-a100-80gb"),
    _gcp("a3-highgpu-1g", "H100-80GB", (1,), 26, 234, False, 11.061, "nvidia-h100-80gb"),
    _gcp("a3-highgpu-2g", "H100-80GB", (2,), 52, 468, False, 22.123, "nvidia-h100-80gb"),
    _gcp("a3-highgpu-4g", "H100-80GB", (4,), 104, 936, False, 44.245, "nvidia-h100-80gb"),
    _gcp("a3-highgpu-8g", "H100-80GB", (8,), 208, 1872, True, 88.490, "nvidia-h100-80gb"),
    _gcp("a3-megagpu-8g", "H100-80GB", (8,), 208, 1872, True, 92.400, "nvidia-h100-mega-80gb"),
    _gcp("a3-ultragpu-8g", "H200-141GB", (8,), 224, 2952, True, 84.806, "nvidia-h200-141gb"),
    _gcp("a4-highgpu-8g", "B200-180GB", (8,), 224, 3968, True, 113.200, "nvidia-b200"),
    _gcp("n1-standard-4", "T4", (1, 2, 4), 4, 15, False, 0.540, "nvidia-tesla-t4"),
    _gcp("n1-standard-8", "T4", (1, 2, 4), 8, 30, False, 0.730, "nvidia-tesla-t4"),
    _gcp("n1-standard-16", "T4", (1, 2, 4), 16, 60, False, 1.110, "nvidia-tesla-t4"),
    _gcp("n1-standard-32", "T4", (1, 2, 4), 32, 120, False, 1.870, "nvidia-tesla-t4"),
    _gcp("n1-highmem-8", "T4", (1, 2, 4), 8, 52, False, 0.823, "nvidia-tesla-t4"),
)

INSTANCE_TYPES: dict[str, InstanceType] = {t.name: t for t in (*_AWS_TYPES, *_GCP_TYPES)}

# Shapes people reach for that cannot serve an NVIDIA pool, with the reason we tell them.
NOT_NVIDIA: dict[str, str] = {
    "g4ad": "AMD Radeon Pro V520 GPUs, not NVIDIA",
    "inf1": "AWS Inferentia (Neuron), not NVIDIA GPUs",
    "inf2": "AWS Inferentia2 (Neuron), not NVIDIA GPUs",
    "trn1": "AWS Trainium (Neuron), not NVIDIA GPUs",
    "trn1n": "AWS Trainium (Neuron), not NVIDIA GPUs",
    "trn2": "AWS Trainium2 (Neuron), not NVIDIA GPUs",
    "ct5lp": "Google TPU v5e machines, not NVIDIA GPUs",
    "ct6e": "Google TPU v6e machines, not NVIDIA GPUs",
}


def family(instance_type: str) -> str:
    """The family part of a type name: `g6` of `g6.xlarge`, `a3` of `a3-highgpu-8g`."""
    return instance_type.replace("-", ".").split(".")[0]


def instance_types(cloud: Cloud) -> list[str]:
    return sorted(name for name, t in INSTANCE_TYPES.items() if t.cloud == cloud)

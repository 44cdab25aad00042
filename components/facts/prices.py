"""Reference prices of what a stack runs besides its GPU nodes, for the whole-stack $/hour.

Estimates for planning, not quotes: on-demand list prices in us-east-1 (AWS) and us-central1
(GCP), read from each service's pricing page on the date below, as the GPU instance prices in
components.facts.catalog are. Monthly prices are turned into hourly ones over 730 hours, as both
clouds' calculators do. What is billed by use (data processed, objects stored, requests) has
no hourly price and is listed apart (USAGE_BASED).
"""

from __future__ import annotations

from dataclasses import dataclass

PRICE_DATE = "2026-11"
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class Price:
    item: str
    usd_per_hour: float
    # As the pricing page states it, e.g. "$1 per key-month".
    listed: str
    source: str


def _monthly(usd: float) -> float:
    return usd / HOURS_PER_MONTH


_EC2 = "aws.amazon.com/ec2/pricing/on-demand (Linux, us-east-1)"
_GCE = "cloud.google.com/compute/vm-instance-pricing (us-central1)"

# CPU instance types for system nodes (the spec's defaults and their usual neighbours).
SYSTEM_INSTANCES: dict[str, Price] = {
    p.item: p
    for p in (
        Price("m6i.large", 0.096, "$0.096/h", _EC2),
        Price("m6i.xlarge", 0.192, "$0.192/h", _EC2),
        Price("m6i.2xlarge", 0.384, "$0.384/h", _EC2),
        Price("m5.large", 0.096, "$0.096/h", _EC2),
        Price("m5.xlarge", 0.192, "$0.192/h", _EC2),
        Price("m7i.large", 0.1008, "$0.1008/h", _EC2),
        Price("m7i.xlarge", 0.2016, "$0.2016/h", _EC2),
        Price("t3.large", 0.0832, "$0.0832/h", _EC2),
        Price("t3.xlarge", 0.1664, "$0.1664/h", _EC2),
        Price("c6i.large", 0.085, "$0.085/h", _EC2),
        Price("e2-standard-2", 0.067006, "$0.067006/h", _GCE),
        Price("e2-standard-4", 0.134012, "$0.134012/h", _GCE),
        Price("e2-standard-8", 0.268024, "$0.268024/h", _GCE),
        Price("n2-standard-2", 0.097118, "$0.097118/h", _GCE),
        Price("n2-standard-4", 0.194236, "$0.194236/h", _GCE),
        Price("n2-standard-8", 0.388472, "$0.388472/h", _GCE),
    )
}

EKS_CLUSTER = Price("EKS cluster (standard support)", 0.10, "$0.10 per cluster-hour", "aws.amazon.com/eks/pricing")
NAT_GATEWAY = Price("NAT gateway", 0.045, "$0.045 per gateway-hour", "aws.amazon.com/vpc/pricing")
PUBLIC_IPV4 = Price("public IPv4 address", 0.005, "$0.005 per address-hour", "aws.amazon.com/vpc/pricing")
KMS_KEY = Price("KMS key", _monthly(1.0), "$1 per key-month", "aws.amazon.com/kms/pricing")
EBS_GP3_GIB = Price("EBS gp3 volume, per GiB", _monthly(0.08), "$0.08 per GB-month", "aws.amazon.com/ebs/pricing")
GKE_CLUSTER = Price(
    "GKE cluster management fee",
    0.10,
    "$0.10 per cluster-hour (a monthly free-tier credit covers one zonal or Autopilot cluster per billing account)",
    "cloud.google.com/kubernetes-engine/pricing",
)
# Per VM using the gateway, up to 32 VMs; a flat rate above (Cloud NAT pricing, gateway uptime).
CLOUD_NAT_PER_VM = Price("Cloud NAT, per VM (up to 32)", 0.0014, "$0.0014 per VM-hour", "cloud.google.com/nat/pricing")
CLOUD_NAT_FLAT = Price("Cloud NAT, above 32 VMs", 0.044, "$0.044 per gateway-hour", "cloud.google.com/nat/pricing")
CLOUD_NAT_VM_LIMIT = 32
PD_BALANCED_GB = Price(
    "pd-balanced disk, per GB", _monthly(0.10), "$0.10 per GB-month", "cloud.google.com/compute/disks-image-pricing"
)
# GKE node boot disks where the wing sets none: 100 GB pd-balanced (google_container_node_pool
# node_config.disk_size_gb and disk_type defaults).
GKE_BOOT_DISK_GB = 100

# Billed by use, so without an hourly figure: named under the whole-stack table.
USAGE_BASED: dict[str, tuple[str, ...]] = {
    "aws": (
        "NAT data processed ($0.045/GB)",
        "S3 storage and requests",
        "EFS storage ($0.30/GB-month standard)",
        "ECR image storage ($0.10/GB-month)",
        "data transfer out",
    ),
    "gcp": (
        "Cloud NAT data processed ($0.045/GB) and its external IPs",
        "Cloud Storage storage and operations",
        "Artifact Registry storage",
        "network egress",
    ),
    "existing": ("the existing cluster's nodes and services: not this stack's to price",),
}


def cloud_nat_per_hour(vms: int) -> float:
    """One Cloud NAT gateway's hourly price with `vms` VMs behind it."""
    if vms > CLOUD_NAT_VM_LIMIT:
        return CLOUD_NAT_FLAT.usd_per_hour
    return vms * CLOUD_NAT_PER_VM.usd_per_hour

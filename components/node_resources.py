"""What one node of a GPU pool offers a job: extended resources, and the CPU and memory left
after the node's reserved share and the DaemonSets the stack runs there.

Pure functions and data tables. The AWS wing's scale-from-zero tags, the JobSet renderer and the
fit proof (components.checks.fit) all read them, so a job never asks for something its node's template
does not advertise. The fit proof recomputes a node's offer from the synthesized resources
instead of the spec, so a derivation that disagrees with what is declared shows up there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.facts import aws as aws_facts
from components.facts import catalog
from components.facts import karpenter as karpenter_facts
from components.pools import GPU_RESOURCE, Pool, gpudirect_of
from components.spec import NodePoolSpec, PlatformSpec
from components.spec.karpenter_rules import karpenter_provisions
from components.spec.models import Cloud

# Advertised by the EFA device plugin, one per EFA interface of the node
# (aws/eks-charts stable/aws-efa-k8s-device-plugin).
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# Pre-allocated 2 MiB huge pages, as the kubelet advertises them (kubernetes.io, "Manage HugePages").
HUGEPAGES_2MI_RESOURCE = "hugepages-2Mi"

MIB = 1024 * 1024


@dataclass(frozen=True)
class Requests:
    """CPU in millicores and memory in MiB: what a pod requests or a node has left."""

    cpu_m: int
    memory_mib: int

    def __add__(self, other: Requests) -> Requests:
        return Requests(self.cpu_m + other.cpu_m, self.memory_mib + other.memory_mib)

    def __sub__(self, other: Requests) -> Requests:
        return Requests(self.cpu_m - other.cpu_m, self.memory_mib - other.memory_mib)

    def fits_in(self, other: Requests) -> bool:
        return self.cpu_m <= other.cpu_m and self.memory_mib <= other.memory_mib


NOTHING = Requests(0, 0)


@dataclass(frozen=True)
class EfaInterface:
    """One EFA network interface of a node's launch template (EC2 network cards)."""

    network_card_index: int
    device_index: int
    interface_type: str


def efa_interfaces(instance_type: str) -> list[EfaInterface]:
    """One EFA per network card: an EFA-with-ENA primary, EFA-only on every further card."""
    cards = aws_facts.EFA_NETWORK_CARDS.get(instance_type, 1)
    return [EfaInterface(0, 0, "efa")] + [EfaInterface(card, 1, "efa-only") for card in range(1, cards)]


def installs_device_plugin(spec: PlatformSpec) -> bool:
    """Only for `devicePlugin: nvidia`: a second nvidia.com/gpu advertiser on a node breaks GPUs."""
    return spec.device_plugin == "nvidia"


def extended_resources(pool: Pool, spec_pool: NodePoolSpec) -> dict[str, int]:
    """The extended resources one node of `pool` advertises, which is also the most a job's pod
    there may request: GPU slots (GPUs x sharing replicas or MIG instances) and, on AWS EFA
    pools, one EFA device per interface of the launch template (components.aws.plan)."""
    resources = {GPU_RESOURCE: pool.slots_per_node}
    if spec_pool.efa and pool.instance_type is not None:
        resources[EFA_RESOURCE] = len(efa_interfaces(pool.instance_type.name))
    return resources


def template_resources(pool: Pool, spec_pool: NodePoolSpec) -> dict[str, int | str]:
    """What the autoscaler's scale-from-zero template must be told beside the instance type: the
    extended resources, and on EFA pools the pre-allocated huge pages as a quantity. The template's
    capacity knows only CPU, memory, pods and GPUs (cluster-autoscaler cloudprovider/aws
    aws_manager.go buildNodeFromTemplate, extractAllocatableResourcesFromAsg parses each tag with
    resource.ParseQuantity): without the tag a pod requesting hugepages-2Mi never triggers a
    scale-up from zero."""
    resources: dict[str, int | str] = dict(extended_resources(pool, spec_pool))
    if spec_pool.efa and pool.instance_type is not None:
        resources[HUGEPAGES_2MI_RESOURCE] = memory_quantity(efa_hugepages_mib(pool.instance_type))
    return resources


# --- the node's reserved share ----------------------------------------------------------------

# kubelet `evictionHard: memory.available<100Mi` on both clouds: EKS AL2023 nodeadm's default
# kubelet config and GKE (cluster-autoscaler/cloudprovider/gce/reserved.go, KubeletEvictionHardMemory).
EVICTION_HARD_MIB = 100

# Memory the kernel keeps before the kubelet counts capacity: a share of RAM plus a fixed part,
# plus 64 MiB of software IO TLB above 3 GiB. The cluster autoscaler's estimate for GCE nodes
# (cluster-autoscaler/cloudprovider/gce/reserved.go, CalculateKernelReserved) takes 1/64 of RAM
# and 16 MiB, used for GKE. On EC2 published node dumps miss more of the nominal memory before the
# kubelet counts it: an m5.2xlarge (32768 MiB) on AL2023 reports allocatable 31458488Ki with 58 pods
# (awslabs/amazon-eks-ami#2367), capacity 31714 MiB once nodeadm's 893 MiB kube-reserved and the
# 100 MiB eviction threshold are added back, 1054 MiB (3.2%) missing; a g5.8xlarge (131072 MiB)
# reports capacity 130461372Ki (aws/aws-k8s-tester#471, Bottlerocket), 3668 MiB (2.8%) missing; a
# p5.48xlarge (2097152 MiB) reports capacity 2097112716Ki (shimomut/sagemaker-solutions
# hyperpod_k8s/README.md), 49191 MiB (2.35%) missing. The share falls with size, so a flat share
# that covers the small nodes keeps ~16 GiB too much on 2 TiB ones: 1/42 of RAM plus 576 MiB
# covers all three with the least to spare on the g5 (tests/kubernetes/test_node_resources.py holds
# the estimate to those figures, from both sides).
KERNEL_RESERVED_RATIO: dict[Cloud, int] = {"aws": 42, "gcp": 64, "existing": 64}
KERNEL_RESERVED_MIB: dict[Cloud, int] = {"aws": 576, "gcp": 16, "existing": 16}
SWIOTLB_MIB = 64
SWIOTLB_THRESHOLD_MIB = 3 * 1024

# What a job's pods leave of a node's computed allocatable on AWS: room for the node agents an
# organisation adds to every node beside ours (a security or audit agent, a log shipper; typical
# requests 100-250m CPU and 256-512 MiB each), so the job's pods still schedule on a node that
# runs two or three of them. A whole-node request exact to the estimate would stay Pending on such
# a node while the autoscaler's template, which counts capacity as allocatable, keeps saying it
# fits: scale-up without end.
JOB_MARGIN = Requests(500, 2048)

# kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of the third and fourth, 0.25%
# of every further core. The same ranges on EKS (awslabs/amazon-eks-ami nodeadm
# internal/kubelet/config.go, getCPUMillicoresToReserve) and GKE ("GKE node sizing", node
# allocatable). Upper bound of each range in millicores, and the share of it in 1/10000.
CPU_RESERVED_RANGES: tuple[tuple[int | None, int], ...] = ((1000, 600), (2000, 100), (4000, 50), (None, 25))

# EKS AL2023 kube-reserved memory is 11 MiB per pod the node may run plus 255 MiB (nodeadm
# getMemoryMebibytesToReserve). The pod count is the VPC CNI's ENI limit, capped by EKS managed
# node groups at 110 pods below 30 vCPUs and 250 from 30 (EKS user guide, "Amazon EKS recommended
# maximum Pods for each Amazon EC2 instance type"); the caps are used as an upper bound.
EKS_MEMORY_PER_POD_MIB = 11
EKS_MEMORY_BASE_MIB = 255
EKS_MAX_PODS_SMALL = 110
EKS_MAX_PODS_LARGE = 250
EKS_LARGE_NODE_VCPUS = 30

# GKE reserved memory: 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next
# 112 and 2% above 128 GiB ("GKE node sizing", memory and CPU reservations). Upper bound in GiB,
# share in percent.
GKE_MEMORY_RESERVED_RANGES: tuple[tuple[int | None, int], ...] = ((4, 25), (8, 20), (16, 10), (128, 6), (None, 2))


def _tiered(total: int, ranges: tuple[tuple[int | None, int], ...], scale: int) -> int:
    """Σ share x the part of `total` within each range (shares in 1/`scale`)."""
    reserved, start = 0, 0
    for end, share in ranges:
        upper = total if end is None else min(total, end)
        if upper > start:
            reserved += (upper - start) * share // scale
        start = end if end is not None else total
    return reserved


def kernel_reserved_mib(memory_mib: int, cloud: Cloud = "gcp") -> int:
    reserved = memory_mib // KERNEL_RESERVED_RATIO[cloud] + KERNEL_RESERVED_MIB[cloud]
    return reserved + SWIOTLB_MIB if memory_mib > SWIOTLB_THRESHOLD_MIB else reserved


def cpu_reserved_m(vcpus: int) -> int:
    return _tiered(vcpus * 1000, CPU_RESERVED_RANGES, 10000)


def eks_max_pods(vcpus: int) -> int:
    return EKS_MAX_PODS_LARGE if vcpus >= EKS_LARGE_NODE_VCPUS else EKS_MAX_PODS_SMALL


def eks_memory_reserved_mib(vcpus: int) -> int:
    return EKS_MEMORY_PER_POD_MIB * eks_max_pods(vcpus) + EKS_MEMORY_BASE_MIB


def gke_memory_reserved_mib(memory_mib: int) -> int:
    ranges = tuple((None if end is None else end * 1024, share) for end, share in GKE_MEMORY_RESERVED_RANGES)
    return _tiered(memory_mib, ranges, 100)


def efa_hugepages(shape: catalog.InstanceType) -> int:
    """The 2 MiB huge pages an EFA node of `shape` reserves at boot: a share per vCPU, so a
    192-vCPU node holds four times the EKS guide's flat 5128 (aws_facts.EFA_HUGEPAGES_2MI_PER_VCPU)."""
    return aws_facts.EFA_HUGEPAGES_2MI_PER_VCPU * shape.vcpus + aws_facts.EFA_HUGEPAGES_2MI_EXTRA


def efa_hugepages_mib(shape: catalog.InstanceType) -> int:
    return efa_hugepages(shape) * aws_facts.HUGEPAGE_2MI_MIB


def allocatable(cloud: Cloud, shape: catalog.InstanceType, efa: bool = False) -> Requests:
    """What the kubelet of a fresh node of `shape` reports as allocatable, conservatively. On an
    EFA node the pre-allocated huge pages are no memory: the kubelet takes them off allocatable
    memory and advertises them as hugepages-2Mi (kubernetes.io, "Manage HugePages"; KEP 20190129
    hugepages: Allocatable = Capacity - reserved - eviction threshold - pre-allocated huge pages)."""
    memory = shape.memory_gib * 1024
    reserved = eks_memory_reserved_mib(shape.vcpus) if cloud == "aws" else gke_memory_reserved_mib(memory)
    return Requests(
        shape.vcpus * 1000 - cpu_reserved_m(shape.vcpus),
        memory - kernel_reserved_mib(memory, cloud) - reserved - EVICTION_HARD_MIB - (efa_hugepages_mib(shape) if efa else 0),
    )


# --- DaemonSets on GPU nodes -------------------------------------------------------------------

# What each DaemonSet the stack runs on GPU nodes requests per node. Chart defaults where the
# chart sets requests; estimates, marked, where nothing upstream says.
DAEMONSET_REQUESTS: dict[str, Requests] = {
    # nvidia-device-plugin chart 0.20.0 `resources: {}`, shared by the plugin, gpu-feature-discovery
    # and the MPS control daemon (tests/data/charts/nvidia-device-plugin-0.20.0.defaults.json).
    "nvidia-device-plugin": NOTHING,
    "gpu-feature-discovery": NOTHING,
    "nvidia-mps-control-daemon": NOTHING,
    # node-feature-discovery chart 0.19.0 (the device plugin chart's dependency) worker.resources.
    "node-feature-discovery-worker": Requests(5, 64),
    # dcgm-exporter chart 4.8.2 resources.requests (tests/data/charts/dcgm-exporter-4.8.2.defaults.json).
    "dcgm-exporter": Requests(100, 128),
    # aws/eks-charts stable/aws-efa-k8s-device-plugin values.yaml resources.requests.
    "aws-efa-k8s-device-plugin": Requests(10, 20),
    # EKS add-ons. aws-node: aws/amazon-vpc-cni-k8s charts/aws-vpc-cni values.yaml requests 25m for
    # the CNI and (estimate) 25m for its network policy agent container.
    "aws-node": Requests(50, 0),
    # kube-proxy add-on DaemonSet: 100m CPU (EKS "kube-proxy" add-on manifest).
    "kube-proxy": Requests(100, 0),
    # kubernetes-sigs/aws-ebs-csi-driver chart node DaemonSet: 10m / 40Mi for each of its three
    # containers (plugin, node-driver-registrar, liveness probe).
    "ebs-csi-node": Requests(30, 120),
    # kubernetes-sigs/aws-efs-csi-driver chart: node.resources {} by default; estimate: the
    # chart's suggested 100m / 128Mi, in case the add-on sets them.
    "efs-csi-node": Requests(100, 128),
    # GKE GPUDirect: the NCCL plugin installers and the NRI device injector request 150m CPU each
    # (container-engine-accelerators gpudirect-*/nccl-*-installer.yaml, the installing init
    # container; nri_device_injector/nri-device-injector.yaml); their pause containers ask nothing.
    "nccl-tcpx-installer": Requests(150, 0),
    "nccl-tcpxo-installer": Requests(150, 0),
    "nccl-rdma-installer": Requests(150, 0),
    "device-injector": Requests(150, 0),
    # GKE's own DaemonSets on a GPU node of a Dataplane V2 cluster (anetd, fluentbit-gke,
    # gke-metrics-agent, pdcsi-node, netd, nvidia-gpu-device-plugin, gcsfusecsi-node, managed DCGM).
    # GKE does not publish their requests: estimate, check with `kubectl describe node`.
    "gke-system": Requests(600, 1024),
}

# The EKS add-on behind each add-on DaemonSet (aws:eks/addon:Addon addonName).
EKS_ADDON_DAEMONSETS: dict[str, str] = {
    "vpc-cni": "aws-node",
    "kube-proxy": "kube-proxy",
    "aws-ebs-csi-driver": "ebs-csi-node",
    "aws-efs-csi-driver": "efs-csi-node",
}
# The add-ons the AWS wing installs whose DaemonSets tolerate every taint (components.aws.cluster).

def karpenter_allocatable(
    shape: catalog.InstanceType,
    max_pods: int | None = None,
    kube_reserved: Requests | None = None,
    system_reserved: Requests = Requests(0, 0),
    eviction_mib: int = karpenter_facts.EVICTION_HARD_MEMORY_MIB,
) -> Requests:
    """Allocatable as Karpenter predicts it before launching a node (facts.karpenter): memory less
    the VM overhead, kube-reserved (11 MiB per pod + 255 MiB, the CPU tiers), system-reserved and
    the hard eviction threshold. Karpenter launches only where a pod fits this prediction. Pods:
    the EC2NodeClass's kubelet.maxPods, else the EKS figure, an upper bound of the ENI-limited
    count Karpenter takes on AL2023 (more pods reserve more memory)."""
    pods = max_pods or eks_max_pods(shape.vcpus)
    memory = shape.memory_gib * 1024
    memory -= math.ceil(memory * karpenter_facts.VM_MEMORY_OVERHEAD_PERCENT)
    reserved = kube_reserved or Requests(
        cpu_reserved_m(shape.vcpus),
        karpenter_facts.KUBE_RESERVED_MEMORY_PER_POD_MIB * pods + karpenter_facts.KUBE_RESERVED_MEMORY_BASE_MIB,
    )
    return Requests(shape.vcpus * 1000, memory - eviction_mib) - reserved - system_reserved


EKS_ADDONS = ("vpc-cni", "kube-proxy", "aws-ebs-csi-driver", "aws-efs-csi-driver")
DEVICE_PLUGIN_DAEMONSETS = ("nvidia-device-plugin", "gpu-feature-discovery", "node-feature-discovery-worker")


def gpu_node_daemonsets(spec: PlatformSpec, pool: Pool, spec_pool: NodePoolSpec) -> list[str]:
    """The DaemonSets the spec puts on a node of `pool`: the GPU layer's node agents and the
    cloud's own. The fit proof derives the same list from the synthesized resources."""
    names: list[str] = []
    if installs_device_plugin(spec):
        names += DEVICE_PLUGIN_DAEMONSETS
        if pool.sharing_mode == "mps":
            names.append("nvidia-mps-control-daemon")
    if spec.cloud == "aws":
        names += [EKS_ADDON_DAEMONSETS[addon] for addon in EKS_ADDONS]
        if spec_pool.efa:
            names.append("aws-efa-k8s-device-plugin")
    if spec.cloud == "gcp":
        names.append("gke-system")
        family = gpudirect_of(spec, spec_pool)
        if family is not None:
            # components.gcp.gpudirect: the family's installer, and the injector for its daemon.
            names += [family.installer_name, *(["device-injector"] if family.daemon else [])]
    elif spec.monitoring.dcgm:
        # GKE collects DCGM metrics itself (infra.program); elsewhere the layer runs the exporter.
        names.append("dcgm-exporter")
    return names


def job_allocatable(spec: PlatformSpec, pool: Pool, spec_pool: NodePoolSpec) -> Requests | None:
    """CPU and memory a node of `pool` leaves to jobs; None on existing clusters, whose node
    sizes the spec does not state."""
    if pool.instance_type is None or spec.cloud == "existing":
        return None
    taken = sum((DAEMONSET_REQUESTS[name] for name in gpu_node_daemonsets(spec, pool, spec_pool)), NOTHING)
    node = allocatable(spec.cloud, pool.instance_type, efa=spec.cloud == "aws" and spec_pool.efa)
    if karpenter_provisions(spec, spec_pool):
        # A pod must fit Karpenter's prediction to get a node launched, and the kubelet's to run.
        predicted = karpenter_allocatable(pool.instance_type)
        node = Requests(min(node.cpu_m, predicted.cpu_m), min(node.memory_mib, predicted.memory_mib))
    return node - taken - (JOB_MARGIN if spec.cloud == "aws" else NOTHING)


def hugepages_request_mib(spec: PlatformSpec, spec_pool: NodePoolSpec, efa_devices: int) -> int:
    """The hugepages-2Mi a pod requests (request = limit): the EKS EFA guide's figure when it claims
    EFA devices on a node-group pool, else none. Karpenter never provisions EFA pools
    (karpenter_provisions), and could not for such a pod: it models no huge pages
    (kubernetes-sigs/karpenter#751)."""
    if not efa_devices or spec.cloud != "aws" or karpenter_provisions(spec, spec_pool):
        return 0
    return aws_facts.EFA_HUGEPAGES_REQUEST_MIB


def share(node: Requests, slots: int, slots_per_node: int) -> Requests:
    """A pod's part of a node in proportion to the GPU slots it takes, rounded down."""
    return Requests(node.cpu_m * slots // slots_per_node, node.memory_mib * slots // slots_per_node)


def cpu_quantity(millicores: int) -> str:
    return f"{millicores}m"


def memory_quantity(mib: int) -> str:
    return f"{mib}Mi"

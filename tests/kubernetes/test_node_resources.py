"""What a node of a pool offers jobs: extended resources, reserved share, DaemonSets."""

from __future__ import annotations

import pytest
from k8s_support import REPO, chart_defaults

from components import node_resources
from components.checks.quantities import cpu_millicores, memory_mib
from components.facts import aws as aws_facts
from components.facts import catalog, charts
from components.jobs import renderer
from components.node_resources import DAEMONSET_REQUESTS, EFA_RESOURCE, Requests, efa_interfaces
from components.pools import derive_pools
from infra import stackfile


def pools(stack: str):
    spec = stackfile.read(stack, REPO).spec()
    return spec, {p.name: (p, sp) for p, sp in zip(derive_pools(spec), spec.node_pools)}


def test_a_time_sliced_node_advertises_gpus_times_replicas() -> None:
    _, by_name = pools("dev-aws")
    assert node_resources.extended_resources(*by_name["l4-shared"]) == {"nvidia.com/gpu": 4}


def test_an_efa_node_advertises_one_efa_device_per_interface_of_its_launch_template() -> None:
    _, by_name = pools("prod-aws")
    assert node_resources.extended_resources(*by_name["h100-train"]) == {
        "nvidia.com/gpu": 8,
        EFA_RESOURCE: len(efa_interfaces("p5.48xlarge")),
    }
    assert EFA_RESOURCE not in node_resources.extended_resources(*by_name["l4-eval"])


def test_kube_reserved_cpu_follows_the_eks_and_gke_ranges() -> None:
    # 6% of core 1, 1% of core 2, 0.5% of cores 3-4, 0.25% of the rest.
    assert [node_resources.cpu_reserved_m(n) for n in (1, 2, 4, 8, 192)] == [60, 70, 80, 90, 550]


def test_eks_reserves_memory_per_pod_up_to_the_managed_node_group_pod_cap() -> None:
    assert node_resources.eks_memory_reserved_mib(4) == 11 * 110 + 255
    assert node_resources.eks_memory_reserved_mib(192) == 11 * 250 + 255


def test_gke_reserves_memory_by_tiers() -> None:
    # 25% of 4 GiB + 20% of 4 GiB + 10% of 8 GiB on a 16 GiB machine.
    assert node_resources.gke_memory_reserved_mib(16 * 1024) == 1024 + 819 + 819
    # ... + 6% of 112 GiB + 2% of the 128 GiB above on a 256 GiB machine.
    assert node_resources.gke_memory_reserved_mib(256 * 1024) == 1024 + 819 + 819 + 6881 + 2621


def test_the_kernel_keeps_a_64th_of_memory_and_more_above_3_gib_on_gke() -> None:
    assert node_resources.kernel_reserved_mib(2048, "gcp") == 32 + 16
    assert node_resources.kernel_reserved_mib(16384, "gcp") == 256 + 16 + 64


KI = 1024

# Published figures of real EC2 nodes, in KiB as the kubelet reports them.
# awslabs/amazon-eks-ami#2367: m5.2xlarge, AL2023 20250807, kubelet "Allocatable" log line.
M5_2XLARGE = catalog.InstanceType("m5.2xlarge", "aws", "T4", (0,), 8, 32, False, 0.0)
M5_2XLARGE_ALLOCATABLE = Requests(7910, 31458488 // KI)
# Its capacity: allocatable plus nodeadm's kube-reserved for 58 pods (11 x 58 + 255) and eviction.
M5_2XLARGE_CAPACITY_MIB = 31458488 // KI + 11 * 58 + 255 + node_resources.EVICTION_HARD_MIB
# aws/aws-k8s-tester#471: g5.8xlarge, `kubectl describe node` (Bottlerocket).
G5_8XLARGE_CAPACITY_MIB = 130461372 // KI
G5_8XLARGE_ALLOCATABLE = Requests(31850, 127462076 // KI)
# shimomut/sagemaker-solutions hyperpod_k8s/README.md: a p5.48xlarge (192 CPUs, 8 GPUs, 32 EFA)
# `kubectl describe node` Capacity, EFA installer on the node.
P5_48XLARGE_CAPACITY_MIB = 2097112716 // KI
P5_48XLARGE_HUGEPAGES_2MI_MIB = 42242

PUBLISHED_CAPACITY = [
    pytest.param(M5_2XLARGE, M5_2XLARGE_CAPACITY_MIB, id="m5.2xlarge-amazon-eks-ami#2367"),
    pytest.param(catalog.INSTANCE_TYPES["g5.8xlarge"], G5_8XLARGE_CAPACITY_MIB, id="g5.8xlarge-aws-k8s-tester#471"),
    pytest.param(catalog.INSTANCE_TYPES["p5.48xlarge"], P5_48XLARGE_CAPACITY_MIB, id="p5.48xlarge-sagemaker-solutions"),
]


@pytest.mark.parametrize(
    ("shape", "published"),
    [(M5_2XLARGE, M5_2XLARGE_ALLOCATABLE), (catalog.INSTANCE_TYPES["g5.8xlarge"], G5_8XLARGE_ALLOCATABLE)],
    ids=["m5.2xlarge-amazon-eks-ami#2367", "g5.8xlarge-aws-k8s-tester#471"],
)
def test_the_aws_allocatable_estimate_is_no_more_than_a_published_node_reports(shape: catalog.InstanceType, published: Requests) -> None:
    assert node_resources.allocatable("aws", shape).fits_in(published)


def nominal_mib(shape: catalog.InstanceType) -> int:
    return shape.memory_gib * 1024


@pytest.mark.parametrize(("shape", "capacity_mib"), PUBLISHED_CAPACITY)
def test_the_aws_kernel_estimate_keeps_at_least_what_a_published_node_misses_of_its_nominal_memory(
    shape: catalog.InstanceType, capacity_mib: int
) -> None:
    assert nominal_mib(shape) - node_resources.kernel_reserved_mib(nominal_mib(shape), "aws") <= capacity_mib


@pytest.mark.parametrize(("shape", "capacity_mib"), PUBLISHED_CAPACITY)
def test_the_aws_kernel_estimate_keeps_little_more_than_a_published_node_misses(shape: catalog.InstanceType, capacity_mib: int) -> None:
    # At most 512 MiB or 1/400 of the nominal memory beyond the dump: a flat 1/32 kept 16 GiB more on the p5.
    spare = capacity_mib - (nominal_mib(shape) - node_resources.kernel_reserved_mib(nominal_mib(shape), "aws"))
    assert spare <= max(512, nominal_mib(shape) // 400)


def test_an_efa_node_s_huge_pages_estimate_is_what_a_published_p5_reports() -> None:
    assert node_resources.efa_hugepages_mib(catalog.INSTANCE_TYPES["p5.48xlarge"]) == P5_48XLARGE_HUGEPAGES_2MI_MIB


def test_an_efa_node_reserves_110_huge_pages_per_vcpu_and_one() -> None:
    assert node_resources.efa_hugepages(catalog.INSTANCE_TYPES["g5.8xlarge"]) == 110 * 32 + 1


def test_the_efa_guide_s_huge_pages_request_fits_the_smallest_efa_type() -> None:
    smallest = min((t for t in catalog.INSTANCE_TYPES.values() if t.cloud == "aws" and t.fast_interconnect), key=lambda t: t.vcpus)
    assert aws_facts.EFA_HUGEPAGES_REQUEST_MIB <= node_resources.efa_hugepages_mib(smallest)


def test_a_whole_node_p5_job_fits_what_the_published_p5_leaves_its_pods() -> None:
    spec, by_name = pools("prod-aws")
    pool, spec_pool = by_name["h100-train"]
    assert pool.instance_type is not None and pool.instance_type.name == "p5.48xlarge"
    request = renderer.JobRequest(
        pool="h100-train", nodes=2, gpus_per_node=8, team="research", tier="production", image="ghcr.io/acme/trainer:1.0.0",
        trainer_args=[
            "--preset", "small", "--max-steps", "100", "--checkpoint-every", "50", "--global-batch-size", "16",
            "--seq-len", "512", "--seed", "1", "--data", "/data/datasets/corpus",
        ],
    )
    jobset = renderer.render(spec, request)
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    requests = pod["containers"][0]["resources"]["requests"]
    daemonsets = sum((DAEMONSET_REQUESTS[d] for d in node_resources.gpu_node_daemonsets(spec, pool, spec_pool)), node_resources.NOTHING)
    # The dump's node as EKS runs it: capacity less huge pages, nodeadm's kube-reserved, eviction.
    left = (
        P5_48XLARGE_CAPACITY_MIB - P5_48XLARGE_HUGEPAGES_2MI_MIB - node_resources.eks_memory_reserved_mib(192)
        - node_resources.EVICTION_HARD_MIB - daemonsets.memory_mib
    )
    assert memory_mib(requests["memory"]) + node_resources.JOB_MARGIN.memory_mib <= left
    assert memory_mib(requests["hugepages-2Mi"]) <= P5_48XLARGE_HUGEPAGES_2MI_MIB


def test_the_gke_kernel_estimate_would_be_too_optimistic_on_ec2() -> None:
    shape = catalog.INSTANCE_TYPES["g5.8xlarge"]
    assert nominal_mib(shape) - node_resources.kernel_reserved_mib(nominal_mib(shape), "gcp") > G5_8XLARGE_CAPACITY_MIB


def test_existing_nodes_have_no_known_size() -> None:
    spec, by_name = pools("onprem")
    assert node_resources.job_allocatable(spec, *by_name["a100-train"]) is None


def test_an_aws_gpu_node_runs_the_layer_s_agents_and_the_eks_add_ons() -> None:
    spec, by_name = pools("prod-aws")
    assert sorted(node_resources.gpu_node_daemonsets(spec, *by_name["h100-train"])) == [
        "aws-efa-k8s-device-plugin", "aws-node", "dcgm-exporter", "ebs-csi-node", "efs-csi-node",
        "gpu-feature-discovery", "kube-proxy", "node-feature-discovery-worker", "nvidia-device-plugin",
    ]


def test_a_gke_gpu_node_runs_gke_s_own_agents_only() -> None:
    spec, by_name = pools("prod-gcp")
    assert node_resources.gpu_node_daemonsets(spec, *by_name["l4-eval"]) == ["gke-system"]


def test_a_gke_gpudirect_node_also_runs_its_family_s_installers() -> None:
    spec, by_name = pools("prod-gcp")
    assert node_resources.gpu_node_daemonsets(spec, *by_name["h100-train"]) == [
        "gke-system", "nccl-tcpx-installer", "device-injector",
    ]
    assert node_resources.gpu_node_daemonsets(spec, *by_name["h200-train"]) == ["gke-system", "nccl-rdma-installer"]


def test_a_pod_s_share_is_proportional_to_its_slots_and_rounded_down() -> None:
    assert node_resources.share(Requests(3535, 14000), 1, 4) == Requests(883, 3500)


def requests_of(defaults: dict) -> Requests:
    requests = (defaults.get("resources") or {}).get("requests") or {}
    return Requests(cpu_millicores(requests.get("cpu")), memory_mib(requests.get("memory")))


def test_the_dcgm_exporter_s_requests_are_its_chart_defaults() -> None:
    chart = charts.DCGM_EXPORTER
    assert DAEMONSET_REQUESTS["dcgm-exporter"] == requests_of(chart_defaults(chart.name, chart.version))


def test_the_device_plugin_s_daemonsets_request_what_its_chart_sets() -> None:
    chart = charts.NVIDIA_DEVICE_PLUGIN
    defaults = requests_of(chart_defaults(chart.name, chart.version))
    for name in ("nvidia-device-plugin", "gpu-feature-discovery", "nvidia-mps-control-daemon"):
        assert DAEMONSET_REQUESTS[name] == defaults


def test_quantities_read_as_kubernetes_spells_them() -> None:
    assert [cpu_millicores(q) for q in ("250m", "2", 2, None)] == [250, 2000, 2000, 0]
    assert [memory_mib(q) for q in ("256Mi", "1Gi", "1048576", "1G")] == [256, 1024, 1, 954]

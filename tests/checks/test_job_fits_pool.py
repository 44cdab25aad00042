"""`job-fits-pool`: the largest and smallest job of every pool, held against what the stack
declares. Each planted miss edits the synthesized resources the way a derivation bug would."""

from __future__ import annotations

import copy
import importlib.util
import json
from typing import Any, Callable, Iterator

import pytest
from helpers import REPO, platform_of
from pulumi.runtime import settings
from pulumi.runtime.config import set_all_config
from pulumi_policy import PolicyCustomTimeouts, PolicyResource, PolicyResourceOptions, StackValidationArgs
from pulumi_policy.proxy import unknown_checking_proxy

from components import node_resources
from components.aws import plan
from components.checks.fit import proof
from components.checks.rules import base, registry
from components.kubernetes import gpudirect_pod
from components.pools import derive_pools
from components.spec import parse_spec
from infra import cli, stackfile
from infra.synth import Synthesis

STACKS = ["dev-aws", "dev-aws-karpenter", "dev-gcp", "prod-aws", "prod-gcp", "onprem"]
Records = list[dict[str, Any]]
EFA_TAG = "k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa"


@pytest.fixture(scope="module")
def records(synthesized: Callable[[str], Synthesis]) -> Callable[[str], Records]:
    return lambda stack: copy.deepcopy(synthesized(stack).resources)


def misfits(stack: str, records: Records) -> list[str]:
    ctx = base.context_of(stackfile.read(stack, REPO).spec())
    return [v.message for v in registry.CHECKS["job-fits-pool"](base.from_synthesis(records), ctx)]


def find(records: Records, type_suffix: str, name: str) -> dict[str, Any]:
    return next(r for r in records if r["type"].endswith(type_suffix) and r["name"] == name)


@pytest.mark.parametrize("stack", STACKS)
def test_every_pool_s_largest_and_smallest_job_fits_the_example_stacks(stack: str, records: Callable[[str], Records]) -> None:
    assert misfits(stack, records(stack)) == []


def test_the_proof_renders_the_largest_and_the_smallest_job_each_pool_accepts() -> None:
    spec = stackfile.read("prod-aws", REPO).spec()
    pools = {p.name: p for p in derive_pools(spec)}
    shapes = [(r.nodes, r.gpus_per_node) for r in proof.proof_requests(spec, pools["h100-train"], "research")]
    assert shapes == [(8, 8), (1, 1)]


def test_a_shared_pool_s_largest_job_is_one_slot() -> None:
    spec = stackfile.read("dev-aws", REPO).spec()
    pool = next(p for p in derive_pools(spec) if p.name == "l4-shared")
    assert [(r.nodes, r.gpus_per_node) for r in proof.proof_requests(spec, pool, "research")] == [(1, 1)]


def test_a_removed_efa_template_tag_leaves_multi_node_efa_jobs_pending(records: Callable[[str], Records]) -> None:
    declared = [r for r in records("prod-aws") if r["name"] != f"ml-prod-h100-train:{EFA_TAG}"]
    assert misfits("prod-aws", declared) == [
        "pool h100-train, job 8 node(s) x 8 GPU(s): the autoscaler's template of node group ml-prod-h100-train "
        f"offers 0 vpc.amazonaws.com/efa (ASG tag {EFA_TAG}), a pod requests 32"
    ]


def test_a_renamed_template_label_is_a_misfit(records: Callable[[str], Records]) -> None:
    declared = records("prod-aws")
    find(declared, "tag:Tag", "ml-prod-l4-eval:k8s.io/cluster-autoscaler/node-template/label/gpu-platform.io/pool")["inputs"]["tag"]["value"] = "l4"
    assert misfits("prod-aws", declared) == [
        f"pool l4-eval, job {nodes} node(s) x 1 GPU(s): the autoscaler's template of node group ml-prod-l4-eval "
        "lacks the label gpu-platform.io/pool=l4-eval the pods select (it carries gpu-platform.io/pool=l4)"
        for nodes in (3, 1)
    ]


def test_a_renamed_node_label_leaves_no_node_for_the_pool(records: Callable[[str], Records]) -> None:
    declared = records("dev-gcp")
    find(declared, "nodePool:NodePool", "ml-dev-a100-mig")["inputs"]["nodeConfig"]["labels"]["gpu-platform.io/pool"] = "mig"
    found = misfits("dev-gcp", declared)
    assert "pool a100-mig, job 1 node(s) x 1 GPU(s): no node group or node pool has nodes labelled gpu-platform.io/pool=a100-mig" in found


def test_a_dropped_toleration_keeps_the_efa_device_plugin_off_the_gpu_nodes(records: Callable[[str], Records]) -> None:
    declared = records("prod-aws")
    find(declared, "helm.sh/v3:Release", "ml-prod-efa-device-plugin")["inputs"]["values"]["tolerations"] = []
    found = misfits("prod-aws", declared)
    assert (
        "pool h200-train, job 4 node(s) x 8 GPU(s): a node of node group ml-prod-h200-train offers 0 vpc.amazonaws.com/efa "
        "(its launch template's EFA interfaces, with the EFA device plugin running), a pod requests 16"
    ) in found
    assert len(found) == 2


def test_a_taint_the_jobs_do_not_tolerate_is_a_misfit(records: Callable[[str], Records]) -> None:
    declared = records("dev-aws")
    find(declared, "nodeGroup:NodeGroup", "ml-dev-l4-train")["inputs"]["taints"].append(
        {"key": "dedicated", "value": "smoke", "effect": "NO_SCHEDULE"}
    )
    found = misfits("dev-aws", declared)
    assert (
        "pool l4-train, job 2 node(s) x 4 GPU(s): a node of node group ml-dev-l4-train carries the taint "
        "dedicated=smoke:NoSchedule, which the pods do not tolerate"
    ) in found


def test_a_quota_too_small_for_the_largest_job_names_the_queue_and_figures(records: Callable[[str], Records]) -> None:
    declared = records("prod-aws")
    cohort = find(declared, "Cohort", "ml-prod-gpu-cohort")["inputs"]["spec"]
    next(f for f in cohort["resourceGroups"][0]["flavors"] if f["name"] == "h100-train")["resources"][0]["nominalQuota"] = 0
    assert misfits("prod-aws", declared) == [
        "pool h100-train, job 8 node(s) x 8 GPU(s), team research: ClusterQueue research holds 32 nvidia.com/gpu on "
        "flavor h100-train and may borrow 24, the job requests 64",
        "pool h100-train, job 8 node(s) x 8 GPU(s), team applied: ClusterQueue applied holds 24 nvidia.com/gpu on "
        "flavor h100-train and may borrow 32, the job requests 64",
    ]


def test_a_missing_local_queue_is_a_misfit(records: Callable[[str], Records]) -> None:
    declared = [r for r in records("dev-aws") if not (r["type"].endswith("LocalQueue") and r["name"] == "ml-dev-gpu-applied")]
    found = misfits("dev-aws", declared)
    assert "pool l4-train, job 1 node(s) x 1 GPU(s), team applied: no LocalQueue applied in namespace applied (label kueue.x-k8s.io/queue-name)" in found


def test_kueue_accounting_every_resource_needs_queues_that_cover_them(records: Callable[[str], Records]) -> None:
    declared = records("dev-aws")
    values = find(declared, "helm.sh/v3:Release", "ml-dev-gpu-kueue")["inputs"]["values"]["managerConfig"]
    values["controllerManagerConfigYaml"] = values["controllerManagerConfigYaml"].replace("IgnoreUndeclared", "Strict")
    found = misfits("dev-aws", declared)
    assert "pool l4-train, job 2 node(s) x 4 GPU(s), team research: ClusterQueue research does not cover cpu, which the job requests" in found


def test_too_little_memory_after_the_daemonsets_is_a_misfit(records: Callable[[str], Records]) -> None:
    declared = records("prod-aws")
    find(declared, "helm.sh/v3:Release", "ml-prod-gpu-dcgm-exporter")["inputs"]["values"]["resources"] = {
        "requests": {"cpu": "100m", "memory": "64Gi"}
    }
    found = misfits("prod-aws", declared)
    assert any(
        m.startswith("pool h100-train, job 8 node(s) x 8 GPU(s): a node of node group ml-prod-h100-train leaves ")
        and "Mi memory to pods after its reserved share and DaemonSets (" in m
        and "dcgm-exporter" in m
        for m in found
    ), found


def test_a_smaller_gke_machine_cannot_hold_the_pods_its_gpu_slots_promise(records: Callable[[str], Records]) -> None:
    declared = records("dev-gcp")
    find(declared, "nodePool:NodePool", "ml-dev-l4-shared")["inputs"]["nodeConfig"]["machineType"] = "g2-standard-4"
    assert misfits("dev-gcp", declared) == [
        "pool l4-shared, job 1 node(s) x 1 GPU(s): a node of node pool l4-shared leaves 3320m CPU to pods after its "
        "reserved share and DaemonSets (gke-system), the 4 pods its GPU slots hold request 7308m",
        "pool l4-shared, job 1 node(s) x 1 GPU(s): a node of node pool l4-shared leaves 12262Mi memory to pods after "
        "its reserved share and DaemonSets (gke-system), the 4 pods its GPU slots hold request 27404Mi",
    ]


def test_quota_the_nodes_cannot_hold_strands_admitted_jobs(records: Callable[[str], Records]) -> None:
    declared = records("onprem")
    plugin = find(declared, "helm.sh/v3:Release", "lab-gpu-nvidia-device-plugin")["inputs"]["values"]
    plugin["config"]["map"]["time-slicing-2"] = plugin["config"]["map"]["time-slicing-2"].replace("replicas: 2", "replicas: 1")
    assert misfits("onprem", declared) == [
        "pool l40s-shared, job 1 node(s) x 1 GPU(s): Kueue may admit 16 nvidia.com/gpu on flavor l40s-shared "
        "(the nominal quotas of its cohort), a node of pool l40s-shared (declared: gpu-platform.io/pool=l40s-shared) "
        "offers 4 and the pool scales to 2 nodes: 8 in all"
    ]


def test_a_pool_too_small_for_one_pod_per_node_is_a_misfit(records: Callable[[str], Records]) -> None:
    declared = records("prod-aws")
    find(declared, "nodeGroup:NodeGroup", "ml-prod-h200-train")["inputs"]["scalingConfig"]["maxSize"] = 2
    found = misfits("prod-aws", declared)
    assert "pool h200-train, job 4 node(s) x 8 GPU(s): node group ml-prod-h200-train scales to 2 nodes, the job needs 4 (one pod per node)" in found


def test_a_misfit_is_mandatory_and_names_the_node_group(records: Callable[[str], Records]) -> None:
    declared = [r for r in records("prod-aws") if r["name"] != f"ml-prod-h100-train:{EFA_TAG}"]
    spec = stackfile.read("prod-aws", REPO).spec()
    [finding] = [f for f in registry.evaluate(base.from_synthesis(declared), base.context_of(spec)) if f.rule == "job-fits-pool"]
    assert finding.blocking
    assert finding.violation.resource == "aws:eks/nodeGroup:NodeGroup::ml-prod-h100-train"


def test_a_renderer_that_forgets_a_daemonset_over_asks_and_is_caught(
    records: Callable[[str], Records], monkeypatch: pytest.MonkeyPatch
) -> None:
    derive = node_resources.gpu_node_daemonsets
    monkeypatch.setattr(
        node_resources, "gpu_node_daemonsets", lambda *a: [d for d in derive(*a) if d != "dcgm-exporter"]
    )
    found = misfits("dev-aws", records("dev-aws"))
    assert found and all("a pod requests" in m or "pods its GPU slots hold request" in m for m in found)


HUGEPAGES_TAG = "k8s.io/cluster-autoscaler/node-template/resources/hugepages-2Mi"


def test_a_renderer_that_forgets_the_efa_huge_pages_asks_more_than_the_real_node_has(
    records: Callable[[str], Records], monkeypatch: pytest.MonkeyPatch
) -> None:
    allocatable = node_resources.job_allocatable

    def forgetful(spec: Any, pool: Any, spec_pool: Any) -> node_resources.Requests | None:
        node = allocatable(spec, pool, spec_pool)
        if node is None or pool.instance_type is None or not spec_pool.efa:
            return node
        return node + node_resources.Requests(0, node_resources.efa_hugepages_mib(pool.instance_type))

    monkeypatch.setattr(node_resources, "job_allocatable", forgetful)
    found = misfits("prod-aws", records("prod-aws"))
    whole_node = [m for m in found if "x 8 GPU(s)" in m]
    assert whole_node and all("a node of node group ml-prod-h" in m and "Mi memory to pods" in m for m in whole_node)
    # The template counts capacity as allocatable: it says the pod fits, the real node does not.
    assert not any("the autoscaler's template" in m for m in found)


def test_a_whole_node_request_that_eats_the_margin_is_caught(
    records: Callable[[str], Records], monkeypatch: pytest.MonkeyPatch
) -> None:
    allocatable = node_resources.job_allocatable

    def marginless(spec: Any, pool: Any, spec_pool: Any) -> node_resources.Requests | None:
        node = allocatable(spec, pool, spec_pool)
        return None if node is None else node + node_resources.JOB_MARGIN

    monkeypatch.setattr(node_resources, "job_allocatable", marginless)
    found = misfits("prod-aws", records("prod-aws"))
    assert found and all("margin for other node agents" in m for m in found)


def test_an_efa_node_group_without_the_huge_pages_tag_never_scales_up_for_its_jobs(
    records: Callable[[str], Records],
) -> None:
    declared = [r for r in records("prod-aws") if r["name"] != f"ml-prod-h100-train:{HUGEPAGES_TAG}"]
    found = misfits("prod-aws", declared)
    assert found and all(
        "the autoscaler's template of node group ml-prod-h100-train offers 0 hugepages-2Mi" in m and "a pod requests 5120" in m
        for m in found
    )


def test_the_autoscaler_s_template_is_held_to_the_memory_its_asg_tags_declare(records: Callable[[str], Records]) -> None:
    declared = records("prod-aws")
    tag = copy.deepcopy(find(declared, "Tag", f"ml-prod-h100-train:{HUGEPAGES_TAG}"))
    tag["name"] = "ml-prod-h100-train:k8s.io/cluster-autoscaler/node-template/resources/memory"
    for props in (tag.get("inputs"), tag.get("outputs")):
        if props:
            props["tag"] = {**props["tag"], "key": "k8s.io/cluster-autoscaler/node-template/resources/memory", "value": "1Ti"}
    found = misfits("prod-aws", [*declared, tag])
    assert found and all("the autoscaler's template of node group ml-prod-h100-train leaves" in m and "Mi memory" in m for m in found)


def test_check_exits_1_naming_pool_shape_and_the_missing_tag(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    tags = plan.asg_tags
    monkeypatch.setattr(plan, "asg_tags", lambda *args: {k: v for k, v in tags(*args).items() if k != EFA_TAG})
    assert cli.main(["check", "prod-aws"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "prod-aws: job-fits-pool aws:eks/nodeGroup:NodeGroup::ml-prod-h200-train: mandatory: pool h200-train, job 4 node(s) x 8 GPU(s): " \
        f"the autoscaler's template of node group ml-prod-h200-train offers 0 vpc.amazonaws.com/efa (ASG tag {EFA_TAG}), a pod requests 16" in lines


# --- the CrossGuard pack runs the same rule as a stack policy -----------------------------------

_spec = importlib.util.spec_from_file_location("gpu_platform_pack_fit", REPO / "policy" / "pack.py")
assert _spec and _spec.loader
pack = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pack)


@pytest.fixture
def prod_aws_config() -> Iterator[None]:
    settings.reset_options(project="gpu-platform", stack="prod-aws", preview=True)
    set_all_config({"gpu-platform:platform": json.dumps(platform_of("prod-aws"))})
    yield
    settings.reset_options()
    set_all_config({})


def policy_resources(records: Records) -> list[PolicyResource]:
    """The records as CrossGuard hands them to a stack policy, dependencies linked."""
    options = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])
    made: dict[str, PolicyResource] = {}
    for r in records:
        if r["custom"]:
            urn = f"urn:pulumi:prod-aws::gpu-platform::{r['type']}::{r['name']}"
            made[f"{r['type']}::{r['name']}"] = PolicyResource(
                r["type"], unknown_checking_proxy(r["inputs"]), urn, r["name"], options, None, None, [], {}
            )
    for r in records:
        if r["custom"]:
            made[f"{r['type']}::{r['name']}"].dependencies.extend(made[d] for d in r["options"]["dependsOn"] if d in made)
    return list(made.values())


def run_pack(records: Records) -> list[tuple[str, str | None]]:
    reported: list[tuple[str, str | None]] = []
    policy = next(p for p in pack.policies() if p.name == "job-fits-pool")
    policy.validate(StackValidationArgs(policy_resources(records)), lambda message, urn=None: reported.append((message, urn)))
    return reported


def test_the_pack_runs_the_fit_proof_on_a_real_preview_s_resources(records: Callable[[str], Records], prod_aws_config: None) -> None:
    assert run_pack(records("prod-aws")) == []
    declared = [r for r in records("prod-aws") if r["name"] != f"ml-prod-h100-train:{EFA_TAG}"]
    [(message, urn)] = run_pack(declared)
    assert urn == "urn:pulumi:prod-aws::gpu-platform::aws:eks/nodeGroup:NodeGroup::ml-prod-h100-train"
    assert message.startswith("pool h100-train, job 8 node(s) x 8 GPU(s): ")


# --- capacity obtainable on request ---------------------------------------------------------


def test_a_queued_pool_without_the_admission_check_admits_jobs_that_never_get_nodes(records: Callable[[str], Records]) -> None:
    declared = records("prod-gcp")
    for queue in (r for r in declared if r["type"].endswith("ClusterQueue")):
        del queue["inputs"]["spec"]["admissionChecksStrategy"]
    found = [m for m in misfits("prod-gcp", declared) if "research" in m and "4 node(s)" in m]
    assert found == [
        "pool h200-train, job 4 node(s) x 8 GPU(s): a node of node pool h200-train (granted on request) comes only"
        " through a ProvisioningRequest, but ClusterQueue research admits on flavor h200-train-tas without an admission"
        " check of class queued-provisioning.gke.io: the job would be admitted and never get a node"
    ]


def test_a_queued_flavor_without_the_gke_queued_toleration_leaves_its_pods_pending(records: Callable[[str], Records]) -> None:
    declared = records("prod-gcp")
    flavor = find(declared, "ResourceFlavor", "ml-prod-gpu-h200-train-tas")["inputs"]["spec"]
    flavor["tolerations"] = [t for t in flavor["tolerations"] if t["key"] != "cloud.google.com/gke-queued"]
    assert (
        "pool h200-train, job 1 node(s) x 1 GPU(s): a node of node pool h200-train (granted on request) carries the taint"
        " cloud.google.com/gke-queued=true:NoSchedule, which the pods do not tolerate"
    ) in misfits("prod-gcp", declared)


def test_a_check_of_another_class_does_not_bring_queued_nodes(records: Callable[[str], Records]) -> None:
    declared = records("prod-gcp")
    config = next(r for r in declared if r["type"].endswith("ProvisioningRequestConfig"))
    config["inputs"]["spec"]["provisioningClassName"] = "check-capacity.autoscaling.x-k8s.io"
    assert any("without an admission check of class queued-provisioning.gke.io" in m for m in misfits("prod-gcp", declared))


def test_a_shared_pool_selected_by_gfd_s_product_label_never_gets_pods(records: Callable[[str], Records]) -> None:
    """GPU feature discovery renames the product on time-sliced nodes (k8s-device-plugin v0.20.0
    internal/lm/resource.go): a pool selected by `nvidia.com/gpu.product=NVIDIA-L40S` matches none."""
    platform = platform_of("onprem")
    pool = next(p for p in platform["nodePools"] if p["name"] == "l40s-shared")
    pool["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    ctx = base.context_of(parse_spec(platform, "stacks/Pulumi.onprem.yaml"))
    declared = records("onprem")
    find(declared, ":ResourceFlavor", "lab-gpu-l40s-shared")["inputs"]["spec"]["nodeLabels"] = pool["nodeSelector"]
    found = [v.message for v in registry.CHECKS["job-fits-pool"](base.from_synthesis(declared), ctx)]
    assert found == [
        "pool l40s-shared, job 1 node(s) x 1 GPU(s): a node of pool l40s-shared (declared: "
        "nvidia.com/gpu.product=NVIDIA-L40S) lacks the label nvidia.com/gpu.product=NVIDIA-L40S the pods select "
        "(it carries nvidia.com/gpu.product=NVIDIA-L40S-SHARED)"
    ]


def test_a_renderer_that_forgets_the_gpudirect_daemon_sidecar_over_asks_and_is_caught(
    records: Callable[[str], Records], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpudirect_pod, "daemon_requests", lambda family: node_resources.NOTHING)
    found = misfits("prod-gcp", records("prod-gcp"))
    assert found and all("pool h100-train" in m and "x 8 GPU(s)" in m for m in found)

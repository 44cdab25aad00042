"""Karpenter pools in the spec, the job renderer, the fit proof and the policy rules. Each planted
miss edits the synthesized NodePools and EC2NodeClasses the way a derivation bug would."""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
import yaml
from helpers import REPO, prod_aws_karpenter_config

from components import node_resources
from components.checks.rules import base, registry
from components.facts import catalog
from components.facts import karpenter as facts
from components.jobs import renderer
from components.node_resources import Requests
from components.spec import PlatformSpec, SpecError, parse_spec
from infra import offline
from infra.synth import Synthesis

Records = list[dict[str, Any]]
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


@pytest.fixture(scope="module")
def variant(tmp_path_factory: pytest.TempPathFactory) -> tuple[PlatformSpec, Synthesis]:
    path = tmp_path_factory.mktemp("karpenter") / "Pulumi.prod-aws-karpenter.yaml"
    path.write_text(yaml.safe_dump({"config": prod_aws_karpenter_config()}))
    _, spec, result = offline.synthesize(str(path), REPO)
    return spec, result


@pytest.fixture
def records(variant: tuple[PlatformSpec, Synthesis]) -> Records:
    return copy.deepcopy(variant[1].resources)


def violations(rule: str, spec: PlatformSpec, declared: Records) -> list[tuple[str | None, str]]:
    found = registry.CHECKS[rule](base.from_synthesis(declared), base.context_of(spec))
    return [(v.resource, v.message) for v in found]


def spec_of(node_pool: str, declared: Records, type_token: str = NODE_POOL) -> dict[str, Any]:
    return next(r for r in declared if r["type"] == type_token and r["inputs"]["metadata"]["name"] == node_pool)["inputs"]["spec"]


# --- the spec --------------------------------------------------------------------------------


def platform_problems(change: Callable[[dict[str, Any]], None]) -> dict[str, str]:
    platform = prod_aws_karpenter_config()["gpu-platform:platform"]
    change(platform)
    try:
        parse_spec(platform, "stacks/Pulumi.test.yaml", region="us-east-1")
    except SpecError as exc:
        return {p.path: p.message for p in exc.problems}
    return {}


def test_the_provisioner_defaults_to_the_cluster_autoscaler() -> None:
    assert parse_spec(yaml.safe_load((REPO / "stacks/Pulumi.prod-aws.yaml").read_text())["config"]["gpu-platform:platform"],
                      "stacks/Pulumi.prod-aws.yaml").aws_settings.provisioner == "cluster-autoscaler"


def test_an_unknown_provisioner_is_refused_naming_both_choices() -> None:
    found = platform_problems(lambda p: p["aws"].update(provisioner="karpentr"))
    assert found == {"platform.aws.provisioner": "expected 'cluster-autoscaler' or 'karpenter', got 'karpentr'"}


def test_the_karpenter_variant_is_valid() -> None:
    assert platform_problems(lambda p: None) == {}


def test_a_karpenter_pool_with_standing_nodes_is_refused() -> None:
    def standing(platform: dict[str, Any]) -> None:
        platform["nodePools"][2]["minNodes"] = 1

    assert list(platform_problems(standing)) == ["platform.nodePools[2].minNodes"]


def test_an_efa_pool_may_keep_standing_nodes_on_its_node_group() -> None:
    def standing(platform: dict[str, Any]) -> None:
        platform["nodePools"][0]["minNodes"] = 1

    assert platform_problems(standing) == {}


def test_a_bottlerocket_karpenter_pool_is_refused() -> None:
    found = platform_problems(lambda p: p["nodePools"][2].update(amiType="BOTTLEROCKET_x86_64_NVIDIA"))
    assert "platform.nodePools[2].amiType" in found


def test_an_ami_alias_that_is_no_al2023_release_is_refused() -> None:
    found = platform_problems(lambda p: p["aws"].update(karpenter={"amiAlias": "al2023@latest"}))
    assert found == {"platform.aws.karpenter.amiAlias": "expected an AL2023 release alias like al2023@v20240807, got 'al2023@latest'"}


def test_an_ami_alias_without_karpenter_is_refused() -> None:
    def autoscaler(platform: dict[str, Any]) -> None:
        platform["aws"].update(provisioner="cluster-autoscaler", karpenter={"amiAlias": "al2023@v20240807"})

    assert "platform.aws.karpenter.amiAlias" in platform_problems(autoscaler)


def test_a_reservation_by_resource_group_is_refused_for_karpenter() -> None:
    arn = "arn:aws:resource-groups:us-east-1:111122223333:group/cr-group"
    found = platform_problems(lambda p: p["nodePools"][3].update(reservation=arn))
    assert found == {
        "platform.nodePools[3].reservation": "Karpenter selects reservations by id (cr-...), not by resource group ARN; name the reservation"
    }


# --- the job renderer ---------------------------------------------------------------------------


def rendered_annotations(spec: PlatformSpec, pool: str, nodes: int, gpus: int) -> dict[str, str]:
    args = ["--data", "/data/datasets/x", "--preset", "tiny", "--max-steps", "1", "--checkpoint-every", "1"]
    args += ["--global-batch-size", str(nodes * gpus), "--seq-len", "128", "--seed", "0"]
    request = renderer.JobRequest(pool=pool, nodes=nodes, gpus_per_node=gpus, team="applied", tier="production", image="r.invalid/t:1", trainer_args=args)
    template = renderer.render(spec, request)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return template["metadata"].get("annotations", {})


def test_jobs_on_karpenter_pools_ask_karpenter_never_to_disrupt_their_nodes(variant: tuple[PlatformSpec, Synthesis]) -> None:
    assert rendered_annotations(variant[0], "l4-eval", 1, 1) == {facts.DO_NOT_DISRUPT_ANNOTATION: "true"}


def test_jobs_on_node_group_pools_carry_no_karpenter_annotation(variant: tuple[PlatformSpec, Synthesis]) -> None:
    assert rendered_annotations(variant[0], "h100-train", 1, 8) == {}


# --- the fit proof ----------------------------------------------------------------------------


def test_karpenter_s_allocatable_follows_its_overhead_model() -> None:
    # g6.2xlarge, 8 vCPU and 32 GiB: 32768 MiB less ceil(7.5%) = 30310, less 11 x 110 pods + 255 and
    # the 100 MiB eviction threshold; CPU less 60 + 10 + 10 + 4000 x 0.25% (kubeReservedResources).
    assert node_resources.karpenter_allocatable(catalog.INSTANCE_TYPES["g6.2xlarge"]) == Requests(7910, 28745)


def test_the_fit_proof_passes_on_the_karpenter_variant(variant: tuple[PlatformSpec, Synthesis], records: Records) -> None:
    assert violations("job-fits-pool", variant[0], records) == []


def test_requirements_that_exclude_every_instance_type_fail_naming_the_node_pool(
    variant: tuple[PlatformSpec, Synthesis], records: Records
) -> None:
    spec_of("l4-eval", records)["template"]["spec"]["requirements"][0]["values"] = ["g6.2xlarg"]
    found = violations("job-fits-pool", variant[0], records)
    assert found and all(resource and resource.endswith("l4-eval-nodepool") for resource, _ in found)
    assert all("NodePool l4-eval's requirements" in message and "exclude every instance type" in message for _, message in found)


def test_limits_below_one_job_s_gpus_fail_naming_the_node_pool_and_figures(
    variant: tuple[PlatformSpec, Synthesis], records: Records
) -> None:
    spec_of("l40s-reserved", records)["limits"]["nvidia.com/gpu"] = "4"
    messages = [message for _, message in violations("job-fits-pool", variant[0], records)]
    assert (
        "pool l40s-reserved, job 2 node(s) x 4 GPU(s): NodePool l40s-reserved's limits allow 4 nvidia.com/gpu; one job "
        "needs 2 g6e.12xlarge node(s), which report 8 nvidia.com/gpu: Karpenter stops launching below that"
    ) in messages


def test_a_node_limit_below_one_job_s_nodes_fails_naming_the_node_pool_and_figures(
    variant: tuple[PlatformSpec, Synthesis], records: Records
) -> None:
    spec_of("l40s-reserved", records)["limits"]["nodes"] = "1"
    messages = [message for _, message in violations("job-fits-pool", variant[0], records)]
    assert (
        "pool l40s-reserved, job 2 node(s) x 4 GPU(s): NodePool l40s-reserved's limits allow 1 nodes; one job "
        "needs 2 g6e.12xlarge node(s): Karpenter stops launching below that"
    ) in messages


def test_a_time_sliced_node_pool_s_gpu_limit_counts_the_slots_its_nodes_report() -> None:
    # dev-aws-karpenter's l4-shared: 4 g6.xlarge, each L4 time-sliced 4 ways. A GPU limit of its
    # 4 physical GPUs is spent by the first node once it reports 4 slots.
    spec, result = offline.synthesize(str(REPO / "stacks/Pulumi.dev-aws-karpenter.yaml"), REPO)[1:]
    declared = copy.deepcopy(result.resources)
    spec_of("l4-shared", declared)["limits"] = {"nvidia.com/gpu": "4"}
    messages = {message for _, message in violations("job-fits-pool", spec, declared)}
    assert any(
        "NodePool l4-shared's limits admit 1 g6.xlarge node(s) as Karpenter counts them (4 nvidia.com/gpu each once "
        "initialized), below the pool's maxNodes 4" in m
        for m in messages
    )
    assert violations("job-fits-pool", spec, copy.deepcopy(result.resources)) == []


def test_a_reserved_node_pool_without_a_reservation_to_serve_it_launches_nothing(
    variant: tuple[PlatformSpec, Synthesis], records: Records
) -> None:
    del spec_of("l40s-reserved", records, NODE_CLASS)["capacityReservationSelectorTerms"]
    messages = {message for _, message in violations("job-fits-pool", variant[0], records)}
    assert any("NodePool l40s-reserved allows no capacity type its EC2NodeClass can serve" in m for m in messages)


def test_reserved_memory_karpenter_predicts_beyond_the_job_s_requests_is_a_misfit(
    variant: tuple[PlatformSpec, Synthesis], records: Records
) -> None:
    # More than the margin jobs leave for other node agents (node_resources.JOB_MARGIN, 2 GiB).
    spec_of("l4-eval", records, NODE_CLASS)["kubelet"] = {"systemReserved": {"memory": "3Gi"}}
    messages = [message for _, message in violations("job-fits-pool", variant[0], records)]
    assert messages and all("Karpenter's model of a g6.2xlarge node of NodePool l4-eval leaves" in m for m in messages)


def test_a_missing_node_class_launches_nothing(variant: tuple[PlatformSpec, Synthesis], records: Records) -> None:
    declared = [r for r in records if not (r["type"] == NODE_CLASS and r["inputs"]["metadata"]["name"] == "l4-eval")]
    messages = {message for _, message in violations("job-fits-pool", variant[0], declared)}
    assert any("names EC2NodeClass l4-eval, which the stack does not declare" in m for m in messages)


# --- policy rules -------------------------------------------------------------------------------


def test_a_node_pool_without_the_gpu_taint_fails_naming_it(variant: tuple[PlatformSpec, Synthesis], records: Records) -> None:
    spec_of("l4-eval", records)["template"]["spec"]["taints"] = []
    [(resource, _)] = violations("gpu-pool-tainted", variant[0], records)
    assert resource == "kubernetes:karpenter.sh/v1:NodePool::ml-prod-karpenter-l4-eval-nodepool"


def test_every_rule_passes_on_the_karpenter_variant(variant: tuple[PlatformSpec, Synthesis], records: Records) -> None:
    assert registry.evaluate(base.from_synthesis(records), base.context_of(variant[0])) == []


def test_spot_node_pools_are_spot_capacity_for_the_spot_rule(variant: tuple[PlatformSpec, Synthesis], records: Records) -> None:
    spec_of("l4-eval", records)["template"]["spec"]["requirements"][1]["values"] = ["spot"]
    # prod allows no spot unless policy.allowSpot says so.
    assert [r for r, _ in violations("spot-allowed", variant[0], records)] == [
        "kubernetes:karpenter.sh/v1:NodePool::ml-prod-karpenter-l4-eval-nodepool"
    ]


def test_a_node_pool_s_maximum_nodes_come_from_its_node_limit(variant: tuple[PlatformSpec, Synthesis], records: Records) -> None:
    spec_of("l4-eval", records)["limits"] = {"nodes": "100", "nvidia.com/gpu": "100"}
    found = violations("gpu-pool-max-nodes", variant[0], records)
    assert [r for r, _ in found] == ["kubernetes:karpenter.sh/v1:NodePool::ml-prod-karpenter-l4-eval-nodepool"]


def test_without_a_node_limit_a_node_pool_s_maximum_nodes_come_from_its_gpu_limit(
    variant: tuple[PlatformSpec, Synthesis], records: Records
) -> None:
    spec_of("l4-eval", records)["limits"] = {"nvidia.com/gpu": "100"}
    found = violations("gpu-pool-max-nodes", variant[0], records)
    assert [r for r, _ in found] == ["kubernetes:karpenter.sh/v1:NodePool::ml-prod-karpenter-l4-eval-nodepool"]


def test_an_unencrypted_node_class_volume_is_a_violation(variant: tuple[PlatformSpec, Synthesis], records: Records) -> None:
    spec_of("l4-eval", records, NODE_CLASS)["blockDeviceMappings"][0]["ebs"]["encrypted"] = False
    assert [r for r, _ in violations("encrypted-storage", variant[0], records)] == [
        "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::ml-prod-karpenter-l4-eval-nodeclass"
    ]


def test_a_node_class_allowing_imdsv1_is_a_violation(variant: tuple[PlatformSpec, Synthesis], records: Records) -> None:
    spec_of("l4-eval", records, NODE_CLASS)["metadataOptions"]["httpTokens"] = "optional"
    assert [r for r, _ in violations("imdsv2-required", variant[0], records)] == [
        "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass::ml-prod-karpenter-l4-eval-nodeclass"
    ]



def test_karpenter_pools_do_not_count_towards_the_node_group_ceiling() -> None:
    def many(platform: dict[str, Any]) -> None:
        extra = [{"name": f"l4-{i}", "instanceType": "g6.xlarge", "maxNodes": 1} for i in range(30)]
        platform["nodePools"] += extra

    assert "platform.nodePools" not in platform_problems(many)


def test_an_existing_vpc_s_subnets_get_the_discovery_tag(tmp_path_factory: pytest.TempPathFactory) -> None:
    config = prod_aws_karpenter_config()
    platform = config["gpu-platform:platform"]
    subnets = {"us-east-1b": "subnet-0123aaaa", "us-east-1c": "subnet-0123bbbb"}
    platform["nodePools"][3]["zones"] = ["us-east-1b"]
    platform["aws"] = {"provisioner": "karpenter", "network": {"vpcId": "vpc-0123abcd", "subnetIds": subnets}}
    path = tmp_path_factory.mktemp("vpc") / "Pulumi.prod-aws-karpenter-vpc.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    result = offline.synthesize(str(path), REPO)[2]
    tags = {r["inputs"]["resourceId"]: r["inputs"]["value"] for r in result.by_type("aws:ec2/tag:Tag")}
    assert tags == {"subnet-0123aaaa": "ml-prod", "subnet-0123bbbb": "ml-prod", "sg-ml-prod-cluster": "ml-prod"}

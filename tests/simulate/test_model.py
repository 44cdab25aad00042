"""The simulation model is read from the synthesized objects: node groups and node pools, Kueue's
queues, quotas, cohort and policies, the priority classes, the autoscaler and Kueue settings."""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
import yaml

from components.facts import catalog
from infra import synth
from infra.tools.simulate import model, objects, read_queues
from infra.tools.simulate.build import stack_model

Synthesized = Callable[[str], synth.Synthesis]


def build(synthesized: Synthesized, stack: str, overrides: model.Overrides | None = None) -> model.StackModel:
    result = synthesized(stack)
    return stack_model(stack, result.resources, result.outputs, overrides)


def edited(synthesized: Synthesized, stack: str, edit: Callable[[list[dict[str, Any]]], None]) -> model.StackModel:
    result = synthesized(stack)
    resources = copy.deepcopy(result.resources)
    edit(resources)
    return stack_model(stack, resources, result.outputs)


def one(resources: list[dict[str, Any]], type_token: str, name: str) -> dict[str, Any]:
    return next(r for r in resources if r["type"] == type_token and r["name"] == name)


def test_aws_pools_come_from_the_node_groups_and_their_autoscaler_template(synthesized: Synthesized) -> None:
    stack = build(synthesized, "dev-aws")
    shared, train = stack.pool("l4-shared"), stack.pool("l4-train")
    assert (shared.instance_type, shared.gpus_per_node, shared.slots_per_node, shared.sharing, shared.max_pod_slots) == (
        "g6.xlarge", 1, 4, "shared", 1
    )
    assert (shared.min_nodes, shared.max_nodes, shared.spot, shared.usd_per_node_hour) == (0, 4, True, 0.805)
    assert (train.slots_per_node, train.sharing, train.max_pod_slots, train.max_nodes) == (4, "none", 4, 2)
    assert shared.scale_up_s == model.SCALE_UP_S[("aws", "g6")]
    assert shared.interruptions_per_node_day == model.SPOT_INTERRUPTIONS_PER_NODE_DAY


def test_aws_autoscaler_timings_come_from_its_release(synthesized: Synthesized) -> None:
    autoscaler = build(synthesized, "dev-aws").autoscaler
    assert autoscaler is not None
    assert (autoscaler.unneeded_s, autoscaler.delay_after_add_s, autoscaler.expendable_below) == (900, 1200, -10)
    assert not autoscaler.pack_most_allocated


def test_queues_quotas_cohort_and_policies_come_from_the_kueue_objects(synthesized: Synthesized) -> None:
    stack = build(synthesized, "prod-aws")
    research, applied = stack.queue("research"), stack.queue("applied")
    assert dict(research.nominal) == {"h100-train": 32, "h200-train": 16, "l4-eval": 0}
    assert dict(applied.nominal) == {"h100-train": 24, "h200-train": 16, "l4-eval": 3}
    assert research.cohort == applied.cohort == "ml-prod"
    assert dict(stack.cohorts["ml-prod"]) == {"h100-train": 8, "h200-train": 0, "l4-eval": 0}
    declared = next(
        r["inputs"]["spec"]
        for r in synthesized("prod-aws").resources
        if r["type"].endswith(":ClusterQueue") and r["inputs"]["metadata"]["name"] == "research"
    )
    assert (research.within_cluster_queue, research.reclaim_within_cohort, research.queueing_strategy) == (
        declared["preemption"]["withinClusterQueue"], declared["preemption"]["reclaimWithinCohort"], declared["queueingStrategy"]
    )
    assert dict(stack.teams) == {"applied": "applied", "research": "research"}


def test_tiers_pair_the_workload_priority_with_the_pods_priority(synthesized: Synthesized) -> None:
    tiers = build(synthesized, "dev-aws").tiers
    assert tiers["production"] == model.Tier(100_000, 100_000)
    assert tiers["opportunistic"] == model.Tier(-100, -100)


def test_kueue_waits_for_pods_ready_with_its_defaults(synthesized: Synthesized) -> None:
    assert build(synthesized, "dev-aws").kueue == model.KueueConfig(1800, 1800, 60, 3600, "Eviction")


def test_gke_pools_read_accelerators_sharing_and_limits(synthesized: Synthesized) -> None:
    stack = build(synthesized, "dev-gcp")
    mig, shared = stack.pool("a100-mig"), stack.pool("l4-shared")
    assert (mig.slots_per_node, mig.sharing, mig.max_pod_slots, mig.max_nodes) == (7, "mig", 7, 2)
    assert (shared.slots_per_node, shared.sharing, shared.max_pod_slots) == (4, "shared", 1)
    autoscaler = stack.autoscaler
    assert autoscaler is not None and autoscaler.pack_most_allocated


def test_gke_minimum_nodes_are_read_from_the_node_pool(synthesized: Synthesized) -> None:
    pool = build(synthesized, "prod-gcp").pool("l4-eval")
    assert (pool.min_nodes, pool.max_nodes, pool.spot, pool.usd_per_node_hour) == (1, 3, False, 0.854)


def test_existing_cluster_nodes_are_fixed_unpriced_and_never_scale(synthesized: Synthesized) -> None:
    stack = build(synthesized, "onprem")
    pool = stack.pool("l40s-shared")
    assert (pool.min_nodes, pool.max_nodes, pool.slots_per_node, pool.sharing) == (2, 2, 8, "shared")
    assert pool.usd_per_node_hour is None and not pool.autoscaled and stack.autoscaler is None


def test_overrides_replace_the_default_rates_and_delays(synthesized: Synthesized) -> None:
    stack = build(synthesized, "dev-aws", model.Overrides(spot_rates={"l4-train": 2.0}, scale_up_s={"l4-train": 30}))
    assert stack.pool("l4-train").interruptions_per_node_day == 2.0
    assert stack.pool("l4-train").scale_up_s == 30


def test_the_model_follows_the_synthesized_objects_not_the_spec(synthesized: Synthesized) -> None:
    def edit(resources: list[dict[str, Any]]) -> None:
        cq = one(resources, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "ml-dev-gpu-research")
        cq["inputs"]["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]["nominalQuota"] = 4
        group = one(resources, "aws:eks/nodeGroup:NodeGroup", "ml-dev-l4-train")
        group["inputs"]["scalingConfig"]["maxSize"] = 5

    stack = edited(synthesized, "dev-aws", edit)
    assert stack.queue("research").nominal["l4-train"] == 4
    assert stack.pool("l4-train").max_nodes == 5


def test_borrowing_while_preempting_is_refused_as_not_modeled(synthesized: Synthesized) -> None:
    def edit(resources: list[dict[str, Any]]) -> None:
        cq = one(resources, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "ml-dev-gpu-research")
        cq["inputs"]["spec"]["preemption"]["borrowWithinCohort"] = {"policy": "LowerPriority"}

    with pytest.raises(model.ModelError, match="borrowWithinCohort LowerPriority is not modeled"):
        edited(synthesized, "dev-aws", edit)


def test_fair_sharing_strategies_and_weights_are_read(synthesized: Synthesized) -> None:
    def edit(resources: list[dict[str, Any]]) -> None:
        release = next(r for r in resources if r["type"] == "kubernetes:helm.sh/v3:Release" and r["name"].endswith("kueue"))
        values = release["inputs"]["values"]["managerConfig"]
        config = yaml.safe_load(values["controllerManagerConfigYaml"])
        config["fairSharing"] = {"preemptionStrategies": ["LessThanOrEqualToFinalShare"]}
        values["controllerManagerConfigYaml"] = yaml.safe_dump(config)
        cq = one(resources, "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "ml-dev-gpu-research")
        cq["inputs"]["spec"]["fairSharing"] = {"weight": 3}

    stack = edited(synthesized, "dev-aws", edit)
    assert stack.kueue.fair_sharing == ("LessThanOrEqualToFinalShare",)
    assert (stack.queue("research").fair_weight, stack.queue("applied").fair_weight) == (3.0, 1.0)
    assert stack.parameters["kueue"]["fair_sharing"]["preemption_strategies"] == ["LessThanOrEqualToFinalShare"]


def test_a_stack_without_fair_sharing_is_classic_and_says_nothing_of_it(synthesized: Synthesized) -> None:
    stack = build(synthesized, "dev-aws")
    assert stack.kueue.fair_sharing is None and "fair_sharing" not in stack.parameters["kueue"]


def test_fair_sharing_strategies_kueue_rejects_are_a_model_error(synthesized: Synthesized) -> None:
    def edit(resources: list[dict[str, Any]]) -> None:
        release = next(r for r in resources if r["type"] == "kubernetes:helm.sh/v3:Release" and r["name"].endswith("kueue"))
        values = release["inputs"]["values"]["managerConfig"]
        config = yaml.safe_load(values["controllerManagerConfigYaml"])
        config["fairSharing"] = {"preemptionStrategies": ["LessThanInitialShare", "LessThanOrEqualToFinalShare"]}
        values["controllerManagerConfigYaml"] = yaml.safe_dump(config)

    with pytest.raises(model.ModelError, match="not a combination Kueue accepts"):
        edited(synthesized, "dev-aws", edit)


def test_admission_fair_sharing_is_refused_as_not_modeled(synthesized: Synthesized) -> None:
    def edit(resources: list[dict[str, Any]]) -> None:
        release = next(r for r in resources if r["type"] == "kubernetes:helm.sh/v3:Release" and r["name"].endswith("kueue"))
        values = release["inputs"]["values"]["managerConfig"]
        config = yaml.safe_load(values["controllerManagerConfigYaml"])
        config["admissionFairSharing"] = {"usageHalfLifeTime": "168h"}
        values["controllerManagerConfigYaml"] = yaml.safe_dump(config)

    with pytest.raises(model.Refused, match="refused: admission-fair-sharing"):
        edited(synthesized, "dev-aws", edit)


def test_a_priority_class_that_preempts_at_the_kube_scheduler_is_refused(synthesized: Synthesized) -> None:
    def edit(resources: list[dict[str, Any]]) -> None:
        pc = next(r for r in resources if r["type"] == "kubernetes:scheduling.k8s.io/v1:PriorityClass")
        pc["inputs"].pop("preemptionPolicy")

    with pytest.raises(model.Refused, match="preemptionPolicy PreemptLowerPriority.*refused: kube-scheduler-preemption"):
        edited(synthesized, "dev-aws", edit)


def test_a_configured_pods_ready_timeout_is_read(synthesized: Synthesized) -> None:
    def edit(resources: list[dict[str, Any]]) -> None:
        release = next(r for r in resources if r["type"] == "kubernetes:helm.sh/v3:Release" and r["name"].endswith("kueue"))
        values = release["inputs"]["values"]["managerConfig"]
        config = yaml.safe_load(values["controllerManagerConfigYaml"])
        config["waitForPodsReady"] = {"timeout": "10m", "requeuingStrategy": {"backoffBaseSeconds": 30}}
        values["controllerManagerConfigYaml"] = yaml.safe_dump(config)

    assert edited(synthesized, "dev-aws", edit).kueue == model.KueueConfig(600, 600, 30, 3600, "Eviction")


def test_go_durations_read_as_seconds() -> None:
    assert [objects.duration_s(t) for t in ("15m", "1h30m", "90s", "500ms")] == [900, 5400, 90, 0.5]
    with pytest.raises(model.ModelError):
        objects.duration_s("15 minutes")


def test_every_catalog_family_has_a_scale_up_figure() -> None:
    families = {(t.cloud, catalog.family(t.name)) for t in catalog.INSTANCE_TYPES.values()}
    assert families <= set(model.SCALE_UP_S)


def test_requeue_backoff_doubles_up_to_its_maximum() -> None:
    kueue = model.KueueConfig(1800, 1800, 60, 3600, "Eviction")
    assert [model.backoff_s(kueue, n) for n in (1, 2, 3, 7, 8)] == [60, 120, 240, 3600, 3600]


def test_a_fair_sharing_weight_is_read_as_a_kubernetes_quantity() -> None:
    assert [read_queues._fair_weight(v, "cq") for v in ("500m", "2", 0.5, None)] == [0.5, 2.0, 0.5, 1.0]  # pyright: ignore[reportPrivateUsage]


def test_a_fair_sharing_weight_that_is_no_quantity_is_a_model_error() -> None:
    with pytest.raises(model.ModelError, match=r"cq: fairSharing.weight 'heavy' is not a Kubernetes quantity"):
        read_queues._fair_weight("heavy", "cq")  # pyright: ignore[reportPrivateUsage]

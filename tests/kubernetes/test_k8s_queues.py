"""Kueue's plan: quotas derived from pool capacity, split across teams, the rest shared."""

from __future__ import annotations

from typing import Any

import pytest
from k8s_support import REPO, onprem_platform, pools_of, spec_of

from components.kubernetes.queues import QueuePlan, cluster_queue_spec, flavor_spec, queue_plan
from components.pools import derive_pools
from infra import stackfile


def plan_of(platform: dict[str, Any]) -> QueuePlan:
    return queue_plan(spec_of(platform), pools_of(platform))


def test_each_team_gets_its_quota_and_zero_on_pools_it_has_none_on() -> None:
    platform = onprem_platform()
    platform["scheduling"]["teams"] = [{"name": "research", "quotas": {"a100-train": 16}}]
    [research] = plan_of(platform).teams
    assert research.nominal == {"a100-train": 16, "l40s-shared": 0}


def test_capacity_no_team_holds_stays_with_the_cohort() -> None:
    # onprem: research 16 + applied 8 of 32 A100 slots; 8 + 8 of 16 L40S slots.
    assert plan_of(onprem_platform()).shared == {"a100-train": 8, "l40s-shared": 0}


@pytest.mark.parametrize("stack", stackfile.all_stacks(REPO))
def test_per_pool_quotas_add_up_to_the_pool_s_capacity(stack: str) -> None:
    spec = stackfile.read(stack, REPO).spec()
    pools = derive_pools(spec)
    plan = queue_plan(spec, pools)
    for pool in pools:
        assert sum(t.nominal[pool.name] for t in plan.teams) + plan.shared[pool.name] == pool.max_slots


def test_capacity_is_max_nodes_times_gpus_times_sharing_replicas() -> None:
    platform = onprem_platform()
    platform["scheduling"] = {}
    [default] = plan_of(platform).teams
    # a100-train: 4 nodes x 8 GPUs; l40s-shared: 2 nodes x 4 GPUs x 2 time-slices.
    assert default.nominal == {"a100-train": 32, "l40s-shared": 16}


def test_without_teams_one_queue_in_the_default_namespace_holds_everything() -> None:
    platform = onprem_platform()
    platform["scheduling"] = {}
    [default] = plan_of(platform).teams
    assert (default.namespace, default.local_queue, default.cluster_queue, default.owns_namespace) == (
        "default",
        "default",
        "default",
        False,
    )


def test_a_team_s_ceiling_leaves_room_to_borrow_every_pool() -> None:
    assert plan_of(onprem_platform()).team_gpu_ceiling == 32 + 16


def test_a_flavor_finds_its_pool_s_nodes_and_tolerates_their_taint() -> None:
    pool = next(p for p in pools_of(onprem_platform()) if p.name == "l40s-shared")
    assert flavor_spec(pool) == {
        "nodeLabels": {"gpu-platform.io/pool": "l40s-shared"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}],
    }


def test_a_team_s_cluster_queue_admits_only_its_own_namespace() -> None:
    platform = onprem_platform()
    plan = plan_of(platform)
    queue = cluster_queue_spec(plan.teams[0], plan, pools_of(platform))
    assert queue["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "research"}}


def test_all_team_queues_share_one_cohort_so_idle_quota_can_be_borrowed() -> None:
    platform = onprem_platform()
    plan = plan_of(platform)
    cohorts = {cluster_queue_spec(t, plan, pools_of(platform))["cohortName"] for t in plan.teams}
    assert cohorts == {"lab"}


def test_nominal_quota_is_reclaimed_from_borrowers_of_any_tier_and_tiers_preempt_within_a_team() -> None:
    platform = onprem_platform()
    plan = plan_of(platform)
    preemption = cluster_queue_spec(plan.teams[0], plan, pools_of(platform))["preemption"]
    assert preemption == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}

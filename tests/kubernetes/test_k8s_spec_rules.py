"""The spec rules of the scheduling and monitoring sections: tiers, teams, quotas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_support import REPO, onprem_platform, spec_of

from components.spec import SpecError


def problems(platform: dict[str, Any]) -> list[str]:
    """`path: message` of every problem the spec has (none: it parses)."""
    try:
        spec_of(platform)
    except SpecError as exc:
        return [f"{p.path}: {p.message}" for p in exc.problems]
    return []


def with_tiers(*tiers: dict[str, Any]) -> dict[str, Any]:
    platform = onprem_platform()
    platform["scheduling"]["priorityTiers"] = list(tiers)
    return platform


def with_teams(*teams: dict[str, Any]) -> dict[str, Any]:
    platform = onprem_platform()
    platform["scheduling"]["teams"] = list(teams)
    return platform


def test_the_onprem_stack_passes() -> None:
    assert problems(onprem_platform()) == []


def test_custom_tiers_with_distinct_names_and_values_pass() -> None:
    platform = with_tiers(
        {"name": "urgent", "value": 1_000_000_000, "globalDefault": True},
        {"name": "batch", "value": -2_147_483_648, "preemptionPolicy": "Never"},
    )
    assert problems(platform) == []


def test_a_tier_value_above_one_billion_is_rejected() -> None:
    assert problems(with_tiers({"name": "urgent", "value": 1_000_000_001})) == [
        "platform.scheduling.priorityTiers[0].value: must be at most 1000000000"
        " (higher values are reserved for system classes), got 1000000001"
    ]


def test_a_tier_value_below_int32_is_rejected() -> None:
    assert problems(with_tiers({"name": "never", "value": -2_147_483_649})) == [
        "platform.scheduling.priorityTiers[0].value: must be at least -2147483648, got -2147483649"
    ]


def test_a_tier_named_with_the_system_prefix_is_rejected() -> None:
    assert problems(with_tiers({"name": "system-urgent", "value": 5})) == [
        "platform.scheduling.priorityTiers[0].name: 'system-urgent': names starting with 'system-'"
        " are reserved for Kubernetes' own classes"
    ]


def test_tier_names_must_be_dns_labels() -> None:
    [problem] = problems(with_tiers({"name": "Urgent", "value": 5}))
    assert problem.startswith("platform.scheduling.priorityTiers[0].name: expected a DNS-1123 label")


def test_duplicate_tier_values_are_rejected() -> None:
    platform = with_tiers({"name": "high", "value": 100}, {"name": "higher", "value": 100})
    assert problems(platform) == [
        "platform.scheduling.priorityTiers[1].value: 100 is already the value of tier 'high':"
        " tiers must rank strictly, give each its own value"
    ]


def test_duplicate_tier_names_are_rejected() -> None:
    platform = with_tiers({"name": "high", "value": 100}, {"name": "high", "value": 200})
    assert problems(platform) == [
        "platform.scheduling.priorityTiers[1].name: duplicate tier name 'high': tier names must be unique"
    ]


def test_a_second_global_default_is_rejected() -> None:
    platform = with_tiers(
        {"name": "high", "value": 100, "globalDefault": True},
        {"name": "low", "value": 10, "globalDefault": True},
    )
    assert problems(platform) == [
        "platform.scheduling.priorityTiers[1].globalDefault: only one tier may be the global default,"
        " and 'high' already is"
    ]


def test_an_empty_tier_list_is_rejected() -> None:
    assert problems(with_tiers()) == [
        "platform.scheduling.priorityTiers: must list at least one tier;"
        " leave priorityTiers out for the platform's default tiers"
    ]


def test_team_quotas_up_to_pool_capacity_pass() -> None:
    # a100-train holds 4 nodes x 8 GPUs; l40s-shared 2 nodes x 4 GPUs x 2 time-slices.
    platform = with_teams(
        {"name": "research", "quotas": {"a100-train": 24, "l40s-shared": 16}},
        {"name": "applied", "quotas": {"a100-train": 8}},
    )
    assert problems(platform) == []


def test_team_quotas_beyond_pool_capacity_are_rejected() -> None:
    platform = with_teams(
        {"name": "research", "quotas": {"l40s-shared": 10}},
        {"name": "applied", "quotas": {"l40s-shared": 8}},
    )
    assert problems(platform) == [
        "platform.scheduling.teams: teams ask for 18 GPU slots on pool 'l40s-shared' (research 10, applied 8),"
        " which holds 16 (2 nodes x 4 GPUs x 2 time-slicing slots); lower the quotas or raise the pool's maxNodes"
    ]


def test_a_quota_on_a_pool_that_does_not_exist_is_rejected() -> None:
    platform = with_teams({"name": "research", "quotas": {"a100-trian": 8}})
    assert problems(platform) == [
        "platform.scheduling.teams[0].quotas.a100-trian: no pool named 'a100-trian'"
        " (did you mean 'a100-train'?); pools: a100-train, l40s-shared"
    ]


def test_a_negative_quota_is_rejected() -> None:
    platform = with_teams({"name": "research", "quotas": {"a100-train": -1}})
    assert problems(platform) == ["platform.scheduling.teams[0].quotas.a100-train: must be >= 0 GPU slots, got -1"]


def test_team_names_must_be_dns_labels() -> None:
    [problem] = problems(with_teams({"name": "Research"}))
    assert problem.startswith("platform.scheduling.teams[0].name: expected a DNS-1123 label")


def test_duplicate_team_names_are_rejected() -> None:
    platform = with_teams({"name": "research"}, {"name": "research"})
    assert "platform.scheduling.teams[1].name: duplicate team name 'research': each team gets a namespace of its own" in problems(platform)


@pytest.mark.parametrize("name", ["default", "kube-system", "kueue-system", "nvidia-device-plugin"])
def test_a_team_cannot_take_a_namespace_kubernetes_or_the_platform_uses(name: str) -> None:
    assert problems(with_teams({"name": name})) == [
        f"platform.scheduling.teams[0].name: {name!r} is a namespace Kubernetes or the platform already uses;"
        " pick another team name"
    ]


def test_a_service_monitor_without_the_dcgm_exporter_is_rejected() -> None:
    platform = onprem_platform()
    platform["monitoring"] = {"dcgm": False, "serviceMonitor": True}
    assert problems(platform) == ["platform.monitoring.serviceMonitor: scrapes the DCGM exporter: needs dcgm: true"]


def test_every_scheduling_problem_is_reported_at_once() -> None:
    platform = with_teams({"name": "research", "quotas": {"a100-train": 40}}, {"name": "kube-system"})
    platform["scheduling"]["priorityTiers"] = [{"name": "system-x", "value": 1}]
    # In the order a reader meets them in the file: the teams come before the tiers there.
    assert [p.split(":", 1)[0] for p in problems(platform)] == [
        "platform.scheduling.teams",
        "platform.scheduling.teams[1].name",
        "platform.scheduling.priorityTiers[0].name",
    ]


def test_the_cli_names_the_stack_file_and_field_and_exits_2(tmp_path: Path) -> None:
    platform = with_teams({"name": "research", "quotas": {"a100-train": 33}})
    stack_file = tmp_path / "Pulumi.lab.yaml"
    stack_file.write_text(yaml.safe_dump({"config": {"gpu-platform:platform": platform}}))
    # A process of its own: the CLI closes its event loop on exit, as a command should.
    result = subprocess.run(
        [sys.executable, "-c", "from infra.cli import entrypoint; entrypoint()", "synth", str(stack_file)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{stack_file}: platform.scheduling.teams: teams ask for 33 GPU slots on pool 'a100-train' (research 33),"
        " which holds 32 (4 nodes x 8 GPUs); lower the quotas or raise the pool's maxNodes"
    ]

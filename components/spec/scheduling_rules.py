"""Scheduling and monitoring rules: priority tiers, teams and their quotas, DCGM."""

from __future__ import annotations

from collections import Counter

from components.facts import charts
from components.spec.models import PlatformSpec, PriorityTierSpec
from components.spec.platform_rules import gpus_per_node, pool_hardware_problems, sharing_problems, slots_per_gpu
from components.spec.problems import ROOT, Problem, did_you_mean, dns_label_problems

# --- scheduling and monitoring: priority tiers, teams and their quotas -----------------------

# PriorityClass limits (Kubernetes API): user classes may not exceed 1e9, values are int32, and
# the `system-` prefix is reserved for the built-in classes.
MAX_PRIORITY = 1_000_000_000
MIN_PRIORITY = -2_147_483_648
RESERVED_PRIORITY_PREFIX = "system-"
# WorkloadPriorityClass `description` maxLength (Kueue v1beta2 CRD).
MAX_TIER_DESCRIPTION = 2048
# Namespaces a team may not take: Kubernetes' own, and those the platform installs into.
# `default` hosts the implicit team of a stack without teams (components.naming.DEFAULT_TEAM).
RESERVED_NAMESPACES = frozenset(
    {"default", "kube-system", "kube-public", "kube-node-lease", *(chart.namespace for chart in charts.CHARTS)}
)


def scheduling_problems(spec: PlatformSpec) -> list[Problem]:
    at = f"{ROOT}.scheduling"
    problems: list[Problem] = []
    if spec.scheduling.priority_tiers is not None:
        problems += _tier_problems(spec.scheduling.priority_tiers, f"{at}.priorityTiers")
    problems += _team_problems(spec, f"{at}.teams")
    return problems


def _tier_problems(tiers: list[PriorityTierSpec], at: str) -> list[Problem]:
    if not tiers:
        return [Problem(at, "must list at least one tier; leave priorityTiers out for the platform's default tiers")]
    problems: list[Problem] = []
    first_name: dict[str, int] = {}
    first_value: dict[int, str] = {}
    default_tier: str | None = None
    for i, tier in enumerate(tiers):
        here = f"{at}[{i}]"
        problems += dns_label_problems(tier.name, f"{here}.name")
        if tier.name.startswith(RESERVED_PRIORITY_PREFIX):
            problems.append(
                Problem(f"{here}.name", f"{tier.name!r}: names starting with {RESERVED_PRIORITY_PREFIX!r} are reserved for Kubernetes' own classes")
            )
        if tier.name in first_name:
            problems.append(Problem(f"{here}.name", f"duplicate tier name {tier.name!r}: tier names must be unique"))
        first_name.setdefault(tier.name, i)
        if tier.value > MAX_PRIORITY:
            problems.append(
                Problem(f"{here}.value", f"must be at most {MAX_PRIORITY} (higher values are reserved for system classes), got {tier.value}")
            )
        elif tier.value < MIN_PRIORITY:
            problems.append(Problem(f"{here}.value", f"must be at least {MIN_PRIORITY}, got {tier.value}"))
        if tier.value in first_value:
            problems.append(
                Problem(
                    f"{here}.value",
                    f"{tier.value} is already the value of tier {first_value[tier.value]!r}: tiers must rank strictly, give each its own value",
                )
            )
        first_value.setdefault(tier.value, tier.name)
        if tier.global_default:
            if default_tier is not None:
                problems.append(
                    Problem(f"{here}.globalDefault", f"only one tier may be the global default, and {default_tier!r} already is")
                )
            default_tier = default_tier or tier.name
        if len(tier.description) > MAX_TIER_DESCRIPTION:
            problems.append(
                Problem(f"{here}.description", f"at most {MAX_TIER_DESCRIPTION} characters, got {len(tier.description)}")
            )
    return problems


def _team_problems(spec: PlatformSpec, at: str) -> list[Problem]:
    problems: list[Problem] = []
    names = Counter(team.name for team in spec.scheduling.teams)
    pool_names = [pool.name for pool in spec.node_pools]
    for i, team in enumerate(spec.scheduling.teams):
        here = f"{at}[{i}]"
        problems += dns_label_problems(team.name, f"{here}.name")
        if names[team.name] > 1:
            problems.append(Problem(f"{here}.name", f"duplicate team name {team.name!r}: each team gets a namespace of its own"))
        if team.name in RESERVED_NAMESPACES:
            problems.append(
                Problem(f"{here}.name", f"{team.name!r} is a namespace Kubernetes or the platform already uses; pick another team name")
            )
        for pool, slots in team.quotas.items():
            if pool not in pool_names:
                hint = did_you_mean(pool, pool_names)
                problems.append(
                    Problem(f"{here}.quotas.{pool}", f"no pool named {pool!r}{hint}; pools: {', '.join(pool_names)}")
                )
            if slots < 0:
                problems.append(Problem(f"{here}.quotas.{pool}", f"must be >= 0 GPU slots, got {slots}"))
    return problems + _quota_capacity_problems(spec, at)


def _quota_capacity_problems(spec: PlatformSpec, at: str) -> list[Problem]:
    """Teams may not be promised more GPU slots on a pool than it holds at its largest."""
    problems: list[Problem] = []
    for pool_spec in spec.node_pools:
        asks = {team.name: team.quotas[pool_spec.name] for team in spec.scheduling.teams if team.quotas.get(pool_spec.name, 0) > 0}
        # A pool with problems of its own has no known capacity; those problems are reported.
        if not asks or pool_hardware_problems(spec, pool_spec, "") or sharing_problems(pool_spec, ""):
            continue
        gpus, slots = gpus_per_node(pool_spec), slots_per_gpu(pool_spec)
        max_slots = pool_spec.max_nodes * gpus * slots
        total = sum(asks.values())
        if total > max_slots:
            shape = f"{pool_spec.max_nodes} nodes x {gpus} GPUs"
            if slots > 1:
                shape += f" x {slots} {pool_spec.sharing.mode} slots"
            split = ", ".join(f"{team} {slots}" for team, slots in asks.items())
            problems.append(
                Problem(
                    at,
                    f"teams ask for {total} GPU slots on pool {pool_spec.name!r} ({split}), which holds {max_slots}"
                    f" ({shape}); lower the quotas or raise the pool's maxNodes",
                )
            )
    return problems


def monitoring_problems(spec: PlatformSpec) -> list[Problem]:
    if spec.monitoring.service_monitor and not spec.monitoring.dcgm:
        return [
            Problem(f"{ROOT}.monitoring.serviceMonitor", "scrapes the DCGM exporter: needs dcgm: true")
        ]
    return []

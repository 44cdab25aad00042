"""Scheduling rules: PriorityClasses the API server and the autoscaler accept as meant."""

from __future__ import annotations

from typing import Iterable, Sequence

from components.checks.declared import PRIORITY_CLASS, UNKNOWN, Resource
from components.checks.declared import get as _get
from components.checks.rules.base import Context, Violation, int_or_none

# The API server rejects user PriorityClasses above this and names starting with `system-`
# (kubernetes/pkg/apis/scheduling: HighestUserDefinablePriority, SystemPriorityClassPrefix).
MAX_USER_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_PREFIX = "system-"
# cluster-autoscaler --expendable-pods-priority-cutoff default: pods below it never trigger
# scale-up (cluster-autoscaler FAQ).
AUTOSCALER_PRIORITY_CUTOFF = -10


def priority_class_range(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    for res in _priority_classes(resources):
        value = int_or_none(_get(res.props, "value"))
        name = _get(res.props, "metadata", "name")
        if value is not None and value > MAX_USER_PRIORITY:
            out.append(Violation("priority-class-range", res.key, f"value {value} is above {MAX_USER_PRIORITY:,}, the highest user priority"))
        if isinstance(name, str) and name.startswith(SYSTEM_PRIORITY_PREFIX):
            out.append(Violation("priority-class-range", res.key, f"name {name} uses the reserved {SYSTEM_PRIORITY_PREFIX!r} prefix"))
    return out


def priority_class_autoscaler_cutoff(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """Below the cutoff a class only soaks up idle GPUs (the opportunistic tier); preempting
    there would evict real work for capacity that class can never grow."""
    return [
        Violation(
            "priority-class-autoscaler-cutoff",
            res.key,
            f"value {_get(res.props, 'value')} is below {AUTOSCALER_PRIORITY_CUTOFF}, so its pods never scale a GPU "
            "pool up, yet it may preempt: set preemptionPolicy: Never",
        )
        for res in _priority_classes(resources)
        if (int_or_none(_get(res.props, "value")) or 0) < AUTOSCALER_PRIORITY_CUTOFF
        and _get(res.props, "preemptionPolicy") != "Never"
    ]


def priority_class_no_scheduler_preemption(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """Every job in a team namespace is Kueue's, and so is every preemption: a PriorityClass that
    lets the kube-scheduler preempt (the API's default when unset) undoes what Kueue admitted
    (components.kubernetes.tiers)."""
    return [
        Violation(
            "priority-class-kueue-preempts",
            res.key,
            f"preemptionPolicy {_get(res.props, 'preemptionPolicy') or 'PreemptLowerPriority (the default)'}: the "
            "kube-scheduler would evict pods of jobs Kueue admitted; set preemptionPolicy: Never and leave "
            "preemption to Kueue's ClusterQueue policy",
        )
        for res in _priority_classes(resources)
        if _get(res.props, "preemptionPolicy") not in ("Never", UNKNOWN)
    ]


def _priority_classes(resources: Iterable[Resource]) -> list[Resource]:
    return [res for res in resources if res.type == PRIORITY_CLASS]

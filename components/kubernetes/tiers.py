"""Priority tiers: the platform's default PriorityClasses, as data.

Each tier becomes a PriorityClass (what the kube-scheduler uses to order pods) and a Kueue
WorkloadPriorityClass of the same name and value (what Kueue uses to order and preempt jobs), so
one name picks the same rank in both. Preemption is Kueue's alone: every PriorityClass is
`preemptionPolicy: Never`. Kueue ignores `PriorityClass.preemptionPolicy` for its own preemption
(kueue v0.19.2 pkg/scheduler/preemption/common/preemption_policy.go SatisfiesPreemptionPolicy:
the workloads' priorities and the ClusterQueue's `preemption` policy only), while the kube-scheduler would let the pending pods of a job Kueue admitted
before its nodes exist evict running pods of another admitted job, undoing Kueue's decision.

The values leave room between tiers for teams to add their own, and stay far below the
system classes (2,000,000,000 and up). `opportunistic` sits below the cluster autoscaler's
`--expendable-pods-priority-cutoff` (default -10): its pods never cause a scale-up and are the
first to go when capacity is needed, so it only ever uses GPUs that are already idle.
"""

from __future__ import annotations

from components.spec import PlatformSpec, PriorityTierSpec

# The cluster autoscaler ignores pending pods below this priority (its flag's default).
AUTOSCALER_EXPENDABLE_CUTOFF = -10

DEFAULT_TIERS: tuple[PriorityTierSpec, ...] = (
    PriorityTierSpec(
        name="production",
        value=100_000,
        preemption_policy="Never",
        description="Deadline-bound training runs: Kueue preempts every lower tier for them.",
    ),
    PriorityTierSpec(
        name="standard",
        value=10_000,
        preemption_policy="Never",
        # Pods that name no class get this one, so forgetting the label is never a surprise
        # demotion below best-effort work.
        global_default=True,
        description="Everyday training and evaluation; the default for pods that name no class.",
    ),
    PriorityTierSpec(
        name="best-effort",
        value=1_000,
        preemption_policy="Never",
        description="Experiments that can wait for free GPUs; they preempt only opportunistic work.",
    ),
    PriorityTierSpec(
        name="opportunistic",
        value=-100,
        preemption_policy="Never",
        description=(
            "Soaks up idle GPUs only: below the autoscaler's expendable cutoff, so it never "
            "adds nodes, and the first to be preempted."
        ),
    ),
)


def priority_tiers(spec: PlatformSpec) -> tuple[PriorityTierSpec, ...]:
    """The stack's tiers: its own list when it gives one, else the defaults."""
    if spec.scheduling.priority_tiers is None:
        return DEFAULT_TIERS
    return tuple(spec.scheduling.priority_tiers)

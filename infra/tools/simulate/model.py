"""The simulation model of a stack, read from what the stack deploys (its synthesized objects).

Nothing here reads the spec: pools come from the node groups (EKS) or node pools (GKE) in
resources.json, matched to Kueue's ResourceFlavors by their node labels as the scheduler would;
queues, quotas, cohort, preemption policies and priority tiers from the Kueue objects and
PriorityClasses in manifests/; the autoscaler's timings from its Helm release (EKS) or the GKE
cluster's autoscaling profile; Kueue's waitForPodsReady from the configuration its release
carries. A change in a pull request is therefore simulated exactly as it would be deployed.

Every figure that no object declares is a parameter below, with its default and where the
default comes from; docs/capacity-planning.md lists them all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

# Seconds from the autoscaler's scale-up decision to a node whose GPUs a pod can use, per cloud
# and instance family. Planning figures, not measurements: the autoscaler reacts within 30 s on
# clusters under 100 nodes (cluster-autoscaler FAQ, "What are the Service Level Objectives"),
# then the instance boots and joins (minutes; longer for the 8-GPU shapes with their large
# images, EFA or GPUDirect setup) and GKE installs the driver, and a GPU node can take up to 15
# minutes to report its GPUs allocatable (cluster-autoscaler utils/gpu/gpu.go). Measure your own
# (a node's creationTimestamp to its first allocatable nvidia.com/gpu) and pass
# `--scale-up-s POOL=SECONDS`.
SCALE_UP_S: dict[tuple[str, str], float] = {
    ("aws", "g4dn"): 240,
    ("aws", "g5"): 240,
    ("aws", "g6"): 240,
    ("aws", "g6e"): 240,
    ("aws", "p4d"): 600,
    ("aws", "p4de"): 600,
    ("aws", "p5"): 600,
    ("aws", "p5e"): 600,
    ("aws", "p5en"): 600,
    ("aws", "p6"): 600,
    ("gcp", "g2"): 360,
    ("gcp", "n1"): 360,
    ("gcp", "a2"): 420,
    ("gcp", "a3"): 600,
    ("gcp", "a4"): 600,
}

# Spot nodes lost per node and day, a Poisson process per pool. AWS publishes only bands of the
# share of Spot capacity reclaimed in the trailing month (Spot Instance Advisor, "frequency of
# interruption": <5%, 5-10%, 10-15%, 15-20%, >20%), and GPU types mostly sit in the top one;
# Google publishes no rate for Spot VMs. The default is the top AWS band's floor, 20% a month,
# for both clouds: pass `--spot-rate POOL=PER_NODE_DAY` with your own history.
SPOT_INTERRUPTIONS_PER_NODE_DAY = 0.2 / 30

# The cluster autoscaler's defaults where a deployment does not set the flag (cluster-autoscaler
# FAQ, "What are the parameters to CA?", and the chart's values): a node is removed after 10
# minutes unneeded, not within 10 minutes of a scale-up, and pods below priority -10 never cause
# a scale-up and never keep a node.
AUTOSCALER_UNNEEDED_S = 600.0
AUTOSCALER_DELAY_AFTER_ADD_S = 600.0

# GKE runs its own autoscaler and does not publish these flags; its profiles are described only
# qualitatively ("OPTIMIZE_UTILIZATION ... removes nodes faster", GKE cluster autoscaler docs).
# The upstream defaults stand in for both profiles, so idle time on GKE is an upper bound. Under
# OPTIMIZE_UTILIZATION GKE's scheduler prefers the most allocated node (bin packing); elsewhere
# the default kube-scheduler scores the least allocated node highest (NodeResourcesFit,
# LeastAllocated), which for GPU pods that request CPU and memory in proportion to their GPU
# slots (gpu-platform job) spreads them over nodes.
GKE_PACKING_PROFILE = "OPTIMIZE_UTILIZATION"

# Kueue 0.19 Configuration defaults (apis/config/v1beta2/defaults.go): waitForPodsReady is always
# on, with a 30 minute timeout for an admitted workload to have all pods ready, the same for a
# running workload whose pods are lost (recoveryTimeout), and requeuing after 60 s doubling up
# to 3600 s, ordered by the eviction time.
KUEUE_PODS_READY_TIMEOUT_S = 1800.0
KUEUE_BACKOFF_BASE_S = 60.0
KUEUE_BACKOFF_MAX_S = 3600.0
KUEUE_REQUEUE_TIMESTAMP = "Eviction"

# Seconds a preemption waits when a target was admitted at that very instant (the engine's module
# doc says why). Kueue marks the targets Evicted, their JobSets are suspended, their quota is
# released once the jobs report no active pods (a batch Job counts a terminating pod as inactive:
# Kueue keps/6143-pod-integration-fast-quota-release), and the preemptor is admitted in a later
# scheduling cycle: API round trips of seconds. A planning figure, not a measurement.
PREEMPTION_S = 10.0

# Preemption policies Kueue accepts (apis/kueue/v1beta2 clusterqueue_types.go) and the ones this
# model implements: every value of withinClusterQueue and reclaimWithinCohort; borrowWithinCohort
# only `Never` (the default, and what the stacks deploy).
WITHIN_CLUSTER_QUEUE = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
RECLAIM_WITHIN_COHORT = ("Never", "LowerPriority", "Any")
QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")

# Kueue's fair-sharing preemption strategies (apis/config/v1beta2/configuration_types.go,
# FairSharing.PreemptionStrategies) and the default when the list is empty
# (pkg/scheduler/preemption/preemption.go, parseStrategies): the first is tried on every
# candidate, the second (only LessThanInitialShare may come second) on those the first refused.
LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
FAIR_SHARING_STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)


class ModelError(Exception):
    """The synthesized objects hold something this model cannot simulate faithfully."""


# What the model knowingly does not simulate, by name: a stack that deploys one of these is
# refused with its name (Refused), never simulated as if it were something else.
# docs/capacity-planning.md ("What simulate refuses") lists the same names.
REFUSALS: dict[str, str] = {
    "admission-fair-sharing": "Kueue admission fair sharing (admissionFairSharing): ordering by LocalQueue usage history",
    "kube-scheduler-preemption": "a PriorityClass whose preemptionPolicy is not Never: pods preempting at the kube-scheduler",
    "borrow-within-cohort": "preemption.borrowWithinCohort other than Never: preempting while borrowing",
    "hierarchical-cohorts": "a Cohort with a parentName: quota lent through a tree of cohorts",
    "fixed-size-node-pool": "a GKE node pool without autoscaling limits: a fixed node count",
}


class Refused(ModelError):
    """The stack deploys something in REFUSALS."""

    def __init__(self, reason: str, detail: str) -> None:
        assert reason in REFUSALS, f"undocumented refusal {reason!r}"
        super().__init__(f"{detail}: not simulated (refused: {reason}; docs/capacity-planning.md)")
        self.reason = reason


# --- the model ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolModel:
    name: str
    cloud: str
    # None for nodes of an existing cluster.
    instance_type: str | None
    gpu_model: str
    gpus_per_node: int
    # nvidia.com/gpu one node advertises: GPUs x sharing replicas or MIG instances.
    slots_per_node: int
    # none: one job per node (whole GPUs); shared: time-slicing or MPS; mig: MIG instances.
    # Shared and MIG nodes take jobs slot by slot.
    sharing: str
    # The most slots one pod may request on a node (1 where shared GPUs refuse larger requests).
    max_pod_slots: int
    min_nodes: int
    max_nodes: int
    spot: bool
    # Catalog estimate (catalog.PRICE_NOTE); None for nodes of an existing cluster.
    usd_per_node_hour: float | None
    scale_up_s: float
    interruptions_per_node_day: float
    # False on existing clusters: nodes are what they are.
    autoscaled: bool

    @property
    def whole_nodes(self) -> bool:
        return self.sharing == "none"

    @property
    def max_slots(self) -> int:
        return self.max_nodes * self.slots_per_node


@dataclass(frozen=True)
class QueueModel:
    """A Kueue ClusterQueue: GPU slot quotas per flavor (pool) and its policies. A flavor the
    queue does not list is absent from `nominal`: Kueue admits nothing there, not even borrowed."""

    name: str
    cohort: str | None
    nominal: Mapping[str, int]
    borrowing_limit: Mapping[str, int | None]
    lending_limit: Mapping[str, int | None]
    within_cluster_queue: str
    reclaim_within_cohort: str
    queueing_strategy: str
    # Admission checks (e.g. GKE queued provisioning) are not simulated: a job is admitted on
    # quota and its nodes come from the autoscaler's scale-up. Listed in summary.json.
    admission_checks: tuple[str, ...] = ()
    # spec.fairSharing.weight (Kueue's default 1); read only where fair sharing is on.
    fair_weight: float = 1.0


@dataclass(frozen=True)
class Tier:
    # Kueue's WorkloadPriorityClass value: admission order and preemption.
    priority: int
    # The PriorityClass value of the pods: the autoscaler's expendable cutoff and pod order.
    pod_priority: int


@dataclass(frozen=True)
class Autoscaler:
    unneeded_s: float
    delay_after_add_s: float
    # Pods with a lower priority never trigger a scale-up and never keep a node up.
    expendable_below: int
    pack_most_allocated: bool
    source: str


@dataclass(frozen=True)
class KueueConfig:
    pods_ready_timeout_s: float
    recovery_timeout_s: float
    backoff_base_s: float
    backoff_max_s: float
    # Eviction: a workload requeued after a timeout goes behind the ones queued meanwhile.
    requeue_timestamp: str
    # The configuration's fairSharing.preemptionStrategies, in order; None where fair sharing
    # is off (Kueue turns it on by the section's presence: pkg/scheduler/preemption/fairsharing
    # strategy.go, Enabled).
    fair_sharing: tuple[str, ...] | None = None


@dataclass(frozen=True)
class StackModel:
    stack: str
    cloud: str
    pools: tuple[PoolModel, ...]
    queues: tuple[QueueModel, ...]
    # Quota a cohort holds itself (its Cohort object), per pool.
    cohorts: Mapping[str, Mapping[str, int]]
    # team -> ClusterQueue name (the team's LocalQueue points at it).
    teams: Mapping[str, str]
    tiers: Mapping[str, Tier]
    # None on existing clusters: no node is ever added or removed.
    autoscaler: Autoscaler | None
    kueue: KueueConfig
    # Where each figure not read from an object came from, for summary.json.
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def pool(self, name: str) -> PoolModel:
        return next(p for p in self.pools if p.name == name)

    def queue(self, name: str) -> QueueModel:
        return next(q for q in self.queues if q.name == name)


@dataclass(frozen=True)
class Overrides:
    """Per-pool figures given on the command line instead of the defaults above."""

    spot_rates: Mapping[str, float] = field(default_factory=dict)
    scale_up_s: Mapping[str, float] = field(default_factory=dict)


def spot_rate_per_s(pool: PoolModel) -> float:
    """The pool's interruption rate per node-second (0 when not spot)."""
    return pool.interruptions_per_node_day / 86400.0


def backoff_s(kueue: KueueConfig, requeues: int) -> float:
    """Kueue's requeue delay after the n-th waitForPodsReady eviction: base x 2^(n-1), capped."""
    # The exponent is capped: past it the maximum has long been reached (and 2**n would overflow).
    return min(kueue.backoff_base_s * math.pow(2, min(requeues - 1, 64)), kueue.backoff_max_s)

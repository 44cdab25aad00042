"""Kueue's plan for the GPUs: flavors, queues and quotas derived from the pools and the teams.

- One ResourceFlavor per pool: the labels that find its nodes and a toleration of its taint,
  which Kueue adds to the pods it admits there.
- One ClusterQueue per team, in one cohort named after the cluster. A team's nominal quota on a
  pool is what the spec gives it (0 where it gives none); nominal quotas are guaranteed, and
  whatever a team leaves idle the others may borrow.
- Capacity no team was given is not lost: the cohort itself holds it as quota that every team
  may borrow. Per pool, team quotas plus the cohort's equal the pool's capacity
  (`Pool.max_slots`: max nodes x GPUs per node x sharing replicas).
- A stack without teams gets one team, `default`, in the `default` namespace, holding everything.

- Pools on GKE queued provisioning get their nodes only through ProvisioningRequests: their
  flavors carry an AdmissionCheck on every ClusterQueue, so Kueue reserves a job's quota, asks GKE
  (Dynamic Workload Scheduler) for all its nodes at once, and admits it only once they are there.

Kueue accounts only `nvidia.com/gpu` here (releases.kueue_configuration): CPU, memory and
devices such as EFA interfaces are the kube-scheduler's business, so jobs need no quota for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.kubernetes.topology import flavor_name
from components.naming import DEFAULT_TEAM, local_queue_name, team_namespace
from components.pools import GPU_RESOURCE, Pool
from components.spec import PlatformSpec

KUEUE_API = "kueue.x-k8s.io/v1beta2"
# Job labels Kueue reads (Kueue docs: "Run a Kubernetes Job", "Workload priority").
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
# Set by the API server on every namespace since Kubernetes 1.22.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

# ClusterQueue `preemption` (Kueue v1beta2 ClusterQueue API; docs "Preemption"):
PREEMPTION: dict[str, str] = {
    # A team's nominal quota is its own: a job that fits in it takes it back from borrowers of
    # any tier. `LowerPriority` would leave an equal-tier borrower holding it until it ends.
    "reclaimWithinCohort": "Any",
    # Within a team's own quota, higher tiers preempt lower ones.
    "withinClusterQueue": "LowerPriority",
}
# The LocalQueue Kueue's webhook puts jobs without a queue label in, in namespaces that
# managedJobsNamespaceSelector selects (pkg/controller/jobframework/defaults.go,
# DefaultLocalQueueName; no feature gate in 0.19.2).
DEFAULT_LOCAL_QUEUE = "default"
# Use a pool where the job fits within nominal quota before borrowing on another.
FLAVOR_FUNGIBILITY: dict[str, str] = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}

# Kueue's built-in ProvisioningRequest admission check controller (GA since Kueue 0.14; Kueue docs,
# "Provisioning Admission Check Controller"), and the class GKE's Dynamic Workload Scheduler serves
# for node pools with queued provisioning (GKE "Run a large-scale workload with flex-start with
# queued provisioning", Kueue section). One AdmissionCheck and its ProvisioningRequestConfig serve
# every queued pool; both are named after what they do.
QUEUED_PROVISIONING = "queued-provisioning"
PROVISIONING_REQUEST_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
# GKE taints queued-provisioning nodes `cloud.google.com/gke-queued=true:NoSchedule` (cluster-toolkit
# gke-node-pool docs: workloads need a toleration for it); their flavor's toleration goes on every
# pod Kueue admits there.
GKE_QUEUED_TAINT_KEY = "cloud.google.com/gke-queued"


@dataclass(frozen=True)
class TeamQueue:
    """One team's place in Kueue: its namespace, its queues and its nominal GPU slots per pool."""

    team: str
    namespace: str
    local_queue: str
    cluster_queue: str
    nominal: dict[str, int]
    # Kueue fair-sharing weight; None where fair sharing is off.
    fair_share_weight: int | None
    # False for the implicit `default` team: that namespace exists already and is not ours to
    # shape with quotas and limits.
    owns_namespace: bool


@dataclass(frozen=True)
class QueuePlan:
    cohort: str
    teams: tuple[TeamQueue, ...]
    # Quota the cohort holds itself: per pool, the capacity no team was given.
    shared: dict[str, int]
    # Most GPU slots one team can hold at once: its own quota plus all it may borrow, which is
    # every pool's capacity. The team namespaces' ResourceQuota; a lower figure would reject
    # the pods of jobs Kueue admitted on borrowed quota.
    team_gpu_ceiling: int
    # Flavors of pools on queued provisioning: admitted only after the admission check.
    queued_flavors: tuple[str, ...] = ()
    # Pool -> the name of its ResourceFlavor (components.kubernetes.topology.flavor_name).
    flavors: dict[str, str] = field(default_factory=dict[str, str])


def queue_plan(spec: PlatformSpec, pools: list[Pool]) -> QueuePlan:
    """Quotas as the spec asks; `parse_spec` has checked they fit in the pools."""
    fair = spec.scheduling.fair_sharing
    if spec.scheduling.teams:
        teams = tuple(
            _team_queue(
                team.name,
                {pool.name: team.quotas.get(pool.name, 0) for pool in pools},
                fair.weights.get(team.name, 1) if fair.enabled else None,
                owns_namespace=True,
            )
            for team in spec.scheduling.teams
        )
    else:
        teams = (_team_queue(DEFAULT_TEAM, {pool.name: pool.max_slots for pool in pools}, None, owns_namespace=False),)
    shared = {pool.name: pool.max_slots - sum(t.nominal[pool.name] for t in teams) for pool in pools}
    return QueuePlan(
        cohort=spec.cluster.name,
        teams=teams,
        shared=shared,
        team_gpu_ceiling=sum(pool.max_slots for pool in pools),
        queued_flavors=tuple(flavor_name(spec, pool) for pool in pools if pool.provisioning == "queued"),
        flavors={pool.name: flavor_name(spec, pool) for pool in pools},
    )


def _team_queue(team: str, nominal: dict[str, int], weight: int | None, owns_namespace: bool) -> TeamQueue:
    return TeamQueue(
        team=team,
        namespace=team_namespace(team),
        local_queue=local_queue_name(team),
        cluster_queue=team,
        nominal=nominal,
        fair_share_weight=weight,
        owns_namespace=owns_namespace,
    )


def local_queue_names(team: TeamQueue) -> list[str]:
    """The team's LocalQueues: its named queue, and `default` for jobs that name none."""
    return list(dict.fromkeys([team.local_queue, DEFAULT_LOCAL_QUEUE]))


def flavor_spec(pool: Pool) -> dict[str, Any]:
    tolerations = [{"key": pool.taint.key, "operator": "Equal", "value": pool.taint.value, "effect": pool.taint.effect}]
    if pool.provisioning == "queued":
        tolerations.append({"key": GKE_QUEUED_TAINT_KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"})
    return {"nodeLabels": pool.selector, "tolerations": tolerations}


# How often Kueue asks again after a ProvisioningRequest fails or its booking expires, before it
# deactivates the workload (`spec.active: false`; docs/gcp.md says how a team restores it). Kueue
# v1beta2 ProvisioningRequestConfig `retryStrategy` (CRD defaults 3, 60 s base, 1800 s cap; the
# wait doubles from the base up to the cap). Kueue v0.19.2 numbers requests from 1 and retries
# while the attempt is <= backoffLimitCount (pkg/controller/admissionchecks/provisioning/
# controller.go), so 6 means up to 7 ProvisioningRequests, about an hour of waits between them
# (60 + 120 + 240 + 480 + 960 + 1800 s). A queued request that finds no capacity does not fail: it
# stays queued until GKE has the nodes (GKE docs, "Run a large-scale workload with flex-start with
# queued provisioning": cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest), so
# the retries cover requests GKE fails, not waiting.
PROVISIONING_RETRY: dict[str, int] = {"backoffLimitCount": 6, "backoffBaseSeconds": 60, "backoffMaxSeconds": 1800}


def provisioning_request_config_spec() -> dict[str, Any]:
    """What Kueue asks GKE for: nodes for the job's GPU pods, in one queued request, retried as
    PROVISIONING_RETRY says."""
    return {
        "provisioningClassName": QUEUED_PROVISIONING_CLASS,
        "managedResources": [GPU_RESOURCE],
        "retryStrategy": dict(PROVISIONING_RETRY),
    }


def admission_check_spec() -> dict[str, Any]:
    return {
        "controllerName": PROVISIONING_REQUEST_CONTROLLER,
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": QUEUED_PROVISIONING},
    }


def _gpu_resource_groups(quotas: dict[str, int], plan: QueuePlan, pools: list[Pool]) -> list[dict[str, Any]]:
    return [
        {
            "coveredResources": [GPU_RESOURCE],
            "flavors": [
                {"name": plan.flavors.get(pool.name, pool.name), "resources": [{"name": GPU_RESOURCE, "nominalQuota": quotas[pool.name]}]}
                for pool in pools
            ],
        }
    ]


def cluster_queue_spec(team: TeamQueue, plan: QueuePlan, pools: list[Pool]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "cohortName": plan.cohort,
        # Only the team's own namespace may queue here.
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: team.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": dict(PREEMPTION),
        "flavorFungibility": dict(FLAVOR_FUNGIBILITY),
        "resourceGroups": _gpu_resource_groups(team.nominal, plan, pools),
    }
    if team.fair_share_weight is not None:
        spec["fairSharing"] = {"weight": team.fair_share_weight}
    if plan.queued_flavors:
        # Kueue v1beta2 ClusterQueue: the check runs only for workloads admitted on these flavors.
        spec["admissionChecksStrategy"] = {
            "admissionChecks": [{"name": QUEUED_PROVISIONING, "onFlavors": list(plan.queued_flavors)}]
        }
    return spec


def cohort_spec(plan: QueuePlan, pools: list[Pool]) -> dict[str, Any]:
    return {"resourceGroups": _gpu_resource_groups(plan.shared, plan, pools)}


def local_queue_spec(team: TeamQueue) -> dict[str, Any]:
    return {"clusterQueue": team.cluster_queue}

"""MultiKueue facts of Kueue v0.19.2: names its controllers read and the access a manager needs.

Sources (kubernetes-sigs/kueue@v0.19.2):
- site/content/en/docs/tasks/manage/setup_multikueue.md, "MultiKueue Specific Kubeconfig", and the
  script it runs, examples/multikueue/create-multikueue-kubeconfig.sh: the worker's ServiceAccount
  `multikueue-sa` in kueue-system, its ClusterRole, a `kubernetes.io/service-account-token` Secret
  and a kubeconfig with that token.
- apis/kueue/v1beta2 (MultiKueueCluster `spec.clusterSource.kubeConfig {locationType: Secret,
  location}`: the Secret, in Kueue's namespace, holds the kubeconfig under key `kubeconfig`,
  pkg/controller/admissionchecks/multikueue/multikueuecluster.go).
- apis/config/v1beta2/configuration_types.go and defaults.go: `multiKueue.dispatcherName`
  (default all-at-once), `workerLostTimeout` (default 15 minutes), `gcInterval` (1 minute).
- pkg/cache/scheduler/clusterqueue.go: a ClusterQueue with more than one MultiKueue admission
  check, or one applied to some flavors only, is inactive.
"""

from __future__ import annotations

from typing import Final

CONTROLLER_NAME: Final = "kueue.x-k8s.io/multikueue"
# JobSet `spec.managedBy` for JobSets the manager dispatches (Kueue's webhook defaults it when the
# job's ClusterQueue has the MultiKueue check; site/.../tasks/run/multikueue/jobsets.md).
MANAGED_BY: Final = "kueue.x-k8s.io/multikueue"
INCREMENTAL_DISPATCHER: Final = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
# Clusters the Incremental dispatcher nominates per round. Kueue defaults the step to 3
# (apis/config/v1beta2/defaults.go, `IncrementalDispatcherConfig.StepSize`; pkg/controller/
# workloaddispatcher/incrementaldispatcher.go getNextNominatedWorkers takes the first `stepSize`
# clusters not yet nominated), so with two workers both would get the job at once and the order
# would decide nothing. 1: one worker per round, in MultiKueueConfig order. Read only with the
# gate MultiKueueIncrementalDispatcherConfig, Beta and on by default since 0.19
# (pkg/features/kube_features.go); pkg/config/validation.go accepts it only with the incremental
# dispatcher and a step of at least 1.
INCREMENTAL_STEP_SIZE: Final = 1
# Rounds of the Incremental dispatcher: a batch of clusters, more after 5 minutes without admission.
INCREMENTAL_ROUND_MINUTES: Final = 5
DEFAULT_WORKER_LOST_TIMEOUT: Final = "15m"
# waitForPodsReady is on by default from the v1beta2 Configuration (0.19): defaults.go sets
# `waitForPodsReady` when absent, timeout 30 minutes, and pkg/util/waitforpodsready Enabled() is
# true unless the alpha gate DisableWaitForPodsReady is on. A worker whose pods stay unready that
# long evicts the Workload; the manager then resets its check to Retry and dispatches it again
# (docs/fleet.md, "Quota is not capacity").
DEFAULT_PODS_READY_TIMEOUT: Final = "30m"
DISABLE_PODS_READY_GATE: Final = "DisableWaitForPodsReady"
KUBECONFIG_KEY: Final = "kubeconfig"

WORKER_SERVICE_ACCOUNT: Final = "multikueue-sa"
WORKER_ROLE: Final = "multikueue-sa-role"
WORKER_BINDING: Final = "multikueue-sa-crb"
WORKER_TOKEN_SECRET: Final = "multikueue-sa"

_OBJECT_VERBS: Final = ("create", "delete", "get", "list", "watch")

# The documented worker ClusterRole (site/static/examples/multikueue/create-multikueue-kubeconfig.sh,
# the role it writes) restricted to the kinds this platform dispatches: its batch Job, JobSet and
# Workload rules, verb for verb. Workloads keep `update` and `patch`: the manager Updates the
# remote Workload to remove its finalizer before deleting it and to carry a priority change
# (pkg/controller/admissionchecks/multikueue/workload.go, RemoveRemoteObjects and step 5).
# Left out of the documented role: the rules for Kubeflow, Ray, AppWrapper and pods (the manager
# enables only batch/job and jobset, components.kubernetes.releases.MANAGER_FRAMEWORKS; those
# CRDs are not on our workers), and `get` on clusterqueues and localqueues, which only the alpha
# gate MultiKueueManagerQuotaAutomation reads (off here).
WORKER_RULES: Final[tuple[dict[str, list[str]], ...]] = (
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": list(_OBJECT_VERBS)},
    {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": list(_OBJECT_VERBS)},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": [*_OBJECT_VERBS, "update", "patch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
)


def allowed(api_group: str, resource: str) -> frozenset[str]:
    """The verbs the documented role grants on one resource of one API group."""
    return frozenset(
        verb
        for rule in WORKER_RULES
        if api_group in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    )

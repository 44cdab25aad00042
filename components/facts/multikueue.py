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
# Rounds of the Incremental dispatcher: a batch of clusters, more after 5 minutes without admission.
INCREMENTAL_ROUND_MINUTES: Final = 5
DEFAULT_WORKER_LOST_TIMEOUT: Final = "15m"
KUBECONFIG_KEY: Final = "kubeconfig"

WORKER_SERVICE_ACCOUNT: Final = "multikueue-sa"
WORKER_ROLE: Final = "multikueue-sa-role"
WORKER_BINDING: Final = "multikueue-sa-crb"
WORKER_TOKEN_SECRET: Final = "multikueue-sa"

_OBJECT_VERBS: Final = ("create", "delete", "get", "list", "watch")

# The documented worker ClusterRole's rules for the kinds this platform dispatches: batch Jobs,
# JobSets and the Workloads of both. The script lists one rule pair per integration (Kubeflow,
# Ray, AppWrapper, pods too); the manager enables only batch/job and jobset (components.fleet.
# manager), and those CRDs are not on our workers, so their rules are left out, not widened.
WORKER_RULES: Final[tuple[dict[str, list[str]], ...]] = (
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": list(_OBJECT_VERBS)},
    {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": list(_OBJECT_VERBS)},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": list(_OBJECT_VERBS)},
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

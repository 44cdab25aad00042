"""The policy rules as data: id, what each protects, how hard it enforces, whether it can be waived.

One table read by the spec (which overrides are allowed), the rule functions (components.checks.rules),
the CrossGuard pack (policy/) and the offline `gpu-platform check`, so a rule means the same thing
in a pull request, in a real `pulumi preview` and in the docs. Kept free of other imports so the
spec can read it without a cycle.

Enforcement: mandatory violations fail `check` and block `pulumi preview --policy-pack`; advisory
ones are reported only. `overridable` rules may be waived per stack by an explicit entry
`policy.overrides: [{rule, reason}]` in the stack file; the others have no waiver: a team that
needs different limits changes the limit (`policy.maxNodesPerPool`, `policy.maxGpus`,
`policy.allowSpot`), in a reviewed change like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Enforcement = Literal["mandatory", "advisory"]
Severity = Literal["low", "medium", "high", "critical"]
# resource: judged one resource at a time; stack: needs several resources (links, totals).
Scope = Literal["resource", "stack"]


@dataclass(frozen=True)
class RuleInfo:
    id: str
    description: str
    severity: Severity
    enforcement: Enforcement
    scope: Scope
    overridable: bool = False


RULES: tuple[RuleInfo, ...] = (
    RuleInfo(
        "gpu-pool-tainted",
        "GPU node pools carry the nvidia.com/gpu NoSchedule taint, so only pods that ask for GPUs land on GPU nodes.",
        "high",
        "mandatory",
        "resource",
    ),
    RuleInfo(
        "gpu-pool-scale-to-zero",
        "Outside prod, GPU node pools scale to zero (minimum size 0): an idle dev GPU pool is the most common waste.",
        "medium",
        "mandatory",
        "resource",
        overridable=True,
    ),
    RuleInfo(
        "gpu-pool-max-nodes",
        "No GPU node pool may grow beyond policy.maxNodesPerPool nodes.",
        "medium",
        "mandatory",
        "resource",
    ),
    RuleInfo(
        "stack-max-gpus",
        "All GPU pools of a stack together stay within policy.maxGpus physical GPUs at maximum scale.",
        "high",
        "mandatory",
        "stack",
    ),
    RuleInfo(
        "spot-allowed",
        "Spot (preemptible) nodes only where the stack allows them: policy.allowSpot, by default dev and staging.",
        "medium",
        "mandatory",
        "resource",
    ),
    RuleInfo(
        "prod-control-plane-private",
        "In prod the Kubernetes API endpoint is not reachable from the internet (EKS endpointPublicAccess off, "
        "GKE private endpoint).",
        "high",
        "mandatory",
        "resource",
        overridable=True,
    ),
    RuleInfo(
        "encrypted-storage",
        "Node disks (EBS volumes of launch templates), S3 buckets and EFS file systems are encrypted at rest, "
        "declared explicitly; "
        "GCE disks and GCS buckets are always encrypted by Google.",
        "high",
        "mandatory",
        "stack",
    ),
    RuleInfo(
        "imdsv2-required",
        "AWS nodes require IMDSv2 (launch template metadataOptions.httpTokens=required), so a pod cannot read "
        "the node's credentials with a plain GET.",
        "high",
        "mandatory",
        "resource",
    ),
    RuleInfo(
        "no-public-buckets",
        "Buckets are never public: S3 public access fully blocked, GCS public access prevention enforced, "
        "no grants to allUsers or allAuthenticatedUsers.",
        "critical",
        "mandatory",
        "stack",
    ),
    RuleInfo(
        "no-wildcard-iam",
        "IAM grants no wildcard permissions: no '*' or 'service:*' actions, no write actions on '*' resources "
        "without a condition, no AdministratorAccess, no GCP owner or editor roles.",
        "critical",
        "mandatory",
        "resource",
    ),
    RuleInfo(
        "trainer-non-root",
        "Pods that run as the trainer service account set securityContext.runAsNonRoot and never run as UID 0.",
        "high",
        "mandatory",
        "resource",
    ),
    RuleInfo(
        "prod-protected",
        "In prod, clusters and data buckets are protected (protect=True), so no change can delete them by accident.",
        "high",
        "mandatory",
        "resource",
    ),
    RuleInfo(
        "priority-class-range",
        "PriorityClass values stay within the user range (at most 1,000,000,000) and names avoid the reserved "
        "'system-' prefix.",
        "medium",
        "mandatory",
        "resource",
    ),
    RuleInfo(
        "priority-class-autoscaler-cutoff",
        "PriorityClasses below -10, the cluster autoscaler's expendable-pods cutoff, never preempt: their pods "
        "never scale a GPU pool up, so they may only use idle GPUs, never evict work for them.",
        "medium",
        "advisory",
        "resource",
    ),
    RuleInfo(
        "priority-class-kueue-preempts",
        "Every PriorityClass is preemptionPolicy: Never: the jobs that use them are Kueue's, and Kueue alone "
        "preempts (by its WorkloadPriorityClasses and the ClusterQueue policy); a kube-scheduler preemption "
        "would evict pods of a job Kueue admitted.",
        "high",
        "mandatory",
        "resource",
    ),
    RuleInfo(
        "eks-role-policies-first",
        "Every EKS cluster, node group and add-on depends on the policies of the role it uses: created after them, "
        "deleted before them, so EKS can still clean up its ENIs and instances.",
        "medium",
        "mandatory",
        "stack",
    ),
    RuleInfo(
        "autoscaler-drift-ignored",
        "Node counts the autoscaler owns are in ignoreChanges (EKS scalingConfig.desiredSize, GKE nodeCount), "
        "or every update and drift check fights the autoscaler.",
        "low",
        "advisory",
        "resource",
    ),
    RuleInfo(
        "kubernetes-standard-support",
        "The cluster's Kubernetes minor is in its cloud's standard support today (components.facts.catalog support "
        "windows): past it, EKS charges extended support or upgrades the cluster, and GKE upgrades it.",
        "medium",
        "advisory",
        "resource",
    ),
    RuleInfo(
        "job-fits-pool",
        "On every pool, the largest and the smallest job `gpu-platform job` accepts fit what the stack declares: "
        "the team's Kueue queue, flavor and quota, and a node scaled up from zero (the autoscaler's template and "
        "the real node: extended resources and huge pages, CPU and memory after reserved share and DaemonSets, "
        "with the AWS margin for other node agents left, labels, taints).",
        "high",
        "mandatory",
        "stack",
    ),
    RuleInfo(
        "karpenter-permissions-outlive-nodes",
        "The Karpenter release depends on its role's policy, its interruption queue's policy and the discovery "
        "tags, and its NodePools and EC2NodeClasses on the release: destroyed after them, so Karpenter can still "
        "drain and terminate its nodes.",
        "medium",
        "mandatory",
        "stack",
    ),
)

RULES = RULES + (
    RuleInfo(
        "kueue-manages-team-namespaces",
        "Kueue manages every job in the team namespaces (manageJobsWithoutQueueName with a "
        "managedJobsNamespaceSelector that selects each team namespace and no system namespace), and each team "
        "namespace has a `default` LocalQueue for jobs that name none: no job skips its team's quota.",
        "high",
        "mandatory",
        "stack",
    ),
    RuleInfo(
        "team-identity-isolated",
        "Each team's trainer identity reaches only its own data: no IAM statement or bucket grant reaches another "
        "team's prefix or the whole bucket, no role or Google service account is usable from several team "
        "namespaces, and a team's volume is bound only in its own namespace.",
        "critical",
        "mandatory",
        "stack",
    ),
    RuleInfo(
        "job-storage-reachable",
        "Every GCS FUSE volume of every job gpu-platform job accepts mounts and serves its pod: pod, Kubernetes "
        "service account, Workload Identity binding and Google service account lead to grants covering the CSI "
        "driver's and the sidecar's bucket access checks (or the volume skips them), listing and reading its folder "
        "and, read-write, creating and deleting objects there.",
        "critical",
        "mandatory",
        "stack",
    ),
    RuleInfo(
        "team-file-system-isolated",
        "No pod reaches the EFS file system except through its own team's claim: a file system policy denies "
        "every principal without TLS or outside the teams' access points and allows only the EFS CSI driver's role; "
        "no IAM document grants the client actions besides; team volumes mount through an access point with `iam` "
        "and TLS; the VPC CNI enforces NetworkPolicy, every team namespace closes TCP 2049 to its pods, and Pod "
        "Security keeps them off the host network.",
        "critical",
        "mandatory",
        "stack",
    ),
    RuleInfo(
        "team-pod-security-held",
        "A team namespace that Pod Security Admission leaves at privileged (GKE GPUDirect stacks) is selected by a "
        "ValidatingAdmissionPolicyBinding with the Deny action whose policy matches pod creation, fails closed, "
        "refuses host namespaces, privileged containers and host ports, admits hostPath only at the GPUDirect "
        "plugin's documented paths and exempts from restricted only the pinned daemon sidecar; a second bound "
        "policy refuses exec into that daemon.",
        "critical",
        "mandatory",
        "stack",
    ),
    RuleInfo(
        "team-rbac-namespaced",
        "Team members are bound only by RoleBindings in their own team's namespace; no ClusterRoleBinding names a "
        "team's member or group.",
        "high",
        "mandatory",
        "stack",
    ),
)

RULES = RULES + (
    RuleInfo(
        "multi-node-fabric-wired",
        "Every multi-node job `gpu-platform job` accepts on a fast-interconnect pool carries its cloud's fabric "
        "wiring and the fabric gate: on AWS EFA devices, FI_PROVIDER=efa and --fabric-check enforce with the "
        "shape's floor; on GKE GPUDirect pools the interface annotations, the TCPX/TCPXO daemon sidecar, the host "
        "plugin mounts, the family's NCCL environment, the plugin installer and --fabric-check enforce with a floor.",
        "high",
        "mandatory",
        "stack",
    ),
)

RULES = RULES + (
    RuleInfo(
        "fleet-worker-least-privilege",
        "The MultiKueue manager's ServiceAccount on a fleet worker is bound only to roles the stack declares, and "
        "those grant no more than Kueue's documented worker role for batch Jobs, JobSets and Workloads: no "
        "wildcard, no other resource or verb.",
        "high",
        "mandatory",
        "stack",
    ),
)

RULES_BY_ID: dict[str, RuleInfo] = {rule.id: rule for rule in RULES}
OVERRIDABLE: tuple[str, ...] = tuple(rule.id for rule in RULES if rule.overridable)

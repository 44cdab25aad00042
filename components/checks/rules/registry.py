"""Every rule by id, and the evaluation of a whole stack: each violation judged at its rule's level."""

from __future__ import annotations

from typing import Sequence

from components.checks.declared import Resource
from components.checks.rules import fabric, fleet, karpenter, lifecycle, pools, scheduling, security, teams
from components.checks.rules.base import Context, Finding, Rule, Violation
from components.facts.rule_catalog import RULES, RULES_BY_ID

CHECKS: dict[str, Rule] = {
    "gpu-pool-tainted": pools.gpu_pool_tainted,
    "gpu-pool-scale-to-zero": pools.gpu_pool_scale_to_zero,
    "gpu-pool-max-nodes": pools.gpu_pool_max_nodes,
    "stack-max-gpus": pools.stack_max_gpus,
    "spot-allowed": pools.spot_allowed,
    "prod-control-plane-private": security.prod_control_plane_private,
    "encrypted-storage": security.encrypted_storage,
    "imdsv2-required": security.imdsv2_required,
    "no-public-buckets": security.no_public_buckets,
    "no-wildcard-iam": security.no_wildcard_iam,
    "trainer-non-root": security.trainer_non_root,
    "prod-protected": lifecycle.prod_protected,
    "priority-class-range": scheduling.priority_class_range,
    "priority-class-autoscaler-cutoff": scheduling.priority_class_autoscaler_cutoff,
    "priority-class-kueue-preempts": scheduling.priority_class_no_scheduler_preemption,
    "autoscaler-drift-ignored": lifecycle.autoscaler_drift_ignored,
    "eks-role-policies-first": lifecycle.eks_role_policies_first,
    "kubernetes-standard-support": lifecycle.kubernetes_standard_support,
    "job-fits-pool": pools.job_fits_pool,
    "kueue-manages-team-namespaces": teams.kueue_manages_team_namespaces,
    "team-identity-isolated": teams.team_identity_isolated,
    "team-rbac-namespaced": teams.team_rbac_namespaced,
    "multi-node-fabric-wired": fabric.multi_node_fabric_wired,
    "job-storage-reachable": teams.job_storage_reachable,
    "team-file-system-isolated": teams.team_file_system_isolated,
    "team-pod-security-held": teams.team_pod_security_held,
    karpenter.RULE: karpenter.karpenter_permissions_outlive_nodes,
    fleet.RULE: fleet.fleet_worker_least_privilege,
}


def judge(violation: Violation, ctx: Context) -> Finding:
    """The level a violation counts at: the rule's enforcement, unless the stack waives it."""
    rule = RULES_BY_ID[violation.rule]
    if rule.overridable and rule.id in ctx.overrides:
        return Finding(violation, "overridden", ctx.overrides[rule.id])
    return Finding(violation, rule.enforcement)


def evaluate(resources: Sequence[Resource], ctx: Context) -> list[Finding]:
    """Every rule over a whole stack, findings sorted by rule, resource and message."""
    findings = [judge(v, ctx) for rule in RULES for v in CHECKS[rule.id](resources, ctx)]
    return sorted(findings, key=lambda f: (f.rule, f.violation.resource or "", f.violation.message))

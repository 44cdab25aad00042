"""What a multi-node job needs of the pool's fabric: the trainer's fabric gate flags and the
environment NCCL's network plugin reads.

A job that takes whole nodes of a fast-interconnect pool whose wiring the platform renders (EFA
devices and aws-ofi-nccl on AWS) runs the gate in `enforce` mode with the shape's floor
(components.facts.fabric): a job that would train over the socket fallback stops before step 1.
Other multi-node jobs run it in `warn` mode, so their bandwidth is measured and recorded but
never stops them (GKE's GPUDirect wiring is not rendered yet: NCCL uses the primary NIC there,
and `warn` says so). Single-node jobs have no inter-node fabric and skip it.

A stopped gate is final: the network does not change on a retry. The trainer's ranks exit with
EXIT_FABRIC, but torchrun's elastic agent ends with 1 on any failed worker (torch
distributed/elastic/multiprocessing/errors ChildFailedError) and restarts the workers first
(--max-restarts). So every rank also writes the message to FABRIC_MARKER; a restarted attempt
that finds it stops at once, and the container's entry (components.jobs.torchrun) exits with
EXIT_FABRIC when torchrun ends and the marker exists. The Job's podFailurePolicy fails the Job on
that exit code and the JobSet fails as a whole on that rule's message instead of restarting.
"""

from __future__ import annotations

from typing import Any

from components.facts import fabric as facts
from components.pools import Pool

FABRIC_CHECK = "--fabric-check"
FABRIC_FLOOR = "--fabric-floor-gbps"
# The trainer's exit status for a stopped gate (training_images/src/trainer/fabric.py EXIT_FABRIC).
EXIT_FABRIC = 3
# Where the trainer records a stopped gate, in the container's own /tmp (read by the entry).
MARKER_ENV = "TRAINER_FABRIC_MARKER"
FABRIC_MARKER = "/tmp/trainer-fabric-failed"
FABRIC_FAILURE_RULE = "fabric-failure-is-final"
# The node's name in the gate's message (Kubernetes downward API, spec.nodeName).
NODE_NAME_ENV = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def enforced(pool: Pool, nodes: int, efa_devices: int) -> bool:
    """The gate stops this job: multi-node, on a fast-interconnect shape, with its fabric wired."""
    shape = pool.instance_type
    if nodes < 2 or shape is None or not shape.fast_interconnect or shape.name not in facts.FABRICS:
        return False
    return shape.cloud == "aws" and efa_devices > 0


def trainer_flags(pool: Pool, nodes: int, efa_devices: int) -> dict[str, str]:
    """The gate's flags `gpu-platform job` adds unless the trainer arguments set them."""
    if nodes < 2:
        return {}
    if not enforced(pool, nodes, efa_devices):
        return {FABRIC_CHECK: "warn"}
    assert pool.instance_type is not None
    return {FABRIC_CHECK: "enforce", FABRIC_FLOOR: f"{facts.FABRICS[pool.instance_type.name].floor_gbps:g}"}


def env(pool: Pool, nodes: int, efa_devices: int) -> list[dict[str, Any]]:
    """The container environment of the fabric: the node name for the gate's message on every
    multi-node job, and libfabric's settings where the pod claims EFA devices."""
    if nodes < 2:
        return []
    entries: list[dict[str, Any]] = [NODE_NAME_ENV, {"name": MARKER_ENV, "value": FABRIC_MARKER}]
    if efa_devices and pool.instance_type is not None:
        entries += [{"name": k, "value": v} for k, v in facts.efa_env(pool.instance_type.name).items()]
    return entries


def pod_failure_rule(container: str) -> dict[str, Any]:
    """The podFailurePolicy rule that fails the Job when the entry exits with EXIT_FABRIC
    (batch/v1 PodFailurePolicyOnExitCodesRequirement: operator In on the named container)."""
    return {"action": "FailJob", "onExitCodes": {"containerName": container, "operator": "In", "values": [EXIT_FABRIC]}}


def jobset_rule(pod_rule_index: int) -> dict[str, Any]:
    """The JobSet failurePolicy rule that fails the JobSet, no restart, when a Job failed by that
    podFailurePolicy rule. The Job controller's failure message ends "matching FailJob rule at
    index <i>" (kubernetes pkg/controller/job/pod_failure_policy.go, matchPodFailurePolicy);
    JobSet matches it as a regular expression (jobset >= v0.10.0 onJobFailureMessagePatterns,
    kubernetes-sigs/jobset#1033) and runs the first rule that matches, so this one goes first."""
    return {
        "name": FABRIC_FAILURE_RULE,
        "action": "FailJobSet",
        "onJobFailureReasons": ["PodFailurePolicy"],
        "onJobFailureMessagePatterns": [f"matching FailJob rule at index {pod_rule_index}$"],
    }

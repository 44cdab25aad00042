"""What a multi-node job needs of the pool's fabric: the trainer's fabric gate flags and the
environment NCCL's network plugin reads.

A job that takes whole nodes of a fast-interconnect pool whose wiring the platform renders runs
the gate in `enforce` mode with the shape's floor (components.facts.fabric): a job that would
train over the socket fallback stops before step 1. The wiring: EFA devices and libfabric's
settings on AWS; on GKE GPUDirect pools (components.pools) the pod's extra interfaces
(`networking.gke.io/interfaces`), the family's receive-datapath daemon as a native sidecar where
it has one (TCPX, TCPXO), the host's plugin libraries and the NCCL environment the family
documents (components.facts.gpudirect). Other multi-node jobs run the gate in `warn` mode, so
their bandwidth is measured and recorded but never stops them. Single-node jobs have no
inter-node fabric: they get none of it.

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
from components.facts.gpudirect import GpuDirect
from components.pools import Pool, gpudirect_of
from components.spec import NodePoolSpec, PlatformSpec

FABRIC_CHECK = "--fabric-check"
FABRIC_FLOOR = "--fabric-floor-gbps"
# The trainer's exit status for a stopped gate (training_images/src/trainer/fabric.py EXIT_FABRIC).
EXIT_FABRIC = 3
# Where the trainer records a stopped gate, in the container's own /tmp (read by the entry).
MARKER_ENV = "TRAINER_FABRIC_MARKER"
FABRIC_MARKER = "/tmp/trainer-fabric-failed"
FABRIC_FAILURE_RULE = "fabric-failure-is-final"
# A GPUDirect pod waits (bounded) for the family's NCCL plugin library before torchrun starts: on a
# fresh node the installer DaemonSet may still be copying it, and NCCL without it would pick
# sockets, which the gate takes as final. Past the wait the pod fails with status 1, which the
# JobSet retries, not with EXIT_FABRIC.
PLUGIN_ENV = "TRAINER_NCCL_PLUGIN"
PLUGIN_WAIT_ENV = "TRAINER_NCCL_PLUGIN_WAIT_SECONDS"
PLUGIN_WAIT_S = 300
# The node's name in the gate's message (Kubernetes downward API, spec.nodeName).
NODE_NAME_ENV = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def enforced(pool: Pool, nodes: int, wired: bool) -> bool:
    """The gate stops this job: multi-node, on a fast-interconnect shape, with its fabric wired
    (EFA devices claimed, or the pod wired to its GKE pool's GPUDirect networks)."""
    shape = pool.instance_type
    if nodes < 2 or shape is None or not shape.fast_interconnect or shape.name not in facts.FABRICS:
        return False
    return wired


def trainer_flags(pool: Pool, nodes: int, wired: bool) -> dict[str, str]:
    """The gate's flags `gpu-platform job` adds unless the trainer arguments set them."""
    if nodes < 2:
        return {}
    if not enforced(pool, nodes, wired):
        return {FABRIC_CHECK: "warn"}
    assert pool.instance_type is not None
    return {FABRIC_CHECK: "enforce", FABRIC_FLOOR: f"{facts.FABRICS[pool.instance_type.name].floor_gbps:g}"}


def env(pool: Pool, nodes: int, efa_devices: int, family: GpuDirect | None = None) -> list[dict[str, Any]]:
    """The container environment of the fabric: the node name for the gate's message on every
    multi-node job, libfabric's settings where the pod claims EFA devices, and the GPUDirect
    family's NCCL settings where the pod is wired to them."""
    if nodes < 2:
        return []
    entries: list[dict[str, Any]] = [NODE_NAME_ENV, {"name": MARKER_ENV, "value": FABRIC_MARKER}]
    if efa_devices and pool.instance_type is not None:
        entries += [{"name": k, "value": v} for k, v in facts.efa_env(pool.instance_type.name).items()]
    if family is not None:
        entries += [{"name": k, "value": v} for k, v in family.env.items()]
        entries += [{"name": PLUGIN_ENV, "value": family.plugin_library}, {"name": PLUGIN_WAIT_ENV, "value": str(PLUGIN_WAIT_S)}]
    return entries


# --- GKE GPUDirect ----------------------------------------------------------------------------

def gke_family(spec: PlatformSpec, spec_pool: NodePoolSpec, pool: Pool, nodes: int, gpus_per_node: int) -> GpuDirect | None:
    """The GPUDirect stack a job's pods are wired to: multi-node jobs taking every GPU of a node
    of a GPUDirect pool (GKE's guides: a workload uses all GPUs and all GPU NICs of its node)."""
    if nodes < 2 or gpus_per_node < pool.gpus_per_node:
        return None
    return gpudirect_of(spec, spec_pool)


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

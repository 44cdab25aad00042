"""What a multi-node job needs of the pool's fabric: the trainer's fabric gate flags and the
environment NCCL's network plugin reads.

A job that takes whole nodes of a fast-interconnect pool whose wiring the platform renders (EFA
devices and aws-ofi-nccl on AWS) runs the gate in `enforce` mode with the shape's floor
(components.facts.fabric): a job that would train over the socket fallback stops before step 1.
Other multi-node jobs run it in `warn` mode, so their bandwidth is measured and recorded but
never stops them (GKE's GPUDirect wiring is not rendered yet: NCCL uses the primary NIC there,
and `warn` says so). Single-node jobs have no inter-node fabric and skip it.
"""

from __future__ import annotations

from typing import Any

from components.facts import fabric as facts
from components.pools import Pool

FABRIC_CHECK = "--fabric-check"
FABRIC_FLOOR = "--fabric-floor-gbps"
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
    entries: list[dict[str, Any]] = [NODE_NAME_ENV]
    if efa_devices and pool.instance_type is not None:
        entries += [{"name": k, "value": v} for k, v in facts.efa_env(pool.instance_type.name).items()]
    return entries

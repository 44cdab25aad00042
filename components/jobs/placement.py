"""Where Kueue places a multi-node job's pods: `gpu-platform job --topology required|preferred|none`.

On a pool whose ResourceFlavor names the cluster's Topology (components.kubernetes.topology),
the pod template carries Kueue's podset topology annotation at the cloud's block level
(components.facts.topology): `required` admits the job only when all its pods fit in one block,
`preferred` (the default for multi-node jobs there) packs them into as few blocks as it can and
falls back to broader levels. Kueue refuses a TAS annotation on a flavor without a topology, so
elsewhere the default is `none` and asking for placement is an error that says why.

`required` is refused on a queued-provisioning pool: the cluster autoscaler provisions a
ProvisioningRequest's nodes with no notion of topology, so nodes granted across blocks can never
satisfy the required block; the request's booking then expires and Kueue requeues the job, again
and again (kubernetes-sigs/kueue#5078, the TAS KEP's ProvisioningRequest support: `preferred` is
the mode that works there).
"""

from __future__ import annotations

from components.facts import topology as facts
from components.kubernetes.topology import PREFERRED_ANNOTATION, REQUIRED_ANNOTATION, flavor_topology
from components.pools import Pool
from components.spec import PlatformSpec

MODES = ("required", "preferred", "none")


def mode(spec: PlatformSpec, pool: Pool, nodes: int, requested: str | None) -> str:
    """The mode a job gets: the one asked for, else `preferred` for multi-node jobs on TAS flavors."""
    if requested is not None:
        return requested
    return "preferred" if nodes > 1 and flavor_topology(spec, pool) else "none"


def problems(spec: PlatformSpec, pool: Pool, requested: str | None) -> list[str]:
    if requested is not None and requested not in MODES:
        return [f"--topology: expected one of {', '.join(MODES)}, got {requested!r}"]
    if requested in ("required", "preferred") and not flavor_topology(spec, pool):
        return [
            f"--topology {requested}: pool {pool.name}'s Kueue flavor places by no topology (Kueue counts only "
            "Ready nodes for topology-aware placement, so only multi-node fabric pools whose nodes stand ready "
            "or come by ProvisioningRequest get one); use --topology none"
        ]
    if requested == "required" and pool.provisioning == "queued":
        return [
            f"--topology required: pool {pool.name} gets its nodes by queued provisioning, which places them "
            "with no regard to topology blocks; a grant across blocks never fits a required block, its booking "
            "expires and Kueue requeues the job in a loop (kueue#5078); use --topology preferred"
        ]
    return []


def topology_annotations(spec: PlatformSpec, pool: Pool, nodes: int, requested: str | None) -> dict[str, str]:
    """The pod template annotation Kueue reads for the job's one PodSet."""
    chosen = mode(spec, pool, nodes, requested)
    if chosen == "none":
        return {}
    key = REQUIRED_ANNOTATION if chosen == "required" else PREFERRED_ANNOTATION
    return {key: facts.BLOCK_LEVEL[spec.cloud]}

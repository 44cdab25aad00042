"""`multi-node-fabric-wired`: every multi-node job `gpu-platform job` accepts on a fast-interconnect
pool carries the wiring its cloud's fabric needs and the fabric gate that proves it before step 1.

The largest job of each such pool (all its nodes, every GPU of a node) is rendered with the real
renderer and read as its consumers read it: the trainer's own parser for the gate's flags
(trainer.config), the container's resources and environment as the EFA device plugin and
libfabric see them. AWS pools are fabric pools where the spec turns EFA on (`efa: true`), GKE
pools where the shape has GPUDirect. AWS: EFA devices requested (vpc.amazonaws.com/efa, advertised by the EFA
device plugin), FI_PROVIDER=efa (libfabric's provider), and `--fabric-check enforce` with a
floor. GKE: GPUDirect's networks are not rendered yet, so NCCL uses the primary NIC there; until
they are, the rule asks for the gate (`warn` or `enforce`), which measures and reports it.
"""

from __future__ import annotations

from typing import Any, Sequence

from trainer import config as trainer_config

from components.checks.declared import Resource
from components.checks.rules.base import Context, Violation
from components.jobs import renderer
from components.kubernetes.queues import queue_plan
from components.kubernetes.tiers import priority_tiers
from components.node_resources import EFA_RESOURCE
from components.pools import Pool, derive_pools

RULE = "multi-node-fabric-wired"
# torchrun runs `-m trainer <argv>` (components.jobs.torchrun).
TRAINER_MODULE = "trainer"
PROBE_IMAGE = "registry.invalid/gpu-platform/fabric-rule:0"


def _request(pool: Pool, team: str, tier: str) -> renderer.JobRequest:
    nodes, gpus = pool.max_nodes, pool.gpus_per_node
    args = ["--preset", "tiny", "--max-steps", "1", "--checkpoint-every", "1", "--global-batch-size",
            str(nodes * gpus), "--seq-len", "128", "--seed", "0", "--data", "/data/datasets/corpus"]
    return renderer.JobRequest(pool=pool.name, nodes=nodes, gpus_per_node=gpus, team=team, tier=tier,
                               image=PROBE_IMAGE, trainer_args=args)


def _trainer_cfg(container: dict[str, Any]) -> trainer_config.TrainConfig | None:
    args = [str(a) for a in container.get("args", [])]
    if TRAINER_MODULE not in args:
        return None
    parsed = trainer_config.parse(args[args.index(TRAINER_MODULE) + 1:])
    return parsed if isinstance(parsed, trainer_config.TrainConfig) else None


def missing_pieces(cloud: str, jobset: dict[str, Any]) -> list[str]:
    """What the rendered multi-node job lacks of its cloud's fabric wiring and the gate."""
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "trainer")
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    cfg = _trainer_cfg(container)
    missing: list[str] = []
    gate = cfg.fabric_check if cfg is not None else "off"
    if cloud == "aws":
        if int(container["resources"]["limits"].get(EFA_RESOURCE, 0)) < 1:
            missing.append(f"no {EFA_RESOURCE} devices requested")
        if env.get("FI_PROVIDER") != "efa":
            missing.append("FI_PROVIDER=efa not set (libfabric would not pick the EFA provider)")
        if gate != "enforce" or cfg is None or cfg.fabric_floor_gbps is None:
            missing.append(f"the fabric gate is not enforced with a floor (--fabric-check {gate})")
    elif gate == "off":
        missing.append("no fabric gate (--fabric-check off): a socket fallback would go unreported")
    return missing


def multi_node_fabric_wired(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    if ctx.spec is None or ctx.spec.cloud not in ("aws", "gcp"):
        return []
    spec = ctx.spec
    pools = derive_pools(spec)
    team = queue_plan(spec, pools).teams[0].team
    tier = priority_tiers(spec)[0].name
    found: list[Violation] = []
    for pool in pools:
        shape = pool.instance_type
        if shape is None or not shape.fast_interconnect or pool.max_nodes < 2 or renderer.shared_gpus(pool):
            continue
        if spec.cloud == "aws" and not next(p for p in spec.node_pools if p.name == pool.name).efa:
            continue  # EFA off in the spec: the pool is no fabric pool (its shape merely could be)
        try:
            jobset = renderer.render(spec, _request(pool, team, tier))
        except renderer.JobError:
            continue  # job-fits-pool reports the jobs the renderer refuses
        for piece in missing_pieces(spec.cloud, jobset):
            found.append(Violation(RULE, None, f"pool {pool.name} ({shape.name}), job {pool.max_nodes} node(s): {piece}"))
    return found

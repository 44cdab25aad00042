"""`multi-node-fabric-wired`: every multi-node job `gpu-platform job` accepts on a fast-interconnect
pool carries the wiring its cloud's fabric needs and the fabric gate that proves it before step 1.

The largest job of each such pool (all its nodes, every GPU of a node) is rendered with the real
renderer and read as its consumers read it: the trainer's own parser for the gate's flags
(trainer.config), the container's resources and environment as the EFA device plugin and
libfabric see them. AWS pools are fabric pools where the spec turns EFA on (`efa: true`), GKE
pools where the shape has GPUDirect. AWS: EFA devices requested (vpc.amazonaws.com/efa, advertised by the EFA
device plugin), FI_PROVIDER=efa (libfabric's provider), and `--fabric-check enforce` with a
floor. GKE GPUDirect pools (components.pools: GPUDirect shape, `multiGpuTraining`): the pod's
interface annotations naming the pool's `Network` objects as GKE multi-networking reads them
(JSON list of interfaceName/network, eth0 on `default`), the family's daemon as a native sidecar
with its device annotation (TCPX, TCPXO), the host's plugin libraries mounted from where the
installer puts them, the family's NCCL environment, `--fabric-check enforce` with a floor, and,
where the synthesized stack is given, the family's installer DaemonSet on the pool's nodes. Other
GKE fast-interconnect pools (no `multiGpuTraining`) get no GPUDirect; there the rule asks for
the gate (`warn` or `enforce`), which measures and reports the primary NIC NCCL uses.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from trainer import config as trainer_config

from components.checks.declared import Resource
from components.checks.rules.base import Context, Violation
from components.facts.gpudirect import DEVICE_ANNOTATION_PREFIX, GpuDirect
from components.jobs import renderer
from components.kubernetes.queues import queue_plan
from components.kubernetes.tiers import priority_tiers
from components.node_resources import EFA_RESOURCE
from components.pools import (
    DEFAULT_INTERFACE_ANNOTATION,
    INTERFACES_ANNOTATION,
    NODE_POOL_LABEL,
    Pool,
    derive_pools,
    gpudirect_of,
    network_object,
)

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


def _interfaces(annotations: dict[str, Any]) -> list[tuple[str, str]] | None:
    try:
        parsed = json.loads(annotations.get(INTERFACES_ANNOTATION, ""))
        return [(str(i["interfaceName"]), str(i["network"])) for i in parsed]
    except (ValueError, TypeError, KeyError):
        return None


def _host_paths(pod: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["hostPath"]["path"] for v in pod.get("volumes", []) if "hostPath" in v}


def gke_missing(pool: str, family: GpuDirect, template: dict[str, Any]) -> list[str]:
    """What a GKE GPUDirect pod template lacks of its family's wiring."""
    pod, annotations = template["spec"], template.get("metadata", {}).get("annotations", {})
    container = next(c for c in pod["containers"] if c["name"] == "trainer")
    missing: list[str] = []
    expected = [("eth0", "default")] + [(i, network_object(pool, n)) for i, n in family.pod_networks]
    if annotations.get(DEFAULT_INTERFACE_ANNOTATION) != "eth0" or _interfaces(annotations) != expected:
        missing.append(f"the pod's {INTERFACES_ANNOTATION} do not attach the pool's GPU networks "
                       f"({', '.join(n for _, n in expected[1:])}): NCCL would see only eth0")
    daemon = family.daemon
    if daemon is not None:
        sidecars = [c for c in pod.get("initContainers", [])
                    if c["name"] == daemon.name and c.get("restartPolicy") == "Always" and c.get("image") == daemon.image]
        if not sidecars or DEVICE_ANNOTATION_PREFIX + daemon.name not in annotations:
            missing.append(f"no {daemon.name} sidecar with its GPU devices ({daemon.image}): the plugin has no receive datapath")
    hosts = _host_paths(pod)
    mounted = {(hosts.get(m["name"]), m["mountPath"]) for m in container.get("volumeMounts", [])}
    for _, host, path in family.trainer_mounts:
        if (host, path) not in mounted:
            missing.append(f"the trainer does not mount {host} at {path}: NCCL finds no {family.net} plugin")
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    wrong = sorted(k for k, v in family.env.items() if env.get(k) != v)
    if wrong:
        missing.append(f"the {family.stack.upper()} NCCL environment is not set: {', '.join(wrong)}")
    return missing


def installer_missing(pool: str, family: GpuDirect, resources: Sequence[Resource]) -> list[str]:
    """The family's plugin installer among the synthesized objects, on the pool's nodes."""
    for res in resources:
        props = res.props
        if props.get("kind") != "DaemonSet" or props.get("metadata", {}).get("name") != family.installer_name:
            continue
        terms = props["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        pools = {v for t in terms for e in t["matchExpressions"] if e["key"] == NODE_POOL_LABEL for v in e["values"]}
        images = {c.get("image") for c in props["spec"]["template"]["spec"].get("initContainers", [])}
        if pool in pools and family.installer_image in images:
            return []
    return [f"no {family.installer_name} DaemonSet ({family.installer_image}) on the pool's nodes"]


def missing_pieces(cloud: str, jobset: dict[str, Any], family: GpuDirect | None = None, pool: str = "") -> list[str]:
    """What the rendered multi-node job lacks of its cloud's fabric wiring and the gate."""
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod = template["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "trainer")
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    cfg = _trainer_cfg(container)
    missing: list[str] = []
    gate = cfg.fabric_check if cfg is not None else "off"
    if family is not None:
        missing += gke_missing(pool, family, template)
        if gate != "enforce" or cfg is None or cfg.fabric_floor_gbps is None:
            missing.append(f"the fabric gate is not enforced with a floor (--fabric-check {gate})")
    elif cloud == "aws":
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
        spec_pool = next(p for p in spec.node_pools if p.name == pool.name)
        if spec.cloud == "aws" and not spec_pool.efa:
            continue  # EFA off in the spec: the pool is no fabric pool (its shape merely could be)
        family = gpudirect_of(spec, spec_pool)
        try:
            jobset = renderer.render(spec, _request(pool, team, tier))
        except renderer.JobError:
            continue  # job-fits-pool reports the jobs the renderer refuses
        pieces = missing_pieces(spec.cloud, jobset, family, pool.name)
        if family is not None and resources:
            pieces += installer_missing(pool.name, family, resources)
        for piece in pieces:
            found.append(Violation(RULE, None, f"pool {pool.name} ({shape.name}), job {pool.max_nodes} node(s): {piece}"))
    return found

"""`gpu-platform job` on a fleet manager stack: one JobSet every eligible worker can run as is.

MultiKueue creates the worker's JobSet from the manager's: object metadata cloned, the spec
deep-copied, only `spec.managedBy` cleared and its own labels added (kubernetes-sigs/kueue@v0.19.2
pkg/controller/jobs/jobset/jobset_multikueue_adapter.go SyncJob). Nothing per cloud can be added
on the way, so the job is rendered once per worker that may receive it, with the real renderer in
its portable form (components.jobs.renderer.JobRequest.portable), and accepted only if those
renderings agree; per-cloud wiring stays on the worker side, in what each worker's objects of the
same names are: the team's `trainer` ServiceAccount (bound to that cloud's identity), the
`training-data` claim (EFS or the bucket), and the flavor Kueue's worker admits it on (its labels
and tolerations). What cannot be expressed so (EFA devices, GKE's GPUDirect networks) is left out:
fleet jobs train over each cloud's primary network (docs/fleet.md, "Limits").

Workers are eligible when they have a pool of the GPU model whose nodes hold `gpus_per_node` whole
GPUs and that scales to `nodes`, and the team. Pools are chosen by GPU model and count; their
names must agree across the eligible workers, since the job selects the pool label Kueue's worker
flavors match.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping

from components.facts import multikueue, registries
from components.facts.image_ref import problem as image_problem
from components.jobs import renderer
from components.kubernetes.queues import queue_plan
from components.pools import GPU_MODEL_LABEL, Pool, derive_pools
from components.spec import PlatformSpec

Workers = Mapping[str, PlatformSpec]


@dataclass(frozen=True)
class FleetJobRequest:
    gpu_model: str
    nodes: int
    gpus_per_node: int
    team: str | None
    tier: str
    name: str = "train"
    image: str | None = None
    trainer_args: list[str] = field(default_factory=list[str])
    max_restarts: int = renderer.DEFAULT_MAX_RESTARTS
    grace_period: int | None = None


def _pool_for(spec: PlatformSpec, request: FleetJobRequest) -> tuple[Pool | None, str]:
    """The worker's pool for the request, or None and why there is none."""
    teams = {t.team for t in queue_plan(spec, derive_pools(spec)).teams}
    if request.team is not None and request.team not in teams:
        return None, f"no team {request.team!r}"
    models = [p for p in derive_pools(spec) if p.gpu.name == request.gpu_model and not renderer.shared_gpus(p)]
    if not models:
        return None, f"no unshared pool of {request.gpu_model}"
    for pool in models:
        if request.gpus_per_node <= pool.slots_per_node and request.nodes <= pool.max_nodes:
            return pool, ""
    shapes = ", ".join(f"{p.name} ({p.max_nodes} x {p.slots_per_node})" for p in models)
    return None, f"no {request.gpu_model} pool holds {request.nodes} node(s) x {request.gpus_per_node} GPU(s): {shapes}"


def eligible(workers: Workers, request: FleetJobRequest) -> tuple[dict[str, Pool], dict[str, str]]:
    """(worker -> its pool) for the workers that can run the request, and why the others cannot."""
    chosen: dict[str, Pool] = {}
    why: dict[str, str] = {}
    for worker, spec in workers.items():
        pool, reason = _pool_for(spec, request)
        if pool is None:
            why[worker] = reason
        else:
            chosen[worker] = pool
    return chosen, why


def image_problems(image: str, clouds: Mapping[str, str]) -> list[str]:
    """An image one eligible worker cannot pull is refused, with the worker and the way out."""
    owner = registries.private_to(image)
    if owner is None:
        return []
    other = sorted(w for w, cloud in clouds.items() if cloud != owner)
    if not other:
        return []
    return [
        f"--image: {image} is in {owner}'s private registry, which {', '.join(other)} cannot pull from; push it to a"
        " registry every worker can pull from (a public or shared registry, or a replica per cloud with one name"
        " through a pull-through mirror; docs/fleet.md, \"Images\")"
    ]


def _job_request(request: FleetJobRequest, pool: Pool) -> renderer.JobRequest:
    return renderer.JobRequest(
        pool=pool.name,
        nodes=request.nodes,
        gpus_per_node=request.gpus_per_node,
        team=request.team,
        tier=request.tier,
        name=request.name,
        image=request.image,
        trainer_args=list(request.trainer_args),
        max_restarts=request.max_restarts,
        grace_period=request.grace_period,
        topology="none",
        portable=True,
    )


def _pod(jobset: Mapping[str, Any]) -> dict[str, Any]:
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


def _smallest_resources(renderings: list[dict[str, Any]]) -> dict[str, Any]:
    """The trainer's requests every worker's node can give: the smaller of each, per resource."""
    per_worker = [_pod(r)["spec"]["containers"][0]["resources"]["requests"] for r in renderings]
    smallest = dict(per_worker[0])
    for requests in per_worker[1:]:
        for name in ("cpu", "memory"):
            if name not in requests or name not in smallest:
                smallest.pop(name, None)
            elif _amount(requests[name]) < _amount(smallest[name]):
                smallest[name] = requests[name]
    return smallest


def _shm_gi(jobset: Mapping[str, Any]) -> int | None:
    for volume in _pod(jobset)["spec"]["volumes"]:
        limit = volume.get("emptyDir", {}).get("sizeLimit")
        if isinstance(limit, str) and limit.endswith("Gi"):
            return int(limit.removesuffix("Gi"))
    return None


def _amount(quantity: str) -> int:
    """A quantity as the renderer writes it (node_resources.cpu_quantity `Nm`, memory_quantity `NMi`)."""
    return int(quantity.removesuffix("Mi").removesuffix("m"))


def render(workers: Workers, request: FleetJobRequest) -> tuple[dict[str, Any], dict[str, Pool]]:
    """The fleet JobSet and the pool it lands on at each eligible worker; JobError otherwise."""
    chosen, why = eligible(workers, request)
    if not chosen:
        raise renderer.JobError(
            [f"--gpu-model: no worker can run {request.nodes} node(s) x {request.gpus_per_node} {request.gpu_model} GPU(s)"]
            + [f"  {w}: {reason}" for w, reason in why.items()]
        )
    names = {pool.name for pool in chosen.values()}
    if len(names) > 1:
        raise renderer.JobError(
            [f"--gpu-model: the workers' {request.gpu_model} pools are named differently ("
             + ", ".join(f"{w}: {p.name}" for w, p in chosen.items())
             + "); a fleet job selects one pool name on every worker: name them alike"]
        )
    if request.image is None:
        raise renderer.JobError(["--image: required on a fleet stack (an image every worker can pull)"])
    bad = image_problem(request.image)
    problems = [f"--image: {bad}"] if bad else image_problems(request.image, {w: workers[w].cloud for w in chosen})
    renderings: list[dict[str, Any]] = []
    refused: dict[str, list[str]] = {}
    for worker, pool in chosen.items():
        try:
            renderings.append(renderer.render(workers[worker], _job_request(request, pool)))
        except renderer.JobError as exc:
            refused[worker] = exc.problems
    # A problem every eligible worker has is said once; others name their worker.
    common = [p for p in next(iter(refused.values()), []) if len(refused) == len(chosen) and all(p in ps for ps in refused.values())]
    problems += common + [f"{w}: {p}" for w, ps in refused.items() for p in ps if p not in common]
    if problems:
        raise renderer.JobError(problems)
    jobset = _merged(renderings, request.gpu_model)
    return jobset, chosen


def _merged(renderings: list[dict[str, Any]], gpu_model: str) -> dict[str, Any]:
    """One object from the workers' renderings: the smallest trainer requests, every annotation;
    anything else that differs is refused, since MultiKueue sends one object to all."""
    requests = _smallest_resources(renderings)
    # /dev/shm is sized from the trainer's memory (renderer._shm_size): the smallest too.
    sizes = [size for size in (_shm_gi(r) for r in renderings) if size is not None]
    shm = min(sizes) if sizes else None
    annotations: dict[str, str] = {}
    for r in renderings:
        annotations |= _pod(r).get("metadata", {}).get("annotations", {})
    normalized: list[dict[str, Any]] = []
    for r in renderings:
        one = copy.deepcopy(r)
        pod = _pod(one)
        container = pod["spec"]["containers"][0]
        container["resources"] = {"requests": dict(requests), "limits": dict(requests)}
        pod["metadata"] = {"annotations": dict(sorted(annotations.items()))} if annotations else {}
        for volume in pod["spec"]["volumes"]:
            if shm is not None and "emptyDir" in volume and "sizeLimit" in volume["emptyDir"]:
                volume["emptyDir"]["sizeLimit"] = f"{shm}Gi"
        normalized.append(one)
    first = normalized[0]
    for other in normalized[1:]:
        if other != first:
            raise renderer.JobError(["the eligible workers render this job differently; it cannot be dispatched as one object"])
    return with_manager_fields(first, gpu_model)


def with_manager_fields(jobset: dict[str, Any], gpu_model: str) -> dict[str, Any]:
    """The manager's additions: the GPU model its flavors match (the workers' nodes carry the
    label too), and `managedBy`, which Kueue's webhook would set on the manager anyway."""
    pod = _pod(jobset)["spec"]
    pod["nodeSelector"] = {**pod["nodeSelector"], GPU_MODEL_LABEL: gpu_model}
    spec = {"managedBy": multikueue.MANAGED_BY, **jobset["spec"]}
    return {**jobset, "spec": spec}


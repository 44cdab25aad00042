"""The fleet's fit proof (`check` on a manager stack): every job the manager accepts fits a worker.

For every team and GPU model the manager queues, the largest fleet job `gpu-platform job` accepts
(all nodes of the largest pool of that model on any worker, every slot of a node) and the
smallest (one node, one GPU) are rendered with the fleet renderer (components.fleet.job) and held
against each eligible worker's synthesized resources by the single-stack proof
(components.checks.fit.proof.jobset_misfits): the worker's Kueue admits it (its LocalQueue,
ClusterQueue, a flavor, quota) and its nodes take the pods. A job fits the fleet when at least one
worker runs it; one no worker runs is a finding, with each worker's reasons. Dispatch goes only to
workers that admit, so a worker that cannot run a job costs a dispatch round, not a failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from components.checks.declared import Resource
from components.checks.fit.cluster import Cluster
from components.checks.fit.kueue import Kueue
from components.checks.fit.proof import PROOF_IMAGE, PROOF_PRESET, PROOF_SEQ_LEN, jobset_misfits
from components.fleet import job
from components.jobs import renderer, volumes
from components.kubernetes.queues import queue_plan
from components.kubernetes.tiers import priority_tiers
from components.pools import derive_pools
from components.spec import PlatformSpec


@dataclass(frozen=True)
class Worker:
    spec: PlatformSpec
    resources: Sequence[Resource]


def _args(nodes: int, gpus: int) -> list[str]:
    return [
        "--data", f"{volumes.DATA_MOUNT}/datasets/fit-proof", "--preset", PROOF_PRESET, "--max-steps", "1",
        "--checkpoint-every", "1", "--global-batch-size", str(nodes * gpus), "--seq-len", str(PROOF_SEQ_LEN),
        "--seed", "0",
    ]


def proof_requests(workers: Mapping[str, Worker]) -> list[job.FleetJobRequest]:
    """Per team and GPU model of any worker: the largest and the smallest fleet job."""
    shapes: dict[tuple[str, str], set[tuple[int, int]]] = {}
    tiers: dict[str, str] = {}
    for worker in workers.values():
        pools = derive_pools(worker.spec)
        tier = priority_tiers(worker.spec)[0].name
        for team in queue_plan(worker.spec, pools).teams:
            tiers.setdefault(team.team, tier)
            for pool in pools:
                if renderer.shared_gpus(pool) or pool.max_nodes < 1:
                    continue
                found = shapes.setdefault((team.team, pool.gpu.name), {(1, 1)})
                found.add((pool.max_nodes, pool.slots_per_node))
    requests = []
    for (team, model), sizes in sorted(shapes.items()):
        largest = max(sizes, key=lambda s: (s[0] * s[1], s))
        for nodes, gpus in sorted({largest, (1, 1)}, reverse=True):
            requests.append(job.FleetJobRequest(
                gpu_model=model, nodes=nodes, gpus_per_node=gpus, team=team, tier=tiers[team],
                name="fit-proof", image=PROOF_IMAGE, trainer_args=_args(nodes, gpus),
            ))
    return requests


def misfits(workers: Mapping[str, Worker]) -> list[str]:
    """One message per fleet job that no worker runs."""
    specs = {name: w.spec for name, w in workers.items()}
    views = {name: (Cluster(w.resources),) for name, w in workers.items()}
    kueues = {name: Kueue(w.resources, views[name][0]) for name, w in workers.items()}
    found: list[str] = []
    for request in proof_requests(workers):
        shape = f"team {request.team}, {request.nodes} node(s) x {request.gpus_per_node} {request.gpu_model}"
        try:
            jobset, chosen = job.render(specs, request)
        except renderer.JobError as exc:
            found.append(f"{shape}: gpu-platform job refuses it on the fleet: {'; '.join(exc.problems)}")
            continue
        reasons: dict[str, list[str]] = {}
        for name, pool in chosen.items():
            problems = jobset_misfits(
                specs[name], workers[name].resources, views[name][0], kueues[name], pool, jobset, request.nodes, shape, shape
            )
            reasons[name] = [message for _, message in problems]
        if all(reasons.values()):
            detail = "; ".join(f"{w}: {' | '.join(r)}" for w, r in reasons.items())
            found.append(f"{shape}: fits no worker ({detail})")
    return found

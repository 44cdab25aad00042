"""What a fleet simulation reports: one Result and one model over the workers, for
infra.tools.simulate.report to write as it writes a single stack's."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from components.fleet.plan import cluster_name
from infra.tools.simulate.fleet import REMOVED
from infra.tools.simulate.fleet_queue import Entry
from infra.tools.simulate.fleet_read import ROUND_S, Dispatch, ManagerQuota, pool_name
from infra.tools.simulate.model import StackModel
from infra.tools.simulate.state import STATUS_REJECTED, STATUS_UNFINISHED, Job, JobOutcome, Reservation, Result, job_outcome


def fleet_result(
    stack: str, seed: int, end: float, entries: Sequence[Entry], workers: Mapping[str, StackModel], order: Sequence[str], results: Sequence[Result]
) -> Result:
    """One Result over the workers: each job's outcome on the worker that admitted it. A job no
    worker admitted is reported on the first pool in dispatch order that it had (else the first
    of its GPU model): jobs.csv names a pool for every job."""
    outcomes = {w: {j.id: j for j in r.jobs} for w, r in zip(order, results)}
    home = [
        next(
            (pool_name(w, e.job.pools[w]) for w in order if w in e.job.pools),
            next(pool_name(w, p.name) for w in order for p in workers[w].pools if p.gpu_model == e.job.gpu_model),
        )
        for e in entries
    ]
    jobs: list[JobOutcome] = []
    for entry in entries:
        spec = entry.job.spec
        if entry.winner is not None:
            outcome = dataclasses.replace(outcomes[entry.winner][spec.id], pool=pool_name(entry.winner, entry.job.pools[entry.winner]))
        else:
            copies = [outcomes[w][spec.id] for w in order if spec.id in outcomes[w]]
            never = entry.reason or (
                "; ".join(f"{w}: {c.reason}" for w, c in zip(order, copies)) if copies and all(c.status == STATUS_REJECTED and not c.reason.startswith(REMOVED) for c in copies) else ""
            )
            outcome = job_outcome(Job(spec, entry.index, 0, 0, 0, 0, False))
            outcome.pool = home[entry.index]
            outcome.status, outcome.reason = (STATUS_REJECTED, never) if never else (STATUS_UNFINISHED, "")
        jobs.append(outcome)
    segments = [dataclasses.replace(s, pool=pool_name(w, s.pool)) for w, r in zip(order, results) for s in r.segments]
    reservations: list[Reservation] = [
        dataclasses.replace(x, pool=pool_name(w, x.pool)) for w, r in zip(order, results) for x in r.reservations
    ]
    pools = [dataclasses.replace(p, name=pool_name(w, p.name)) for w, r in zip(order, results) for p in r.pools]
    return Result(stack, seed, end, jobs, segments, reservations, pools)


def fleet_model(stack: str, workers: Mapping[str, StackModel], dispatch: Dispatch, quota: ManagerQuota) -> StackModel:
    """What report.write reads of a model, over the workers: their pools under fleet names, the
    tiers (one value each across the fleet: components.fleet.plan.priority_tiers), the parameters."""
    first = workers[dispatch.order[0]]
    return StackModel(
        stack=stack,
        cloud="fleet",
        pools=tuple(dataclasses.replace(p, name=pool_name(w, p.name)) for w in dispatch.order for p in workers[w].pools),
        queues=(),
        cohorts={},
        teams=quota.teams,
        tiers=first.tiers,
        autoscaler=None,
        kueue=first.kueue,
        parameters={
            "dispatch": {
                "dispatcher": dispatch.dispatcher,
                "order": [cluster_name(w) for w in dispatch.order],
                "step_size": dispatch.step,
                "round_s": ROUND_S,
                "not_modelled": [
                    "unreachable workers",
                    "latency between clusters",
                ],
            },
            "manager_quota": {m: dict(q) for m, q in quota.nominal.items()},
            "workers": {cluster_name(w): workers[w].parameters for w in dispatch.order},
        },
    )

"""Small stacks and jobs for hand-computed simulations: a model built directly, so every figure a
scenario depends on is written in the test."""

from __future__ import annotations

from infra.tools.simulate import model, state
from infra.tools.simulate.trace import TraceJob

TIERS = {
    "production": model.Tier(100_000, 100_000),
    "standard": model.Tier(10_000, 10_000),
    "best-effort": model.Tier(1_000, 1_000),
    "opportunistic": model.Tier(-100, -100),
}
KUEUE = model.KueueConfig(
    pods_ready_timeout_s=1800, recovery_timeout_s=1800, backoff_base_s=60, backoff_max_s=3600, requeue_timestamp="Eviction"
)


def pool(
    name: str = "p",
    *,
    slots: int = 8,
    gpus: int = 8,
    sharing: str = "none",
    min_nodes: int = 0,
    max_nodes: int = 2,
    spot: bool = False,
    price: float | None = 10.0,
    scale_up_s: float = 0.0,
    per_node_day: float = 0.0,
    autoscaled: bool = True,
) -> model.PoolModel:
    return model.PoolModel(
        name=name,
        cloud="aws",
        instance_type="p5.48xlarge",
        gpu_model="H100-80GB",
        gpus_per_node=gpus,
        slots_per_node=slots,
        sharing=sharing,
        max_pod_slots=1 if sharing == "shared" else slots,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        spot=spot,
        usd_per_node_hour=price,
        scale_up_s=scale_up_s,
        interruptions_per_node_day=per_node_day,
        autoscaled=autoscaled,
    )


def queue(
    name: str,
    nominal: dict[str, int],
    *,
    cohort: str | None = "c",
    within: str = "LowerPriority",
    reclaim: str = "LowerPriority",
    strategy: str = "BestEffortFIFO",
    borrowing_limit: dict[str, int] | None = None,
) -> model.QueueModel:
    return model.QueueModel(
        name=name,
        cohort=cohort,
        nominal=nominal,
        borrowing_limit={p: (borrowing_limit or {}).get(p) for p in nominal},
        lending_limit={p: None for p in nominal},
        within_cluster_queue=within,
        reclaim_within_cohort=reclaim,
        queueing_strategy=strategy,
    )


def stack(
    pools: list[model.PoolModel],
    queues: list[model.QueueModel],
    *,
    cohort_quota: dict[str, int] | None = None,
    unneeded_s: float = 600.0,
    delay_after_add_s: float = 0.0,
    pack_most_allocated: bool = False,
) -> model.StackModel:
    cohorts = {q.cohort for q in queues if q.cohort}
    return model.StackModel(
        stack="test",
        cloud="aws",
        pools=tuple(pools),
        queues=tuple(queues),
        cohorts={c: {p.name: (cohort_quota or {}).get(p.name, 0) for p in pools} for c in cohorts},
        teams={q.name: q.name for q in queues},
        tiers=TIERS,
        autoscaler=model.Autoscaler(unneeded_s, delay_after_add_s, -10, pack_most_allocated, "test"),
        kueue=KUEUE,
    )


def job(
    job_id: str,
    submit: float,
    team: str,
    tier: str = "standard",
    *,
    pool: str = "p",
    nodes: int = 1,
    gpus: int = 8,
    duration: float = 100.0,
    checkpoint: float | None = None,
) -> TraceJob:
    return TraceJob(job_id, submit, team, tier, pool, nodes, gpus, duration, checkpoint, line=0)


def outcomes(result: state.Result) -> dict[str, state.JobOutcome]:
    return {j.id: j for j in result.jobs}


def segments(result: state.Result, job_id: str) -> list[tuple[float, float, str]]:
    return [(s.start, s.end, s.end_reason) for s in result.segments if s.job == job_id]

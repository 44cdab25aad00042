"""`gpu-platform simulate` on a fleet manager stack: the command around infra.tools.simulate.fleet,
and the comparison of the fleet with each worker alone (comparison.json, the table it prints,
report.md's last section).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from components.fleet.plan import cluster_name
from components.spec import PlatformSpec
from components.spec.fleet import worker_stack
from infra import output_folder
from infra.tools.simulate import build, engine, model, report, trace
from infra.tools.simulate.command import Options, UsageError, pool_figures
from infra.tools.simulate.fleet import FleetSimulation
from infra.tools.simulate.fleet_results import fleet_model, fleet_result
from infra.tools.simulate.fleet_read import (
    ROUND_S,
    Dispatch,
    FleetJob,
    ManagerQuota,
    fleet_jobs,
    gpu_model_names,
    pool_name,
    read_dispatch,
    read_manager_quota,
)
from infra.tools.simulate.model import StackModel
from infra.tools.simulate.state import Result
from infra.tools.simulate.trace import TraceJob

# Each worker alone: its jobs.csv, segments.csv and summary.json under alone/<worker>/.
ALONE_DIR = "alone"


def _team_cost(result: Result, stack_model: StackModel) -> dict[str, float]:
    """The list price of the GPU-hours each team's jobs ran (idle and booting nodes are in the
    run's total, not in a team's)."""
    price = {
        p.name: (p.usd_per_node_hour or 0.0) / p.slots_per_node for p in stack_model.pools
    }
    team = {j.id: j.team for j in result.jobs}
    cost: dict[str, float] = {}
    for s in result.segments:
        cost[team[s.job]] = cost.get(team[s.job], 0.0) + s.gpus * (s.end - s.start) / 3600 * price[s.pool]
    return cost


def comparison_row(result: Result, stack_model: StackModel, excluded: Mapping[str, int]) -> dict[str, Any]:
    """Per team and in all: jobs, started, rejected (jobs excluded from the run count as rejected),
    wait p50 and p95 over the started jobs, the GPU-hours' cost; and the run's total cost."""
    figures = report.summary(result, stack_model)
    costs = _team_cost(result, stack_model)
    teams = {}
    for name in sorted(set(figures["teams"]) | set(excluded)):
        team = figures["teams"].get(name, {"jobs": 0, "rejected": 0, "not_started": 0, "wait_s": {"p50": None, "p95": None}})
        teams[name] = {
            "jobs": team["jobs"] + excluded.get(name, 0),
            "started": team["jobs"] - team["rejected"] - team["not_started"],
            "rejected": team["rejected"] + excluded.get(name, 0),
            "wait_p50_s": team["wait_s"]["p50"],
            "wait_p95_s": team["wait_s"]["p95"],
            "gpu_cost_usd": round(costs.get(name, 0.0), 2),
        }
    total = figures["totals"]
    return {
        "teams": teams,
        "all": {
            "jobs": total["jobs"] + sum(excluded.values()),
            "started": total["jobs"] - total["rejected"] - total["not_started"],
            "rejected": total["rejected"] + sum(excluded.values()),
            "wait_p50_s": total["wait_s"]["p50"],
            "wait_p95_s": total["wait_s"]["p95"],
            "gpu_cost_usd": round(sum(costs.values()), 2),
            "cost_usd": total["cost_usd"],
        },
    }


def comparison_table(comparison: Mapping[str, Mapping[str, Any]]) -> str:
    header = ["team", "run", "jobs", "started", "rejected", "wait p50", "p95", "GPU cost"]
    lines = [header]
    runs = list(comparison)
    teams = sorted({t for run in comparison.values() for t in run["teams"]})
    for team in [*teams, "all"]:
        for run in runs:
            row = comparison[run]["all"] if team == "all" else comparison[run]["teams"].get(team)
            if row is None:
                continue
            lines.append(
                [team, run, str(row["jobs"]), str(row["started"]), str(row["rejected"]),
                 report.duration(row["wait_p50_s"]), report.duration(row["wait_p95_s"]), report.usd(row["gpu_cost_usd"], "$")]
            )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))).rstrip() for line in lines)


# --- the command ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    workers: dict[str, StackModel]
    quota: ManagerQuota
    dispatch: Dispatch
    jobs: list[FleetJob]


# Per worker (its fully qualified stack name): its spec, synthesized resources and outputs.
WorkerParts = Mapping[str, tuple[PlatformSpec, Sequence[Mapping[str, Any]], Mapping[str, Any]]]


def prepare(stack: str, synthesis: Any, options: Options) -> Prepared:
    """The workers' models (with the command line's figures, pools named `<worker>.<pool>`), the
    manager's quota and dispatch, and the trace checked against the fleet. `synthesis` is an
    infra.offline.FleetSynthesis."""
    problems: list[str] = []
    if options.horizon_s is not None and not (math.isfinite(options.horizon_s) and 0 < options.horizon_s <= trace.MAX_TRACE_S):
        problems.append(f"--horizon-s: expected a number of seconds > 0, at most {trace.MAX_TRACE_S}, got {options.horizon_s:g}")
    parts = {w: (spec, r.resources, r.outputs) for w, (spec, r) in synthesis.workers.items()}
    plain = {w: build.stack_model(worker_stack(w), resources, outputs) for w, (_, resources, outputs) in parts.items()}
    names = [pool_name(w, p.name) for w, m in plain.items() for p in m.pools]
    spot = pool_figures(options.spot_rates, "--spot-rate", names, problems)
    scale = pool_figures(options.scale_up_s, "--scale-up-s", names, problems)
    overrides: dict[str, model.Overrides] = {}
    for w in parts:
        mine = {p.name: pool_name(w, p.name) for p in plain[w].pools}
        overrides[w] = model.Overrides(
            spot_rates={p: spot[n] for p, n in mine.items() if n in spot},
            scale_up_s={p: scale[n] for p, n in mine.items() if n in scale},
        )
    jobs: list[TraceJob] = []
    prepared = fleet_inputs(synthesis.synthesis.resources, parts, overrides)
    try:
        jobs = trace.read(options.trace, trace_names(prepared))
    except trace.TraceError as exc:
        problems += exc.problems
    if problems:
        raise UsageError(problems)
    return with_jobs(prepared, jobs, parts)


def fleet_inputs(manager: Sequence[Mapping[str, Any]], parts: WorkerParts, overrides: Mapping[str, model.Overrides] | None = None) -> Prepared:
    """The workers' models, the manager's quota and dispatch, no jobs yet. Raises ModelError."""
    workers = {
        w: build.stack_model(worker_stack(w), resources, outputs, (overrides or {}).get(w))
        for w, (_, resources, outputs) in parts.items()
    }
    return Prepared(workers, read_manager_quota(manager), read_dispatch(manager, list(parts)), [])


def trace_names(prepared: Prepared) -> trace.StackNames:
    """What a trace may name on the fleet: the manager's teams, the tiers, GPU models and pools."""
    first = prepared.workers[prepared.dispatch.order[0]]
    return trace.StackNames(teams=prepared.quota.teams, tiers=first.tiers, pools=gpu_model_names(prepared.workers))


def with_jobs(prepared: Prepared, jobs: Sequence[TraceJob], parts: WorkerParts) -> Prepared:
    specs = {w: spec for w, (spec, _, _) in parts.items()}
    return dataclasses.replace(prepared, jobs=fleet_jobs(jobs, gpu_model_names(prepared.workers), specs))


def summary(stack: str, prepared: Prepared, seed: int) -> dict[str, Any]:
    """summary.json of the fleet's run (review --trace shows it like a cluster stack's)."""
    fleet, _ = simulate(stack, prepared, seed, None, each_alone=False)
    return report.summary(fleet, fleet_model(stack, prepared.workers, prepared.dispatch, prepared.quota))


def simulate(stack: str, prepared: Prepared, seed: int, horizon_s: float | None, each_alone: bool = True) -> tuple[Result, dict[str, Result]]:
    """The fleet's run, and (`each_alone`) each worker's alone (the jobs it has a pool for)."""
    sim = FleetSimulation(prepared.workers, prepared.quota, prepared.dispatch, prepared.jobs, seed, horizon_s)
    end, results = sim.run()
    fleet = fleet_result(stack, seed, end, sim.entries, prepared.workers, prepared.dispatch.order, results)
    alone = {
        w: engine.simulate(
            prepared.workers[w], [dataclasses.replace(j.spec, pool=j.pools[w]) for j in prepared.jobs if w in j.pools], seed, horizon_s
        )
        for w in prepared.dispatch.order
        if each_alone
    }
    return fleet, alone


def excluded(jobs: Sequence[FleetJob], worker: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for job in jobs:
        if worker not in job.pools:
            out[job.spec.team] = out.get(job.spec.team, 0) + 1
    return out


def run(stack: str, synthesis: Any, options: Options) -> str:
    """Simulate the fleet and each worker alone, write the outputs, return what the command prints."""
    started = time.perf_counter()
    prepared = prepare(stack, synthesis, options)
    fleet, alone = simulate(stack, prepared, options.seed, options.horizon_s)
    stack_model = fleet_model(stack, prepared.workers, prepared.dispatch, prepared.quota)
    comparison = {"fleet": comparison_row(fleet, stack_model, {})}
    for w, result in alone.items():
        comparison[cluster_name(w)] = comparison_row(result, prepared.workers[w], excluded(prepared.jobs, w))
    with output_folder.staged(options.out_dir) as staging:
        figures = report.write(fleet, stack_model, staging)
        for w, result in alone.items():
            report.write_tables(result, prepared.workers[w], staging / ALONE_DIR / cluster_name(w))
        document = {"excluded_jobs_count_as": "rejected", "runs": comparison}
        (staging / "comparison.json").write_text(json.dumps(document, indent=2) + "\n")
        with (staging / "report.md").open("a") as handle:
            handle.write(comparison_markdown(prepared, comparison))
    elapsed = time.perf_counter() - started
    order = ", ".join(cluster_name(w) for w in prepared.dispatch.order)
    lines = [
        f"{stack}: {len(prepared.jobs)} jobs over {order} (dispatch step {prepared.dispatch.step}, {ROUND_S / 60:g} min rounds),"
        f" seed {options.seed}, horizon {report.duration(fleet.horizon)} -> {options.out_dir} ({elapsed:.1f}s)",
        "",
        report.table(report.team_tier_rows(fleet, stack_model)),
        "",
    ]
    lines += report.cost_lines(figures)
    lines += [
        "",
        "the fleet against each worker alone (waits over started jobs; a job a worker has no pool for counts as rejected there):",
        comparison_table(comparison),
    ]
    return "\n".join(lines) + "\n"


def comparison_markdown(prepared: Prepared, comparison: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [
        "## The fleet against each worker alone",
        "",
        f"Dispatch: {prepared.dispatch.dispatcher}, order {', '.join(cluster_name(w) for w in prepared.dispatch.order)},"
        f" {prepared.dispatch.step} worker(s) a round, a round every {ROUND_S / 60:g} minutes without admission."
        " Each worker alone replays the jobs it has a pool for; the others count as rejected there."
        " GPU cost: the list price of the GPU-hours the team's jobs ran.",
        "",
        "| team | run | jobs | started | rejected | wait p50 | wait p95 | GPU cost (USD) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    teams = sorted({t for run in comparison.values() for t in run["teams"]})
    for team in [*teams, "all"]:
        for run, figures in comparison.items():
            row = figures["all"] if team == "all" else figures["teams"].get(team)
            if row is None:
                continue
            lines.append(
                f"| {team} | {run} | {row['jobs']} | {row['started']} | {row['rejected']} | {report.duration(row['wait_p50_s'])}"
                f" | {report.duration(row['wait_p95_s'])} | {report.usd(row['gpu_cost_usd'])} |"
            )
    return "\n".join(lines) + "\n"

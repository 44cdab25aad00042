"""Simulation speed: a 100,000-job trace over 30 simulated days on a 50-pool stack.

Run: .venv/bin/python benchmarks/simulate.py [--jobs 100000] [--days 30] [--pools 50] [--repeat 3]
Prints one JSON document. The stack is dev-gcp (EKS allows 29 GPU node groups, GKE more) with
its pools replaced by `--pools` pools of seven shapes (shared L4s and MIG A100s on spot, 4-GPU
L4 and A100 nodes, A100/H100 8-GPU nodes, always-on single L4s) and four teams holding four fifths of every pool (the cohort keeps the rest). Jobs
arrive at random over the days, on every pool, team and tier, in the shapes `gpu-platform job`
renders (whole nodes on unshared pools, one slot on shared GPUs, MIG slices on one node), sized
so each pool is loaded to about 70% of its maximum. Timed (medians of --repeat): reading the trace CSV, the simulation
itself (wall clock and this process's CPU time: the machine is shared, so both are given with
the load average), and writing jobs.csv, segments.csv and summary.json; the plots once.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from infra import program, stackfile, synth
from infra.tools.simulate import build, engine, model, plots, report, state, trace

REPO = Path(__file__).resolve().parents[1]
TEAMS = ("t0", "t1", "t2", "t3")
TIERS = (("production", 10), ("standard", 50), ("best-effort", 30), ("opportunistic", 10))
# instance type, min nodes, max nodes, capacity, sharing
SHAPES: tuple[tuple[str, int, int, str, dict[str, Any] | None], ...] = (
    ("g2-standard-8", 0, 8, "spot", {"mode": "time-slicing", "replicas": 4}),
    ("g2-standard-48", 0, 4, "spot", None),
    ("a2-ultragpu-4g", 0, 4, "on-demand", None),
    ("a2-highgpu-8g", 0, 4, "on-demand", None),
    ("a3-highgpu-8g", 0, 8, "on-demand", None),
    ("g2-standard-8", 1, 4, "on-demand", None),
    ("a2-highgpu-1g", 0, 2, "spot", {"mode": "mig", "profile": "1g.5gb"}),
)
LOAD = 0.7


def stack_model(pools: int) -> model.StackModel:
    config = bench_config(pools)
    stack_file = stackfile.StackFile(stackfile.read("dev-gcp", REPO).path, "dev-gcp", config)
    result = synth.run(program.main, "gpu-platform", "bench", stack_file.pulumi_config())
    return build.stack_model("bench", result.resources, result.outputs)


def bench_config(pools: int) -> dict[str, Any]:
    """dev-gcp's stack config with `pools` pools of SHAPES and four teams' quotas."""
    base = stackfile.read("dev-gcp", REPO)
    config = copy.deepcopy(base.config)
    platform = config["gpu-platform:platform"]
    specs = []
    for i in range(pools):
        instance_type, low, high, capacity, sharing = SHAPES[i % len(SHAPES)]
        pool: dict[str, Any] = {"name": f"pool-{i:02d}", "instanceType": instance_type, "minNodes": low, "maxNodes": high, "capacity": capacity}
        if sharing:
            pool["sharing"] = sharing
        specs.append(pool)
    platform["nodePools"] = specs
    platform.pop("policy", None)
    platform.pop("scheduling", None)
    stack_file = stackfile.StackFile(base.path, base.stack, config)
    pool_slots = {p.name: p.max_slots for p in _derived(stack_file)}
    platform["scheduling"] = {
        "teams": [{"name": team, "quotas": {name: slots // 5 for name, slots in pool_slots.items()}} for team in TEAMS]
    }
    return config


def _derived(stack_file: stackfile.StackFile) -> list[Any]:
    from components.pools import derive_pools

    return derive_pools(stack_file.spec())


def jobs_csv(stack: model.StackModel, jobs: int, days: int, path: Path, seed: int = 0) -> None:
    """A random trace loading every pool to about LOAD of its maximum slots."""
    rng = random.Random(seed)
    span = days * 86400
    per_pool = jobs // len(stack.pools)
    rows = []
    for p in stack.pools:
        if p.sharing == "shared":
            shapes = [(1, 1)]
        elif p.sharing == "mig":
            shapes = [(1, g) for g in range(1, p.slots_per_node + 1)]
        else:
            shapes = [(n, p.slots_per_node) for n in range(1, p.max_nodes + 1)]
        mean_slots = sum(n * g for n, g in shapes) / len(shapes)
        mean_duration = LOAD * p.max_slots * span / (per_pool * mean_slots)
        for _ in range(per_pool):
            nodes, gpus = rng.choice(shapes)
            tier = rng.choices([t for t, _ in TIERS], weights=[w for _, w in TIERS])[0]
            rows.append(
                (round(rng.uniform(0, span)), rng.choice(TEAMS), tier, p.name, nodes, gpus,
                 round(rng.expovariate(1 / mean_duration)) + 60, rng.choice(["", "1800"]))
            )
    rows.sort()
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow([*trace.REQUIRED_COLUMNS, "checkpoint_every_s"])
        writer.writerows([f"j{i}", *row] for i, row in enumerate(rows))


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def one_run(stack: model.StackModel, path: Path, days: int, out: Path) -> tuple[state.Result, dict[str, float]]:
    """Read, simulate and write the tables once; the seconds each took."""
    names = trace.StackNames(teams=stack.teams, tiers=stack.tiers, pools=[p.name for p in stack.pools])
    t0 = time.perf_counter()
    jobs = trace.read(path, names)
    t1, cpu = time.perf_counter(), time.process_time()
    result = engine.simulate(stack, jobs, seed=0, horizon_s=days * 86400)
    t2, cpu = time.perf_counter(), time.process_time() - cpu
    report.write_tables(result, stack, out)
    t3 = time.perf_counter()
    return result, {"read_trace_s": t1 - t0, "simulate_s": t2 - t1, "simulate_cpu_s": cpu, "write_tables_s": t3 - t2}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    stack = stack_model(args.pools)
    build_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        path, out = Path(tmp) / "trace.csv", Path(tmp) / "out"
        jobs_csv(stack, args.jobs, args.days, path)
        runs = [one_run(stack, path, args.days, out) for _ in range(args.repeat)]
        result = runs[-1][0]
        plotted = time.perf_counter()
        plots.write_plots(result, stack, out)
        plots_s = time.perf_counter() - plotted
    timings = {key: _median([run[1][key] for run in runs]) for key in runs[0][1]}
    print(
        json.dumps(
            {
                "pools": len(stack.pools),
                "jobs": len(result.jobs),
                "simulated_days": args.days,
                "synth_and_model_s": round(build_s, 3),
                **timings,
                "plots_s": round(plots_s, 3),
                "load_average_1m": round(os.getloadavg()[0], 2),
                "segments": len(result.segments),
                "finished": sum(j.status == "finished" for j in result.jobs),
                "preemptions": sum(j.preemptions for j in result.jobs),
                "interruptions": sum(j.interruptions for j in result.jobs),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

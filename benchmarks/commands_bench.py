"""Whole commands as a user waits for them: check, review and simulate, each a fresh process.

Run: .venv/bin/python benchmarks/commands_bench.py [--repeat 3] [--only check,review,simulate]
Prints one JSON document: per measurement the median wall-clock seconds and the median CPU
seconds (user + system of the command and every process it started), with the load average,
since the machine may be shared and the CPU time is the figure that load does not inflate.

- check: `gpu-platform check` of every stack of this checkout.
- review: `gpu-platform review --base HEAD` in a scratch git repository holding this checkout's
  files as one commit, with build/synth-cache deleted first (cold) and kept (warm), for no
  change, for one stack file changed (dev-aws's l4-shared pool resized) and for every stack
  changed (a comment appended to components/naming.py, which every stack's program reads).
- simulate: `gpu-platform simulate bench --trace FILE` of benchmarks/simulate.py's 50-pool stack
  (a stack file in the scratch repository) and its 100,000-job, 30-day trace: synth, trace,
  simulation, tables and plots; cold (build/synth-cache deleted first: the stack is synthesized)
  and warm (its synthesis read from there, as for every later run on an unchanged stack).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
CLI = "import sys; from infra.cli import entrypoint; sys.argv[0] = 'gpu-platform'; entrypoint()"


def timed(args: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of `gpu-platform ARGS` run from `cwd`'s code, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), str(cwd / "training_images" / "src")])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CLI, *args], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"gpu-platform {' '.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def medians(runs: list[tuple[float, float]]) -> dict[str, float]:
    return {"wall_s": round(statistics.median(r[0] for r in runs), 2), "cpu_s": round(statistics.median(r[1] for r in runs), 2)}


def scratch_repository(dest: Path) -> Path:
    """This checkout's files (committed or not, without build output) as one commit."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    for name in listed:
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    os.symlink(REPO / ".venv", dest / ".venv")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run([*GIT, *args], cwd=dest, check=True, capture_output=True)
    return dest


def bench_check(repeat: int) -> dict[str, Any]:
    return medians([timed(["check"], REPO) for _ in range(repeat)])


def bench_review(repo: Path, repeat: int) -> dict[str, Any]:
    cache = repo / "build" / "synth-cache"

    def review(cold: bool) -> tuple[float, float]:
        if cold:
            shutil.rmtree(cache, ignore_errors=True)
        return timed(["review", "--base", "HEAD"], repo)

    out = {
        "no_change_cold": medians([review(True) for _ in range(repeat)]),
        "no_change_warm": medians([review(False) for _ in range(repeat)]),
    }
    path = repo / "stacks" / "Pulumi.dev-aws.yaml"
    original = path.read_text()
    document = yaml.safe_load(original)
    next(p for p in document["config"]["gpu-platform:platform"]["nodePools"] if p["name"] == "l4-shared")["maxNodes"] = 6
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    try:
        out["one_stack_changed_cold"] = medians([review(True) for _ in range(repeat)])
        out["one_stack_changed_warm"] = medians([review(False) for _ in range(repeat)])
    finally:
        path.write_text(original)
    # Code every stack's program reads: each stack synthesized in both trees.
    path = repo / "components" / "naming.py"
    original = path.read_text()
    path.write_text(original + "\n# touched\n")
    try:
        out["all_stacks_changed_cold"] = medians([review(True) for _ in range(repeat)])
        out["all_stacks_changed_warm"] = medians([review(False) for _ in range(repeat)])
    finally:
        path.write_text(original)
    return out


def bench_simulate(repo: Path, repeat: int) -> dict[str, Any]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    import simulate as simulate_bench

    stack_file = repo / "stacks" / "Pulumi.bench.yaml"
    stack_file.write_text(yaml.safe_dump({"config": simulate_bench.bench_config(50)}, sort_keys=False))
    try:
        model = simulate_bench.stack_model(50)
        trace = repo / "build" / "trace-100k.csv"
        trace.parent.mkdir(parents=True, exist_ok=True)
        simulate_bench.jobs_csv(model, 100_000, 30, trace)
        args = ["simulate", str(stack_file), "--trace", str(trace), "--horizon-s", str(30 * 86400), "--out", str(repo / "build" / "simulate")]
        cache = repo / "build" / "synth-cache"

        def simulate(cold: bool) -> tuple[float, float]:
            if cold:
                shutil.rmtree(cache, ignore_errors=True)
            return timed(args, repo)

        return {
            "jobs": 100_000,
            "days": 30,
            "pools": 50,
            "cold": medians([simulate(True) for _ in range(repeat)]),
            "warm": medians([simulate(False) for _ in range(repeat)]),
        }
    finally:
        stack_file.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="check,review,simulate")
    args = parser.parse_args()
    wanted = set(args.only.split(","))
    report: dict[str, Any] = {"cores": len(os.sched_getaffinity(0)), "load_average_1m_start": round(os.getloadavg()[0], 2)}
    if "check" in wanted:
        report["check_all_stacks"] = bench_check(args.repeat)
    with tempfile.TemporaryDirectory(prefix="commands-bench-") as tmp:
        repo = scratch_repository(Path(tmp))
        if "review" in wanted:
            report["review_all_stacks"] = bench_review(repo, args.repeat)
        if "simulate" in wanted:
            report["simulate_100k"] = bench_simulate(repo, args.repeat)
    report["load_average_1m_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

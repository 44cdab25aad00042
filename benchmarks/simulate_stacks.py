"""`gpu-platform simulate` on every shipped stack, a week each, as a user runs it.

Run: .venv/bin/python benchmarks/simulate_stacks.py [--repeat 1]
Prints one JSON document. Each run is the whole command in a fresh child process (synthesis of
the stack, the trace, the simulation, every output and plot): the example trace on prod-aws,
prod-gcp and prod-aws with its H200 pool on a Capacity Block (tests/data/stacks), and the trace
of the same shape written for each other stack (examples/traces/generate.py). Per run: wall
clock seconds (median of --repeat), the part after synthesis (trace, simulation, outputs, plots:
what the command itself prints) and the child's peak resident memory (resource.getrusage's
ru_maxrss, read in the child). The budget is 30 s and 1 GB per run on the 2-core machine; each
child is stopped at 120 s and 3 GB so that a regression shows as a failed run, not a hung one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "examples" / "traces"
RUNS = {
    "prod-aws": ("prod-aws", "prod-aws-week.csv"),
    "prod-gcp": ("prod-gcp", "prod-aws-week.csv"),
    "prod-aws-capacity-block": ("tests/data/stacks/Pulumi.prod-aws-capacity-block.yaml", "prod-aws-week.csv"),
    "dev-aws": ("dev-aws", "dev-aws-week.csv"),
    "dev-gcp": ("dev-gcp", "dev-gcp-week.csv"),
    "onprem": ("onprem", "onprem-week.csv"),
}
BUDGET_S = 30.0
BUDGET_MB = 1024.0
LIMIT_S = 120
LIMIT_BYTES = 3 * 1024**3

# The child: the command line's own entry point, then its peak RSS (KiB on Linux) on stdout's last line.
CHILD = """
import json, resource, sys
from infra import cli
code = cli.main(sys.argv[1:])
print(json.dumps({"code": code, "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def one(ref: str, trace_file: str, out: Path) -> dict[str, float | int | str]:
    command = [sys.executable, "-c", CHILD, "simulate", ref, "--trace", str(TRACES / trace_file), "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "training_images" / "src")])}
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=LIMIT_S, preexec_fn=_limit)
    except subprocess.TimeoutExpired:
        return {"error": f"still running after {LIMIT_S} s"}
    wall = time.perf_counter() - started
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"error": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    child = json.loads(lines[-1])
    if child["code"] != 0:
        return {"error": f"simulate exit {child['code']}: {done.stderr.strip()[-300:]}"}
    # "STACK: N jobs, ... -> OUT (S s)": S is the command's own time after synthesis.
    summary, _, rest = lines[0].partition(" -> ")
    after_synth = float(rest.rsplit("(", 1)[1].rstrip("s)"))
    return {"wall_s": round(wall, 2), "after_synth_s": after_synth, "peak_rss_mb": round(child["maxrss_kib"] / 1024, 1), "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description="gpu-platform simulate on every shipped stack, a week each")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    results: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (ref, trace_file) in RUNS.items():
            tries = [one(ref, trace_file, Path(tmp)) for _ in range(args.repeat)]
            failed = [t for t in tries if "error" in t]
            if failed:
                results[name] = {"error": failed[0]["error"], "within_budget": False}
                continue
            wall = statistics.median(float(t["wall_s"]) for t in tries)
            rss = max(float(t["peak_rss_mb"]) for t in tries)
            results[name] = {
                "wall_s": wall,
                "after_synth_s": statistics.median(float(t["after_synth_s"]) for t in tries),
                "peak_rss_mb": rss,
                "within_budget": wall < BUDGET_S and rss < BUDGET_MB,
                "summary": tries[0]["summary"],
            }
    load = os.getloadavg()[0]
    print(json.dumps({"budget": {"wall_s": BUDGET_S, "peak_rss_mb": BUDGET_MB}, "load_1min": round(load, 2), "runs": results}, indent=2))


if __name__ == "__main__":
    main()

"""Synth speed: one stack against the bare SDK import, and growth from 5 to 50 node pools.

Run: .venv/bin/python benchmarks/synth_bench.py [--stack dev-aws] [--repeat 3]
Prints one JSON document. Each figure is the median of --repeat runs; the import and the
one-stack synth are timed in fresh processes (what a user waits for), the pool sweep in one
process (what the program itself costs as stacks grow).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BARE_IMPORT = "import pulumi, pulumi_aws, pulumi_gcp, pulumi_kubernetes"


def _timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=REPO, check=True, capture_output=True)
    return time.perf_counter() - started


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def fresh_process_figures(stack: str, repeat: int) -> dict[str, float]:
    script = Path(sys.executable).with_name("gpu-platform")
    with tempfile.TemporaryDirectory() as out:
        synth = [_timed([str(script), "synth", stack, "--out", out]) for _ in range(repeat)]
    bare = [_timed([sys.executable, "-c", BARE_IMPORT]) for _ in range(repeat)]
    return {
        "bare_sdk_import_s": _median(bare),
        "synth_one_stack_s": _median(synth),
        "synth_over_import": round(_median(synth) / _median(bare), 2),
    }


def pool_sweep(stack: str, counts: list[int], repeat: int) -> list[dict[str, Any]]:
    from infra import program, stackfile, synth

    base = stackfile.read(stack, REPO)
    template = base.config["gpu-platform:platform"]["nodePools"][0]
    rows = []
    for count in counts:
        config = copy.deepcopy(base.config)
        pools = []
        for i in range(count):
            pool = copy.deepcopy(template)
            pool["name"] = f"pool-{i:02d}"
            pools.append(pool)
        config["gpu-platform:platform"]["nodePools"] = pools
        # Large sweeps exceed the example stack's per-team quotas and policy limits; the
        # benchmark measures synth, so it drops them.
        config["gpu-platform:platform"].pop("scheduling", None)
        config["gpu-platform:platform"].pop("policy", None)
        flat = stackfile.StackFile(base.path, base.stack, config).pulumi_config()
        times, resources = [], 0
        for _ in range(repeat):
            started = time.perf_counter()
            result = synth.run(program.main, "gpu-platform", stack, flat)
            times.append(time.perf_counter() - started)
            resources = len(result.resources)
        rows.append({"pools": count, "resources": resources, "synth_s": _median(times)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev-aws")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pools", default="5,10,20,50")
    args = parser.parse_args()
    sweep = pool_sweep(args.stack, [int(n) for n in args.pools.split(",")], args.repeat)
    report = {
        "stack": args.stack,
        **fresh_process_figures(args.stack, args.repeat),
        "pool_sweep": sweep,
        "growth_5_to_50": round(sweep[-1]["synth_s"] / sweep[0]["synth_s"], 2),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

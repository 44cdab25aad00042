"""Synth speed: one stack against importing the SDK modules it loads, and growth with node pools.

Run: .venv/bin/python benchmarks/synth_bench.py [--stack dev-aws] [--repeat 3]
Prints one JSON document. Each figure is the median of --repeat runs; the import and the
one-stack synth are timed in fresh processes (what a user waits for), the pool sweep in one
process (what the program itself costs as stacks grow).

The baseline is the import of every SDK module (pulumi, pulumi_aws, pulumi_gcp,
pulumi_kubernetes and their submodules) that a synth of the stack leaves in sys.modules, read
from a fresh process that ran the synth: the SDKs import their resource modules lazily, so
importing only the top packages measures almost nothing. The sweep stays within EKS's 30 node
groups per cluster (29 GPU pools beside the system group, components.facts.limits).
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
SDK_PACKAGES = ("pulumi", "pulumi_aws", "pulumi_gcp", "pulumi_kubernetes")
# Prints the SDK modules a synth of the stack in argv[1] loads, one per line.
LOADED_BY_SYNTH = """
import sys, tempfile
from infra import cli
with tempfile.TemporaryDirectory() as out:
    assert cli.main(["synth", sys.argv[1], "--out", out]) == 0
roots = {SDK_PACKAGES!r}
print("--- modules ---")
# Lazily imported modules never loaded (pulumi._utils._LazyModule) cost the synth nothing.
loaded = [m for m, mod in sys.modules.items() if m.split(".")[0] in roots and type(mod).__name__ != "_LazyModule"]
print("\\n".join(sorted(loaded)))
""".replace("{SDK_PACKAGES!r}", repr(SDK_PACKAGES))


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
    loaded = subprocess.run(
        [sys.executable, "-c", LOADED_BY_SYNTH, stack], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.split("--- modules ---")[-1].split()
    # getattr of a missing name loads a module the SDK left lazy, as the program's use does.
    import_all = "import importlib\nfor m in %r:\n    getattr(importlib.import_module(m), '_load', None)" % loaded
    bare = [_timed([sys.executable, "-c", import_all]) for _ in range(repeat)]
    return {
        "sdk_modules_loaded": len(loaded),
        "sdk_module_import_s": _median(bare),
        "synth_one_stack_s": _median(synth),
        "synth_over_import": round(_median(synth) / _median(bare), 2),
    }


def pool_sweep(stack: str, counts: list[int], repeat: int) -> list[dict[str, Any]]:
    from infra import program, stackfile, synth

    base = stackfile.read(stack, REPO)
    template = base.config["gpu-platform:platform"]["nodePools"][0]
    # The first synth in a process pays the SDK imports; the sweep measures the program.
    synth.run(program.main, "gpu-platform", stack, base.pulumi_config())
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
    parser.add_argument("--pools", default="5,10,20,29")
    args = parser.parse_args()
    sweep = pool_sweep(args.stack, [int(n) for n in args.pools.split(",")], args.repeat)
    report = {
        "stack": args.stack,
        **fresh_process_figures(args.stack, args.repeat),
        "pool_sweep": sweep,
        "growth_first_to_last": round(sweep[-1]["synth_s"] / sweep[0]["synth_s"], 2),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

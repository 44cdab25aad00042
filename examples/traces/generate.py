"""Writes prod-aws-week.csv: a synthetic week of training on the prod-aws stack, for
docs/capacity-planning.md. Deterministic: `python examples/traces/generate.py` rewrites the same file.

Two teams (research 60%, applied 40%) submit mostly in working hours: multi-node training on
H100 and H200 pools (checkpoint every 30 minutes, a few hours each) and short single-GPU
evaluations on the L4 pool after checkpoints. Shapes, tiers and volumes are chosen to load the
training pools to roughly three quarters of their maximum size over the week.
"""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

WEEK_S = 7 * 86400
# pool: (jobs in the week, [(nodes, weight)], GPUs per node, median hours, checkpoint seconds)
POOLS = {
    "h100-train": (160, [(1, 50), (2, 30), (4, 15), (8, 5)], 8, 2.0, 1800),
    "h200-train": (105, [(1, 60), (2, 30), (4, 10)], 8, 2.0, 1800),
    "l4-eval": (300, [(1, 1)], 1, 0.3, None),
}
TIERS = [("production", 15), ("standard", 55), ("best-effort", 25), ("opportunistic", 5)]
TEAMS = [("research", 60), ("applied", 40)]


def _pick(rng: random.Random, weighted: list[tuple[object, int]]) -> object:
    return rng.choices([v for v, _ in weighted], weights=[w for _, w in weighted])[0]


def _submit_time(rng: random.Random) -> float:
    """A time in the week, three times as likely between 08:00 and 20:00 as at night."""
    while True:
        t = rng.uniform(0, WEEK_S)
        hour = (t % 86400) / 3600
        if rng.random() < (1.0 if 8 <= hour < 20 else 1 / 3):
            return t


def rows(seed: int = 15) -> list[list[str]]:
    rng = random.Random(seed)
    jobs = []
    for pool, (count, shapes, gpus, median_h, checkpoint) in POOLS.items():
        for _ in range(count):
            hours = median_h * math.exp(rng.gauss(0, 0.8))
            jobs.append(
                (
                    round(_submit_time(rng)),
                    str(_pick(rng, TEAMS)),
                    str(_pick(rng, TIERS)),
                    pool,
                    int(str(_pick(rng, shapes))),
                    gpus,
                    max(60, round(hours * 3600)),
                    "" if checkpoint is None else str(checkpoint),
                )
            )
    jobs.sort()
    return [[f"job-{i:04d}", str(submit), *map(str, rest)] for i, (submit, *rest) in enumerate(jobs)]


def main() -> None:
    path = Path(__file__).with_name("prod-aws-week.csv")
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["id", "submit_s", "team", "tier", "pool", "nodes", "gpus_per_node", "duration_s", "checkpoint_every_s"])
        writer.writerows(rows())


if __name__ == "__main__":
    main()

"""Writes the example traces: a synthetic week of training per shipped stack, for
docs/capacity-planning.md and the simulator's tests and benchmark. Deterministic:
`python examples/traces/generate.py` rewrites the same files.

prod-aws-week.csv (prod-aws's pools; prod-gcp names its pools alike): two teams (research 60%,
applied 40%) submit mostly in working hours: multi-node training on H100 and H200 pools
(checkpoint every 30 minutes, a few hours each) and short single-GPU evaluations on the L4 pool
after checkpoints. Shapes, tiers and volumes are chosen to load the training pools to roughly
three quarters of their maximum size over the week. dev-aws-week.csv, dev-gcp-week.csv and
onprem-week.csv have the same shape (565 jobs, the same tiers and teams, the same hours) written
for those stacks' pools and quotas: shorter runs on shared and MIG slots, and multi-node
training only where a pool has whole GPUs, by the teams that hold quota there.
"""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

WEEK_S = 7 * 86400
Shape = tuple[int, list[tuple[object, int]], int, float, "int | None"]
# pool: (jobs in the week, [(nodes, weight)], GPUs per node, median hours, checkpoint seconds)
POOLS: dict[str, Shape] = {
    "h100-train": (160, [(1, 50), (2, 30), (4, 15), (8, 5)], 8, 2.0, 1800),
    "h200-train": (105, [(1, 60), (2, 30), (4, 10)], 8, 2.0, 1800),
    "l4-eval": (300, [(1, 1)], 1, 0.3, None),
}
TIERS: list[tuple[object, int]] = [("production", 15), ("standard", 55), ("best-effort", 25), ("opportunistic", 5)]
TEAMS: list[tuple[object, int]] = [("research", 60), ("applied", 40)]

# The other stacks: their pools (stacks/Pulumi.<stack>.yaml) and, per pool, the teams that hold
# quota there (a team without quota on a pool has its jobs there rejected, not queued).
RESEARCH_ONLY: list[tuple[object, int]] = [("research", 1)]
STACKS: dict[str, tuple[dict[str, Shape], dict[str, list[tuple[object, int]]]]] = {
    "prod-aws": (POOLS, {}),
    # l4-shared: one L4 shared by 4 pods (a pod asks 1 slot); l4-train: 4 L4s per node, research's.
    "dev-aws": (
        {
            "l4-shared": (300, [(1, 1)], 1, 2.0, None),
            "l4-train": (265, [(1, 70), (2, 30)], 4, 0.5, 1800),
        },
        {"l4-train": RESEARCH_ONLY},
    ),
    # l4-shared as on dev-aws; a100-mig: 7 MIG slices per node, a job on one slice.
    "dev-gcp": (
        {
            "l4-shared": (300, [(1, 1)], 1, 2.0, None),
            "a100-mig": (265, [(1, 1)], 1, 2.0, 1800),
        },
        {},
    ),
    # a100-train: 4 fixed nodes of 8 A100s; l40s-shared: 2 nodes of 4 L40S, each shared by 2.
    "onprem": (
        {
            "a100-train": (200, [(1, 50), (2, 35), (4, 15)], 8, 0.8, 1800),
            "l40s-shared": (365, [(1, 1)], 1, 0.5, None),
        },
        {},
    ),
}


def _pick(rng: random.Random, weighted: list[tuple[object, int]]) -> object:
    return rng.choices([v for v, _ in weighted], weights=[w for _, w in weighted])[0]


def _submit_time(rng: random.Random) -> float:
    """A time in the week, three times as likely between 08:00 and 20:00 as at night."""
    while True:
        t = rng.uniform(0, WEEK_S)
        hour = (t % 86400) / 3600
        if rng.random() < (1.0 if 8 <= hour < 20 else 1 / 3):
            return t


def rows(
    seed: int = 15, pools: dict[str, Shape] = POOLS, teams: dict[str, list[tuple[object, int]]] | None = None
) -> list[list[str]]:
    rng = random.Random(seed)
    jobs = []
    for pool, (count, shapes, gpus, median_h, checkpoint) in pools.items():
        pool_teams = (teams or {}).get(pool, TEAMS)
        for _ in range(count):
            hours = median_h * math.exp(rng.gauss(0, 0.8))
            jobs.append(
                (
                    round(_submit_time(rng)),
                    str(_pick(rng, pool_teams)),
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
    for stack, (pools, teams) in STACKS.items():
        path = Path(__file__).with_name(f"{stack}-week.csv")
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(["id", "submit_s", "team", "tier", "pool", "nodes", "gpus_per_node", "duration_s", "checkpoint_every_s"])
            writer.writerows(rows(15, pools, teams))


if __name__ == "__main__":
    main()

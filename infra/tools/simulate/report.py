"""What a simulation writes: jobs.csv, segments.csv, summary.json, and report.md with its PNG plots
(drawn by infra.tools.simulate.plots).

Figures are per team, per tier and per pool. GPU-hours count the time a job's pods held GPU
slots, in physical GPUs (a slot of a GPU shared four ways is a quarter of one). Waits are from
submission to the first start, over the jobs that started; percentiles are nearest-rank. Cost is
the pool's node-hours, booting and idle included, times the catalog's price per node.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from components.facts import catalog
from infra.tools.simulate.model import StackModel
from infra.tools.simulate.plots import WAIT_CDF, Plotters, plot_count, start_plots
from infra.tools.simulate.state import STATUS_FINISHED, STATUS_REJECTED, STATUS_UNFINISHED, JobOutcome, Result

JOB_COLUMNS = (
    "id", "team", "tier", "pool", "submit_s", "first_start_s", "end_s", "wait_s",
    "preemptions", "interruptions", "lost_gpu_s", "status",
)
SEGMENT_COLUMNS = ("id", "pool", "start_s", "end_s", "gpus", "end_reason")
# Rejected jobs listed by name in report.md; all are in jobs.csv.
REJECTED_SHOWN = 20


def usd(value: float | None, sign: str = "") -> str:
    """A cost as tables and the terminal print it; n/a where no price is known."""
    return "n/a" if value is None else f"{sign}{value:,.2f}"


def share(value: float | None) -> str:
    """A utilization as a percentage; - where nothing was provisioned."""
    return "-" if value is None else f"{value:.0%}"


def number(value: float | None) -> str:
    """CSV text of a number: whole numbers bare, others to the millisecond; empty for none."""
    if value is None:
        return ""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _rounded(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 3)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile of sorted `values`."""
    return values[max(0, math.ceil(p / 100 * len(values)) - 1)]


@dataclass
class _Group:
    jobs: int = 0
    finished: int = 0
    rejected: int = 0
    unfinished: int = 0
    preemptions: int = 0
    interruptions: int = 0
    gpu_seconds: float = 0.0
    lost_gpu_seconds: float = 0.0

    def __post_init__(self) -> None:
        self.waits: list[float] = []

    def as_dict(self) -> dict[str, Any]:
        waits = sorted(self.waits)
        return {
            "jobs": self.jobs,
            "finished": self.finished,
            "rejected": self.rejected,
            "unfinished": self.unfinished,
            "not_started": self.jobs - self.rejected - len(waits),
            "wait_s": {
                "p50": _rounded(percentile(waits, 50)) if waits else None,
                "p95": _rounded(percentile(waits, 95)) if waits else None,
                "max": _rounded(waits[-1]) if waits else None,
            },
            "gpu_hours": _rounded(self.gpu_seconds / 3600),
            "lost_gpu_hours": _rounded(self.lost_gpu_seconds / 3600),
            "preemptions": self.preemptions,
            "interruptions": self.interruptions,
        }


    def add(self, job: JobOutcome, gpu_seconds: float, lost_gpu_seconds: float) -> None:
        self.jobs += 1
        self.finished += job.status == STATUS_FINISHED
        self.rejected += job.status == STATUS_REJECTED
        self.unfinished += job.status == STATUS_UNFINISHED
        self.preemptions += job.preemptions
        self.interruptions += job.interruptions
        self.gpu_seconds += gpu_seconds
        self.lost_gpu_seconds += lost_gpu_seconds
        if job.first_start is not None:
            self.waits.append(job.first_start - job.submit)


@dataclass(frozen=True)
class _Usage:
    """GPU-seconds each job ran (physical GPUs) and GPU slot-seconds each pool was busy."""

    job_gpu_seconds: dict[str, float]
    pool_slot_seconds: dict[str, float]
    gpu_share: dict[str, float]

    @staticmethod
    def of(result: Result, model: StackModel) -> _Usage:
        share = {p.name: p.gpus_per_node / p.slots_per_node for p in model.pools}
        ran: dict[str, float] = defaultdict(float)
        busy: dict[str, float] = defaultdict(float)
        for segment in result.segments:
            slot_seconds = segment.gpus * (segment.end - segment.start)
            ran[segment.job] += slot_seconds * share[segment.pool]
            busy[segment.pool] += slot_seconds
        return _Usage(ran, busy, share)

    def add(self, group: _Group, job: JobOutcome) -> None:
        group.add(job, self.job_gpu_seconds.get(job.id, 0.0), job.lost_gpu_s * self.gpu_share[job.pool])


def summary(result: Result, model: StackModel) -> dict[str, Any]:
    """summary.json: per team, tier and pool, and totals."""
    usage = _Usage.of(result, model)
    teams: dict[str, _Group] = defaultdict(_Group)
    tiers: dict[str, _Group] = defaultdict(_Group)
    total = _Group()
    for job in result.jobs:
        for group in (teams[job.team], tiers[job.tier], total):
            usage.add(group, job)
    pools = {}
    for pool in result.pools:
        hours = pool.node_seconds / 3600
        capacity = pool.node_seconds * pool.slots_per_node
        pools[pool.name] = {
            "node_hours": _rounded(hours),
            "gpu_utilization": _rounded(usage.pool_slot_seconds[pool.name] / capacity) if capacity else None,
            "cost_usd": _rounded(hours * pool.usd_per_node_hour) if pool.usd_per_node_hour is not None else None,
            "usd_per_node_hour": pool.usd_per_node_hour,
            "peak_nodes": max((nodes for _, nodes, _ in pool.series), default=0),
        }
    costs = [p["cost_usd"] for p in pools.values() if p["cost_usd"] is not None]
    return {
        "stack": result.stack,
        "seed": result.seed,
        "horizon_s": _rounded(result.horizon),
        "price_note": catalog.PRICE_NOTE,
        "teams": {name: teams[name].as_dict() for name in sorted(teams)},
        "tiers": {name: tiers[name].as_dict() for name in sorted(tiers, key=lambda t: -model.tiers[t].priority)},
        "pools": pools,
        "totals": {
            **total.as_dict(),
            "node_hours": _rounded(sum(p.node_seconds for p in result.pools) / 3600),
            "cost_usd": _rounded(sum(costs)) if costs else None,
        },
        "parameters": model.parameters,
    }


def team_tier_rows(result: Result, model: StackModel) -> list[tuple[str, str, dict[str, Any]]]:
    """(team, tier, figures) for every team and tier the trace has jobs of."""
    usage = _Usage.of(result, model)
    groups: dict[tuple[str, str], _Group] = defaultdict(_Group)
    for job in result.jobs:
        usage.add(groups[(job.team, job.tier)], job)
    order = sorted(groups, key=lambda key: (key[0], -model.tiers[key[1]].priority))
    return [(team, tier, groups[(team, tier)].as_dict()) for team, tier in order]


def cost_lines(figures: dict[str, Any]) -> list[str]:
    """What the command prints of the pools' and the whole run's node-hours and cost."""
    lines = [
        f"pool {name}: {pool['node_hours']:,.1f} node-hours, GPU utilization {share(pool['gpu_utilization'])},"
        f" {usd(pool['cost_usd'], '$')}"
        for name, pool in figures["pools"].items()
    ]
    total = figures["totals"]
    lines.append(f"total: {total['node_hours']:,.1f} node-hours, {usd(total['cost_usd'], '$')} ({catalog.PRICE_NOTE})")
    return lines


def duration(seconds: float | None) -> str:
    """A wait for people: `45s`, `12m`, `3.5h`, `2.1d`."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def table(rows: list[tuple[str, str, dict[str, Any]]]) -> str:
    """The team x tier table the command prints."""
    header = ["team", "tier", "jobs", "done", "rejected", "unfinished", "wait p50", "p95", "max", "GPU-h"]
    lines: list[list[str]] = [header]
    for team, tier, figures in rows:
        wait = figures["wait_s"]
        lines.append(
            [
                team, tier, str(figures["jobs"]), str(figures["finished"]), str(figures["rejected"]),
                str(figures["unfinished"]), duration(wait["p50"]), duration(wait["p95"]), duration(wait["max"]),
                f"{figures['gpu_hours']:,.1f}",
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths))).rstrip() for line in lines)


def _write_csv(path: Path, header: Iterable[str], rows: Iterable[Iterable[Any]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def write(result: Result, model: StackModel, out_dir: Path, plotters: Plotters | None = None) -> dict[str, Any]:
    """Every output under `out_dir` (replacing an earlier run's); returns the summary. The plots
    are handed to `plotters` (new ones where none are given) first, and drawn while the tables
    and report.md are written."""
    if plotters is None:
        with Plotters(plot_count(model)) as own:
            return write(result, model, out_dir, own)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.png"):
        old.unlink()
    plots = start_plots(result, model, out_dir, plotters)
    figures = write_tables(result, model, out_dir)
    (out_dir / "report.md").write_text(markdown(result, model, figures, plots))
    plotters.finish()
    return figures


def write_tables(result: Result, model: StackModel, out_dir: Path) -> dict[str, Any]:
    """jobs.csv, segments.csv and summary.json; returns the summary."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_csv(
        out_dir / "jobs.csv",
        JOB_COLUMNS,
        (
            (
                j.id, j.team, j.tier, j.pool, number(j.submit), number(j.first_start), number(j.end),
                number(j.first_start - j.submit if j.first_start is not None else None),
                j.preemptions, j.interruptions, number(j.lost_gpu_s), j.status,
            )
            for j in result.jobs
        ),
    )
    ordered = sorted(result.segments, key=lambda s: (s.start, s.end, s.job))
    _write_csv(
        out_dir / "segments.csv",
        SEGMENT_COLUMNS,
        ((s.job, s.pool, number(s.start), number(s.end), s.gpus, s.end_reason) for s in ordered),
    )
    figures = summary(result, model)
    (out_dir / "summary.json").write_text(json.dumps(figures, indent=2) + "\n")
    return figures


# --- report.md --------------------------------------------------------------------------------


def markdown(result: Result, model: StackModel, figures: dict[str, Any], plots: dict[str, str]) -> str:
    lines = [
        f"# Capacity simulation: `{result.stack}`",
        "",
        f"{len(result.jobs)} jobs, seed {result.seed}, horizon {duration(result.horizon)} ({number(result.horizon)} s)."
        " Waits are from submission to the first start; GPU-hours are in physical GPUs.",
        "",
        "## Teams and tiers",
        "",
        "| team | tier | jobs | finished | rejected | unfinished | wait p50 | wait p95 | wait max | GPU-hours |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for team, tier, row in team_tier_rows(result, model):
        wait = row["wait_s"]
        lines.append(
            f"| {team} | {tier} | {row['jobs']} | {row['finished']} | {row['rejected']} | {row['unfinished']}"
            f" | {duration(wait['p50'])} | {duration(wait['p95'])} | {duration(wait['max'])} | {row['gpu_hours']:,.1f} |"
        )
    lines += [
        "",
        f"## Pools ({catalog.PRICE_NOTE})",
        "",
        "| pool | node-hours | peak nodes | GPU utilization | cost (USD) |",
        "|---|---|---|---|---|",
    ]
    for name, pool in figures["pools"].items():
        lines.append(
            f"| `{name}` | {pool['node_hours']:,.1f} | {pool['peak_nodes']} | {share(pool['gpu_utilization'])}"
            f" | {usd(pool['cost_usd'])} |"
        )
    total = figures["totals"]
    lines += ["", f"Total: {total['node_hours']:,.1f} node-hours, {usd(total['cost_usd'], '$')}.", ""]
    rejected = [j for j in result.jobs if j.status == STATUS_REJECTED]
    if rejected:
        lines += [f"## Rejected jobs ({len(rejected)}): they can never run on this stack", ""]
        lines += [f"- `{j.id}`: {j.reason}" for j in rejected[:REJECTED_SHOWN]]
        if len(rejected) > REJECTED_SHOWN:
            lines.append(f"- ... {len(rejected) - REJECTED_SHOWN} more in jobs.csv")
        lines.append("")
    lines += ["## Waits", "", f"![wait-time CDF per tier]({plots[WAIT_CDF]})", "", "## Pools over time", ""]
    for pool in result.pools:
        lines += [f"![{pool.name}: nodes and queued GPU slots]({plots[pool.name]})", ""]
    lines += ["## Model parameters", "", "```json", json.dumps(model.parameters, indent=2), "```", ""]
    return "\n".join(lines)

"""The "Capacity impact" section of `gpu-platform review --base REF --trace FILE`.

Review synthesizes every stack in both trees; this replays one trace against what each side of a
stack deploys, with the working tree's simulator and seed 0, and shows what the pull request
changes for the teams and tiers: p95 wait per team and per tier, jobs finished, node-hours and
cost. A side the trace does not fit (it names a team, tier or pool that side lacks), or that did
not synthesize, is named with its first problem instead of a figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from components.facts import catalog
from components.spec import SpecError
from components.spec.fleet import worker_stack
from infra.tools.review.diff import StackReview
from infra import stackfile
from infra.tools.simulate import build, engine, fleet_report, model, report, trace

SEED = 0


def _simulated(stack: str, snapshot: Mapping[str, Any] | None, rows: list[list[str]], source: str) -> dict[str, Any] | str:
    """The summary of the trace on one side, or why there is none."""
    if snapshot is None:
        return "no such stack"
    if "error" in snapshot:
        return "the stack file is invalid"
    try:
        if "workers" in snapshot:
            return _fleet(stack, snapshot, rows, source)
        stack_model = build.stack_model(stack, snapshot["resources"], snapshot["outputs"])
        names = trace.StackNames(teams=stack_model.teams, tiers=stack_model.tiers, pools=[p.name for p in stack_model.pools])
        jobs = trace.parse(rows, source, names)
    except model.ModelError as exc:
        return f"not simulated: {exc}"
    except trace.TraceError as exc:
        more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
        return f"the trace does not fit: {exc.problems[0]}{more}"
    return report.summary(engine.simulate(stack_model, jobs, SEED), stack_model)


def _fleet(stack: str, snapshot: Mapping[str, Any], rows: list[list[str]], source: str) -> dict[str, Any] | str:
    """A fleet manager's side: the trace dispatched over its workers (infra.tools.simulate.fleet).
    Raises ModelError and TraceError as a cluster stack's side does."""
    parts = {}
    for worker, side in snapshot["workers"].items():
        try:
            spec = stackfile.StackFile(Path(f"{stackfile.STACKS_DIR}/Pulumi.{worker_stack(worker)}.yaml"), worker_stack(worker), side["config"]).spec()
        except SpecError:
            return f"worker {worker} is invalid"
        parts[worker] = (spec, side["resources"], side["outputs"])
    prepared = fleet_report.fleet_inputs(snapshot["resources"], parts)
    jobs = trace.parse(rows, source, fleet_report.trace_names(prepared))
    return fleet_report.summary(stack, fleet_report.with_jobs(prepared, jobs, parts), SEED)


def _wait(seconds: float | None) -> str:
    return report.duration(seconds)


def _wait_change(before: float | None, after: float | None) -> str:
    if before == after:
        return ""
    if before is None or after is None:
        return "-"
    sign = "+" if after > before else "-"
    return f"{sign}{report.duration(abs(after - before))}"


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def _number_change(before: float | None, after: float | None, places: int = 0) -> str:
    if before is None or after is None or before == after:
        return ""
    return f"{after - before:+,.{places}f}"


def _table(base: dict[str, Any] | None, head: dict[str, Any] | None) -> list[str]:
    lines = ["| | base | head | change |", "|---|---|---|---|"]
    for group, label in (("teams", "team"), ("tiers", "tier")):
        names = list(dict.fromkeys([*(base or {}).get(group, {}), *(head or {}).get(group, {})]))
        for name in names:
            before = (base or {}).get(group, {}).get(name, {}).get("wait_s", {}).get("p95")
            after = (head or {}).get(group, {}).get(name, {}).get("wait_s", {}).get("p95")
            lines.append(f"| p95 wait, {label} `{name}` | {_wait(before)} | {_wait(after)} | {_wait_change(before, after)} |")
    totals_before, totals_after = (base or {}).get("totals", {}), (head or {}).get("totals", {})
    for key, label, places in (("finished", "jobs finished", 0), ("unfinished", "jobs unfinished", 0), ("node_hours", "node-hours", 1)):
        before, after = totals_before.get(key), totals_after.get(key)
        shown = ["-" if v is None else f"{v:,.{places}f}" for v in (before, after)]
        lines.append(f"| {label} | {shown[0]} | {shown[1]} | {_number_change(before, after, places)} |")
    before, after = totals_before.get("cost_usd"), totals_after.get("cost_usd")
    lines.append(f"| cost (USD) | {_usd(before)} | {_usd(after)} | {_number_change(before, after, 2)} |")
    return lines


def markdown(rows: list[list[str]], source: str, base: Mapping[str, Any], head: Mapping[str, Any]) -> str:
    """The section for every stack of either tree; `rows` are the trace's CSV cells."""
    lines = [
        "## Capacity impact",
        "",
        f"The trace `{source}` ({max(0, len(rows) - 1)} jobs) simulated on what each side deploys"
        f" (`gpu-platform simulate`, seed {SEED}); costs are {catalog.PRICE_NOTE}.",
        "",
    ]
    for stack in sorted(set(base) | set(head)):
        before = _simulated(stack, base.get(stack), rows, source)
        after = _simulated(stack, head.get(stack), rows, source)
        if isinstance(before, str) and isinstance(after, str):
            reason = before if before == after else f"base: {before}; head: {after}"
            lines += [f"- `{stack}`: not simulated: {reason}", ""]
            continue
        lines += [f"### `{stack}`", ""]
        for side, outcome in (("base", before), ("head", after)):
            if isinstance(outcome, str):
                lines += [f"The {side} is not simulated: {outcome}.", ""]
        lines += [
            *_table(before if isinstance(before, dict) else None, after if isinstance(after, dict) else None),
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def section(rows: list[list[str]], source: str, reviews: Sequence[StackReview]) -> str:
    """The section for the stacks of a review: each side's synthesized snapshot, or its error."""
    base = {r.stack: r.base if r.base is not None else {"error": r.base_error} for r in reviews if r.base is not None or r.base_error}
    head = {r.stack: r.head if r.head is not None else {"error": r.head_error} for r in reviews if r.head is not None or r.head_error}
    return markdown(rows, source, base, head)

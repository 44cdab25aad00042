"""`gpu-platform simulate STACK --trace FILE`: the command around trace, model, engine and report.

The stack is synthesized first (infra.cli), so the model is read from exactly what `pulumi up`
would declare. Every problem with the command line's per-pool figures and the trace is reported
at once, one line each, exit 2.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

from infra import collector, output_folder, synth
from infra.tools.simulate import build, engine, model, plots, report, trace
from infra.tools.simulate.model import ModelError
from infra.tools.simulate.state import BoundExceeded

__all__ = ["BoundExceeded", "ModelError", "Options", "UsageError", "prepare", "run"]


class UsageError(Exception):
    """Invalid input: one message per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Options:
    trace: Path
    out_dir: Path
    seed: int
    horizon_s: float | None
    spot_rates: list[str]
    scale_up_s: list[str]


def pool_figures(values: list[str], flag: str, pools: list[str], problems: list[str]) -> dict[str, float]:
    """`POOL=NUMBER` arguments of `flag`; problems are appended, one line each."""
    out: dict[str, float] = {}
    for value in values:
        name, _, text = value.partition("=")
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if name not in pools:
            problems.append(f"{flag} {value}: no pool {name!r}; pools: {', '.join(pools)}")
        elif not math.isfinite(number) or number < 0:
            problems.append(f"{flag} {value}: expected {name}=NUMBER, a number >= 0")
        else:
            out[name] = number
    return out


def prepare(stack: str, synthesis: synth.Synthesis, options: Options) -> tuple[model.StackModel, list[trace.TraceJob]]:
    """The model with the command line's figures, and the trace checked against it."""
    problems: list[str] = []
    if options.horizon_s is not None and not (math.isfinite(options.horizon_s) and 0 < options.horizon_s <= trace.MAX_TRACE_S):
        problems.append(f"--horizon-s: expected a number of seconds > 0, at most {trace.MAX_TRACE_S}, got {options.horizon_s:g}")
    plain = build.stack_model(stack, synthesis.resources, synthesis.outputs)
    pools = [p.name for p in plain.pools]
    overrides = model.Overrides(
        spot_rates=pool_figures(options.spot_rates, "--spot-rate", pools, problems),
        scale_up_s=pool_figures(options.scale_up_s, "--scale-up-s", pools, problems),
    )
    stack_model = build.stack_model(stack, synthesis.resources, synthesis.outputs, overrides)
    names = trace.StackNames(teams=stack_model.teams, tiers=stack_model.tiers, pools=pools)
    jobs: list[trace.TraceJob] = []
    try:
        jobs = trace.read(options.trace, names)
    except trace.TraceError as exc:
        problems += exc.problems
    if problems:
        raise UsageError(problems)
    return stack_model, jobs


def run(stack: str, synthesis: synth.Synthesis, options: Options) -> str:
    """Simulate, write the outputs, and return what the command prints."""
    started = time.perf_counter()
    # The trace's jobs: 0.57 s instead of 0.75 s of CPU for 100,000 of them (infra.collector).
    with collector.paused():
        stack_model, jobs = prepare(stack, synthesis, options)
    # Started before the engine, so that they load matplotlib while it runs (plots.Plotters).
    with plots.Plotters(plots.plot_count(stack_model)) as plotters:
        result = engine.simulate(stack_model, jobs, options.seed, options.horizon_s)
        with output_folder.staged(options.out_dir) as staging:
            figures = report.write(result, stack_model, staging, plotters)
    elapsed = time.perf_counter() - started
    lines = [
        f"{stack}: {len(jobs)} jobs, seed {options.seed}, horizon {report.duration(result.horizon)}"
        f" -> {options.out_dir} ({elapsed:.1f}s)",
        "",
        report.table(report.team_tier_rows(result, stack_model)),
        "",
    ]
    lines += report.cost_lines(figures)
    return "\n".join(lines) + "\n"

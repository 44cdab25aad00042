"""The PNG plots of a simulation: one per pool (nodes, and GPU slots of jobs waiting, over time)
and the wait-time CDF per tier, drawn from plain data by processes that load matplotlib while the
engine runs (Plotters), so that a 50-pool run draws its plots beside the tables, not after them.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from infra.tools import parallel
from infra.tools.simulate.model import StackModel
from infra.tools.simulate.state import Result

WAIT_CDF = "wait-cdf.png"
# Points per plotted line: longer series are reduced to the maximum of each time bin.
PLOT_POINTS = 2000


def _reduced(series: list[tuple[float, int, int]], end: float) -> tuple[list[float], list[int], list[int]]:
    """The step series up to `end`, at most PLOT_POINTS steps: each time bin keeps its maximum."""
    points = [*series, (end, series[-1][1], series[-1][2])] if series else [(0.0, 0, 0), (end, 0, 0)]
    if len(points) <= PLOT_POINTS or end <= 0:
        return [p[0] for p in points], [p[1] for p in points], [p[2] for p in points]
    width = end / PLOT_POINTS
    times: list[float] = []
    nodes: list[int] = []
    queued: list[int] = []
    for time, n, q in points:
        start = math.floor(time / width) * width
        if times and times[-1] == start:
            nodes[-1], queued[-1] = max(nodes[-1], n), max(queued[-1], q)
        else:
            times.append(start)
            nodes.append(n)
            queued.append(q)
    return times, nodes, queued


# A plot costs matplotlib's layout of its ticks and labels (about 0.1 s of CPU), whatever its
# points; from this many plots on, they are drawn by a process per core (Plotters).
PARALLEL_PLOTS = 8

# One pool's plot: title, unit, scale, times, nodes, queued, the file.
PoolPlot = tuple[str, str, float, list[float], list[int], list[int], str]
# The wait-time CDF: title, (label, sorted waits in hours) per tier, the file.
WaitPlot = tuple[str, list[tuple[str, list[float]]], str]


def _draw_pools(plots: list[PoolPlot]) -> None:
    """The pools' PNGs (nodes, and GPU slots of jobs waiting, over time). Module-level and plain
    data only: it runs in the plot processes too."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    for title, unit, scale, times, nodes, queued, path in plots:
        figure = Figure(figsize=(8, 4.5), dpi=100)
        FigureCanvasAgg(figure)
        upper, lower = figure.subplots(2, 1, sharex=True)
        x = [t / scale for t in times]
        upper.step(x, nodes, where="post", color="tab:blue")
        upper.set_ylabel("nodes up")
        upper.set_ylim(bottom=0)
        upper.set_title(title)
        lower.step(x, queued, where="post", color="tab:orange")
        lower.set_ylabel("GPU slots queued")
        lower.set_ylim(bottom=0)
        lower.set_xlabel(unit)
        figure.tight_layout()
        figure.savefig(path, format="png", metadata={"Software": None})


def _draw_waits(plot: WaitPlot) -> None:
    """The wait-time CDF per tier, from plain data like _draw_pools."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    title, tiers, path = plot
    figure = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    for label, values in tiers:
        axes.step(values, [(i + 1) / len(values) for i in range(len(values))], where="post", label=label)
    axes.set_xlabel("wait (hours)")
    axes.set_ylabel("share of started jobs")
    axes.set_ylim(0, 1.02)
    axes.set_title(title)
    if tiers:
        axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, format="png", metadata={"Software": None})


def _draw(pools: list[PoolPlot], waits: WaitPlot | None) -> None:
    _draw_pools(pools)
    if waits is not None:
        _draw_waits(waits)


# A plot process: it imports matplotlib at once, then draws what it is sent as JSON on stdin. A
# fresh interpreter, not a fork: a fork of a process running the SDK's threads is not safe, and
# multiprocessing's spawn would re-run the caller's main module.
_DRAW = (
    "import json, sys\n"
    "import matplotlib.backends.backend_agg, matplotlib.figure\n"
    "from infra.tools.simulate.plots import _draw\n"
    "_draw(*json.load(sys.stdin))\n"
)


class Plotters:
    """The processes that draw a run's plots, one per core, started before the engine runs: they
    import matplotlib (about 0.4 s of CPU each) on the cores the single-threaded engine leaves
    idle, then draw every plot while this process writes the tables and report.md. Below
    PARALLEL_PLOTS plots, or on one core, there are none and this process draws the plots itself.
    Either way every plot is drawn by `_draw`, so the files are the same. Use it as a context
    manager: processes not waited for (the engine raised) are killed on the way out."""

    def __init__(self, plots: int) -> None:
        count = min(parallel.cores(), plots // (PARALLEL_PLOTS // 2)) if plots >= PARALLEL_PLOTS else 1
        # This process's module path, and not the working directory first (-P): the plots are
        # drawn by this code even when run from another checkout.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.processes = [
            subprocess.Popen([sys.executable, "-P", "-c", _DRAW], stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
            for _ in range(count if count > 1 else 0)
        ]
        self.local: tuple[list[PoolPlot], WaitPlot | None] | None = None

    def __enter__(self) -> Plotters:
        return self

    def __exit__(self, *_: object) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            for stream in (process.stdin, process.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()

    def start(self, pools: list[PoolPlot], waits: WaitPlot) -> None:
        """Hand the plots to the processes (the wait CDF to the one with fewer pools), or keep
        them for `finish` to draw here."""
        count = len(self.processes)
        if not count:
            self.local = (pools, waits)
            return
        for i, process in enumerate(self.processes):
            assert process.stdin is not None
            try:
                with process.stdin:
                    process.stdin.write(json.dumps([pools[i::count], waits if i == count - 1 else None]))
            except BrokenPipeError:
                # The process ended before it read its share: `finish` reports its error.
                pass

    def finish(self) -> None:
        """Every plot drawn: here, or by the processes, waited for."""
        if self.local is not None:
            _draw(*self.local)
            self.local = None
        for process in self.processes:
            assert process.stderr is not None
            problem = process.stderr.read()
            if process.wait() != 0:
                raise RuntimeError(f"drawing the plots failed: {problem.strip().splitlines()[-1:]}")


def plot_count(model: StackModel) -> int:
    """The PNGs a run of `model` writes: one per pool and the wait CDF."""
    return len(model.pools) + 1


def start_plots(result: Result, model: StackModel, out_dir: Path, plotters: Plotters) -> dict[str, str]:
    """Hand every plot (one PNG per pool: nodes, and GPU slots of jobs waiting, over time; the
    wait-time CDF per tier) to `plotters`; returns the file name of each, by pool name and
    WAIT_CDF. Drawn with matplotlib's object API (no pyplot), which keeps no global state
    between runs, and imported only where it draws, so that the other commands of the CLI start
    without loading it."""
    days = result.horizon > 3 * 86400
    scale, unit = (86400, "days") if days else (3600, "hours")
    names: dict[str, str] = {}
    plots: list[PoolPlot] = []
    for pool in result.pools:
        times, nodes, queued = _reduced(pool.series, result.horizon)
        names[pool.name] = f"pool-{pool.name}.png"
        title = f"{result.stack}: pool {pool.name} (max {model.pool(pool.name).max_nodes} nodes)"
        plots.append((title, unit, scale, times, nodes, queued, str(out_dir / names[pool.name])))
    waits: dict[str, list[float]] = defaultdict(list)
    for job in result.jobs:
        if job.first_start is not None:
            waits[job.tier].append((job.first_start - job.submit) / 3600)
    tiers = [
        (f"{tier} ({len(waits[tier])})", sorted(waits[tier])) for tier in sorted(waits, key=lambda t: -model.tiers[t].priority)
    ]
    names[WAIT_CDF] = WAIT_CDF
    title = f"{result.stack}: wait from submission to first start, per tier"
    plotters.start(plots, (title, tiers, str(out_dir / WAIT_CDF)))
    return names


def write_plots(result: Result, model: StackModel, out_dir: Path) -> dict[str, str]:
    """Every plot of the run, drawn before it returns (see start_plots)."""
    with Plotters(plot_count(model)) as plotters:
        names = start_plots(result, model, out_dir, plotters)
        plotters.finish()
    return names

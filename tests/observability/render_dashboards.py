"""Pictures of the shipped dashboards for docs/observability.md, drawn from their own panel
definitions (components.observability.dashboards.BOARDS) over synthetic series.

Regenerate (matplotlib, Agg backend, no display needed):

    PYTHONPATH=$PWD .venv/bin/python tests/observability/render_dashboards.py

Each picture is one board: a grid of its panels, each titled and in its unit as Grafana shows it,
one line per (query, legend) with the legend's labels filled in. The series are synthetic
(seeded, so a rerun draws the same lines), shaped by the panel's unit; they show what each panel
holds, not a measurement. The PNG records a digest of the board's definition (text chunk
`gpu-platform-board`), so tests/observability/test_dashboard_pictures.py can tell a picture drawn
from an older definition.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402

from components.observability.dashboards import BOARDS, Board, Panel  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "docs" / "img" / "dashboards"
DIGEST_KEY = "gpu-platform-board"
COLUMNS = 3
# Two hours of 1-minute samples, the range a dashboard opens on.
MINUTES = 120
# Values each legend label takes in the pictures.
LABEL_VALUES: dict[str, tuple[str, ...]] = {
    "Hostname": ("gpu-node-a", "gpu-node-b"),
    "gpu": ("0",),
    "cluster_queue": ("team-a", "team-b"),
    "flavor": ("h100",),
    "status": ("active",),
    "priority_class": ("production",),
    "preempting_cluster_queue": ("team-a",),
    "reason": ("InClusterQueue",),
    "jobset": ("llm-pretrain",),
    "cause": ("startup", "checkpoint_save", "eval", "data_stall"),
    "label_gpu_platform_io_pool": ("h100",),
    "transport": ("Libfabric",),
    "check": ("enforce",),
}
# (low, high) of a panel's series by Grafana unit.
RANGES: dict[str, tuple[float, float]] = {
    "percent": (20, 95),
    "percentunit": (0.2, 0.9),
    "decmbytes": (20_000, 70_000),
    "watt": (250, 650),
    "celsius": (45, 80),
    "s": (0.3, 1.2),
    "short": (40_000, 60_000),
    "h": (10, 60),
    "currencyUSD": (20, 200),
    "none": (0, 8),
    "Bps": (40e9, 50e9),
    "bool": (1, 1),
}
UNIT_LABELS = {"percentunit": "0-1", "decmbytes": "MB", "currencyUSD": "$", "none": "", "short": ""}


def digest(board: Board) -> str:
    """What the picture was drawn from: the board's title, units, queries and legends."""
    shape = [board.title, [(p.title, p.unit, list(p.queries)) for p in board.panels]]
    return hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:16]


def legends(template: str) -> list[str]:
    """The legend template with each `{{label}}` replaced by the label's sample values."""
    names = re.findall(r"\{\{\s*(\w+)\s*\}\}", template)
    filled = [template]
    for name in names:
        values = LABEL_VALUES.get(name, (name,))
        filled = [re.sub(r"\{\{\s*" + name + r"\s*\}\}", value, text) for text in filled for value in values]
    return filled


def series(seed: str, unit: str, expr: str) -> list[float]:
    """A gauge wandering inside the unit's range; counters and steps only rise, losses fall."""
    low, high = RANGES.get(unit, RANGES["none"])
    rng = random.Random(seed)
    if "floor" in expr:
        # A floor is a setting, under the bandwidth the gate passed.
        return [low * 0.9] * MINUTES
    if "loss" in expr:
        start = rng.uniform(5, 7)
        return [2 + (start - 2) * math.exp(-minute / 50) + rng.gauss(0, 0.05) for minute in range(MINUTES)]
    counter = re.search(r"trainer_(step|max_steps|restarts)\{|_total\b", expr)
    if counter:
        if counter.group(1) == "max_steps":
            return [2000.0] * MINUTES
        rate = rng.uniform(0.5, 1.5) * (10 if counter.group(1) == "step" else 0.02)
        total, values = 0.0, []
        for _ in range(MINUTES):
            total += max(rng.gauss(rate, rate / 3), 0)
            values.append(round(total) if counter.group(1) == "restarts" else total)
        return values
    level = rng.uniform(low, high)
    values = []
    for minute in range(MINUTES):
        level += rng.gauss(0, (high - low) * 0.03)
        level = min(max(level, low), high)
        wave = (high - low) * 0.05 * math.sin(minute / 9 + rng.random())
        values.append(min(max(level + wave, low), high))
    return values


def draw_panel(axes: Axes, board: Board, panel: Panel) -> int:
    """Draws one line per filled legend; returns how many."""
    lines = 0
    for expr, template in panel.queries:
        for legend in legends(template):
            values = series(f"{board.uid}/{expr}/{legend}", panel.unit, expr)
            axes.plot(range(MINUTES), values, label=legend, linewidth=1)
            lines += 1
    axes.set_title(panel.title, fontsize=9, loc="left")
    axes.set_ylabel(UNIT_LABELS.get(panel.unit, panel.unit), fontsize=7)
    axes.tick_params(labelsize=6)
    axes.set_xticks([0, 60, 119], ["-2h", "-1h", "now"])
    axes.grid(alpha=0.3)
    axes.legend(fontsize=5, loc="upper left", frameon=False)
    return lines


def render(board: Board, folder: Path) -> Path:
    rows = math.ceil(len(board.panels) / COLUMNS)
    figure, grid = plt.subplots(rows, COLUMNS, figsize=(12, 2.4 * rows), dpi=72, squeeze=False)
    cells = [axes for row in grid for axes in row]
    for axes, panel in zip(cells, board.panels):
        draw_panel(axes, board, panel)
    for axes in cells[len(board.panels):]:
        axes.set_visible(False)
    figure.suptitle(f"{board.title} ({board.uid}) - synthetic series", fontsize=11)
    figure.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{board.uid}.png"
    # No Software/date chunks: the same definition gives the same file on the same matplotlib.
    figure.savefig(path, metadata={"Software": None, DIGEST_KEY: digest(board)})
    plt.close(figure)
    return path


def main(folder: Path = OUT) -> list[Path]:
    return [render(board, folder) for board in BOARDS]


if __name__ == "__main__":
    for written in main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT):
        print(written.relative_to(REPO) if written.is_relative_to(REPO) else written)

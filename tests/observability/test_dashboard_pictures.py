"""The dashboards' pictures in docs/: one per board, small, drawn from the board's current
definition (render_dashboards.py regenerates them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from PIL import Image
import matplotlib.pyplot as plt
from render_dashboards import DIGEST_KEY, OUT, digest, draw_panel, legends, render

from components.observability.dashboards import BOARDS, JOB_VIEW, Board

MAX_BYTES = 200_000


@pytest.mark.parametrize("board", BOARDS, ids=lambda b: b.uid)
def test_each_board_s_committed_picture_is_small_and_drawn_from_its_current_definition(board: Board) -> None:
    path = OUT / f"{board.uid}.png"
    assert path.stat().st_size < MAX_BYTES
    with Image.open(path) as image:
        assert image.info.get(DIGEST_KEY) == digest(board), (
            "stale picture: PYTHONPATH=$PWD .venv/bin/python tests/observability/render_dashboards.py"
        )


def test_a_changed_query_makes_the_committed_picture_stale() -> None:
    first = JOB_VIEW.panels[0]
    changed = dataclasses.replace(first, queries=(("trainer_step", "{{jobset}}"),))
    assert digest(dataclasses.replace(JOB_VIEW, panels=(changed, *JOB_VIEW.panels[1:]))) != digest(JOB_VIEW)


def test_a_legend_is_drawn_once_per_sample_value_of_each_label() -> None:
    assert legends("{{cluster_queue}} {{flavor}}") == ["team-a h100", "team-b h100"]
    assert len(legends("{{cause}}")) == 4


def test_each_panel_is_drawn_with_its_title_and_a_line_per_query_and_legend() -> None:
    figure, axes = plt.subplots()
    panel = next(p for p in JOB_VIEW.panels if len(p.queries) > 1)
    lines = draw_panel(axes, JOB_VIEW, panel)
    assert axes.get_title(loc="left") == panel.title
    assert lines == len(axes.get_lines()) == sum(len(legends(legend)) for _, legend in panel.queries)
    plt.close(figure)


def test_the_renderer_writes_a_picture_that_records_its_board(tmp_path: Path) -> None:
    with Image.open(render(JOB_VIEW, tmp_path)) as image:
        assert image.info[DIGEST_KEY] == digest(JOB_VIEW)

"""The plot processes (infra.tools.simulate.plots.Plotters): they draw the same files this process
would, with this checkout's code wherever the command runs, report a plot they cannot draw, and
never outlive a run that failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.tools import parallel
from infra.tools.simulate import plots


def some_plots(out: Path) -> tuple[list[plots.PoolPlot], plots.WaitPlot]:
    out.mkdir(parents=True, exist_ok=True)
    pools: list[plots.PoolPlot] = [
        (f"s: pool p{i} (max 4 nodes)", "hours", 3600.0, [0.0, 1800.0, 3600.0], [0, i % 3 + 1, 1], [4, 0, i], str(out / f"pool-p{i}.png"))
        for i in range(plots.PARALLEL_PLOTS)
    ]
    return pools, ("s: waits", [("standard (3)", [0.0, 0.5, 2.0]), ("best-effort (1)", [3.0])], str(out / plots.WAIT_CDF))


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "cores", lambda: 2)


def test_the_plot_processes_draw_the_files_this_process_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, two_cores: None
) -> None:
    with plots.Plotters(plots.PARALLEL_PLOTS - 1) as here:
        assert not here.processes
        here.start(*some_plots(tmp_path / "here"))
        here.finish()
    # A package of the same name in the working directory is not what the processes import.
    decoy = tmp_path / "elsewhere" / "infra"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise ImportError('another checkout')\n")
    monkeypatch.chdir(decoy.parent)
    with plots.Plotters(plots.PARALLEL_PLOTS) as there:
        assert len(there.processes) == 2
        there.start(*some_plots(tmp_path / "there"))
        there.finish()
    names = sorted(p.name for p in (tmp_path / "here").iterdir())
    assert len(names) == plots.PARALLEL_PLOTS + 1
    assert names == sorted(p.name for p in (tmp_path / "there").iterdir())
    for name in names:
        assert (tmp_path / "there" / name).read_bytes() == (tmp_path / "here" / name).read_bytes(), name


def test_a_plot_a_process_cannot_draw_fails_the_run(tmp_path: Path, two_cores: None) -> None:
    pools, waits = some_plots(tmp_path)
    pools[1] = (*pools[1][:6], str(tmp_path / "missing-folder" / "pool-p1.png"))
    with plots.Plotters(plots.PARALLEL_PLOTS) as plotters:
        plotters.start(pools, waits)
        with pytest.raises(RuntimeError, match="drawing the plots failed"):
            plotters.finish()


def test_a_plot_process_that_ends_before_reading_its_plots_is_reported_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, two_cores: None
) -> None:
    monkeypatch.setattr(plots, "_DRAW", "raise SystemExit('no matplotlib here')")
    with plots.Plotters(plots.PARALLEL_PLOTS) as plotters:
        plotters.start(*some_plots(tmp_path))
        with pytest.raises(RuntimeError, match="drawing the plots failed.*no matplotlib here"):
            plotters.finish()


def test_the_plot_processes_end_with_a_run_that_failed(two_cores: None) -> None:
    with pytest.raises(ValueError, match="the engine"):
        with plots.Plotters(plots.PARALLEL_PLOTS) as plotters:
            processes = plotters.processes
            raise ValueError("the engine stopped")
    assert len(processes) == 2 and all(p.returncode is not None for p in processes)

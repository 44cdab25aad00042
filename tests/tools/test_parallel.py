"""infra.tools.parallel: results in the order of the inputs from forked workers, and no fork in
a process that runs threads."""

from __future__ import annotations

import os
import threading

import pytest

from infra.tools import parallel


def pid_and(item: int) -> tuple[int, int]:
    return os.getpid(), item


def test_forked_workers_give_the_results_in_input_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    # pytest-xdist's workers run threads of their own; this test forks regardless.
    monkeypatch.setattr(parallel.threading, "active_count", lambda: 1)
    results = parallel.map_in_order(pid_and, list(range(6)))
    assert [item for _, item in results] == list(range(6))
    assert os.getpid() not in {pid for pid, _ in results}


def test_a_process_running_threads_is_not_forked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert parallel.workers(6) == 1
        assert {pid for pid, _ in parallel.map_in_order(pid_and, [1, 2])} == {os.getpid()}
    finally:
        stop.set()
        thread.join()


def test_a_single_item_runs_in_process() -> None:
    assert parallel.workers(1) == 1

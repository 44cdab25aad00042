"""Independent stacks synthesized side by side, one worker per core.

Workers are forked from the command's process after it imported the program, so the project's
modules and the SDKs' top packages are loaded once; each worker then pays only the lazily loaded
SDK resource modules its stacks use, once for all of its stacks. Results come back in the order
of the inputs, so what a command prints does not depend on which worker finished first.

A process that already runs threads (a test session after earlier synths, for one) is not forked:
fork copies locks that another thread may hold. Such a process, a single item or a single core
runs the work in-process, with the same results.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from typing import Callable, Sequence, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def workers(items: int) -> int:
    """How many processes `map_in_order` uses for `items` inputs: 1 means in-process."""
    if items < 2 or cores() < 2 or threading.active_count() > 1 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return min(items, cores())


def map_in_order(function: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
    """`[function(item) for item in items]`, spread over forked workers where that helps.

    `function` and its results must pickle (a module-level function, plain data). An exception
    it raises is raised here, whichever item's comes first: a caller that must report items
    before a failure in order returns failures as values."""
    count = workers(len(items))
    if count == 1:
        return [function(item) for item in items]
    with multiprocessing.get_context("fork").Pool(count) as pool:
        # chunksize 1: stacks differ a lot in cost, so each worker takes the next one when free.
        return pool.map(function, items, chunksize=1)

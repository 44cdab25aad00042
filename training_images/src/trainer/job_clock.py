"""When the job first started, kept in its checkpoint store so that every later attempt knows.

Goodput's denominator is the job's elapsed time, not the time some process was alive: the
minutes between attempts (a failed pod recreated, a node replaced, a requeue after preemption,
image pulls) are lost to the job too, and no process is there to count them. Rank 0 writes the
first attempt's wall clock next to the step folders (the checkpointer reads only `step_*`
names there); later attempts read it back and export it (trainer.metrics_server).
Inside a process's own time the exporter splits badput by cause (start-up, checkpoint saves,
evaluation, data stalls); this file covers only the time no process saw.
"""

from __future__ import annotations

import json
import time

from trainer.log import log
from trainer.storage import Store

FILE = "job_start.json"


def first_start(store: Store, now: float | None = None) -> float:
    """The Unix time of the job's first attempt; this one's if it is the first (or if the file
    cannot be read, which is then rewritten)."""
    path = store.join(FILE)
    if store.exists(path):
        try:
            return float(json.loads(store.read_text(path))["started_unix"])
        except (ValueError, KeyError, TypeError):
            log(f"{path}: unreadable; the job's start is taken as now", 0)
    started = time.time() if now is None else now
    store.makedirs(store.location)
    store.write_text(path, json.dumps({"started_unix": started}))
    return started

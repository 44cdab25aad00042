"""Rank 0's Prometheus endpoint: progress, throughput, checkpoint times and the trainer's goodput.

Served by prometheus-client on TRAINER_METRICS_PORT (the job renderer sets it and exposes the
port; unset or 0: no endpoint, as in local runs). Other ranks serve nothing: every rank would
report the same global figures. Global rank 0 (GROUP_RANK 0, LOCAL_RANK 0) lands on whichever pod
c10d numbers first, so the platform scrapes every pod of a job and only that one answers
(components.observability.objects.TRAINER_PODS).

Goodput, the trainer's part (docs/observability.md): the share of this process's wall time spent
in training steps that a finished checkpoint has made permanent. Steps after the last checkpoint
count only once the next save finishes; a process that dies before that has lost them, and its
counters say so by never crediting them. Badput the trainer sees is split by cause: start-up
(process start to first step, including the model build, restore and rendezvous), checkpoint
saves, evaluation, and data stalls: host time blocked on the data loader (trainer.train measures
it around each step's batch fetch), which is not credited as step time even once committed.

The fabric gate's result (trainer.fabric), where it ran: the bus bandwidth at the probe's largest
size, the floor, and whether it passed, labelled with the mode and NCCL's transport.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Protocol, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from trainer import job_clock
from trainer.metrics import mfu
from trainer.storage import Store

PORT_ENV = "TRAINER_METRICS_PORT"
# Every series the endpoint publishes; the platform's rules and dashboards may name only these
# (tests/observability checks them). Counters appear with the `_total` suffix.
METRIC_NAMES: frozenset[str] = frozenset(
    {
        "trainer_step",
        "trainer_max_steps",
        "trainer_loss",
        "trainer_eval_loss",
        "trainer_tokens_per_second",
        "trainer_mfu",
        "trainer_step_seconds",
        "trainer_data_wait_seconds",
        "trainer_last_step_timestamp_seconds",
        "trainer_checkpoint_save_seconds",
        "trainer_restarts",
        "trainer_wall_seconds_total",
        "trainer_committed_seconds_total",
        "trainer_badput_seconds_total",
        "trainer_goodput_ratio",
        "trainer_job_start_timestamp_seconds",
        "trainer_fabric_bus_bandwidth_bytes_per_second",
        "trainer_fabric_probe_size_bytes",
        "trainer_fabric_floor_bytes_per_second",
        "trainer_fabric_check_passed",
    }
)
# The fabric gate's series (trainer.fabric): only a run the gate probed has them (multi-node,
# --fabric-check warn or enforce), and the floor only where --fabric-floor-gbps is set. In base
# units (bytes per second), as Prometheus's naming practices ask
# (https://prometheus.io/docs/practices/naming/, "Base units"); the gate's GB/s are 1e9 bytes/s.
FABRIC_NAMES: frozenset[str] = frozenset(name for name in METRIC_NAMES if name.startswith("trainer_fabric_"))
GBPS = 1e9

# The `cause` label values of trainer_badput_seconds_total, each present from the start.
BADPUT_CAUSES: tuple[str, ...] = ("startup", "checkpoint_save", "eval", "data_stall")


class StepShape(Protocol):
    """What the exporter needs from trainer.metrics.Metrics to turn step times into rates."""

    tokens_per_step: int
    flops_per_token: int
    peak_tflops: float | None
    world_size: int
    start_step: int
    max_steps: int
    attempt: int
    started: float
    # trainer.fabric.Report.record() of the gate, None where it did not run.
    fabric: dict[str, object] | None


class Exporter:
    """Keeps the series up to date; `log_step` at each sync step, `saved` after each checkpoint."""

    def __init__(self, shape: StepShape, registry: CollectorRegistry, job_started: float | None = None) -> None:
        self.shape = shape
        self._mark_step = shape.start_step
        self._mark_time = time.perf_counter()
        self._uncommitted = 0.0
        self._wall_counted = shape.started
        self._committed = 0.0
        g = lambda name, doc, labels=(): Gauge(name, doc, labels, registry=registry)  # noqa: E731
        self.step = g("trainer_step", "The last step completed (1-based).")
        g("trainer_max_steps", "The step the run ends at.").set(shape.max_steps)
        self.loss = g("trainer_loss", "Training loss at the last sync step.")
        self.eval_loss = g("trainer_eval_loss", "Loss on the val split at the last evaluation.")
        self.tokens = g("trainer_tokens_per_second", "Tokens per second over the last log interval, all ranks.")
        self.mfu = g("trainer_mfu", "Model flops utilization over the last log interval (0-1).")
        self.step_seconds = g("trainer_step_seconds", "Mean wall time of a step over the last interval.")
        self.data_wait = g(
            "trainer_data_wait_seconds", "Mean time a step waited for the data loader over the last interval."
        )
        self.last_step = g("trainer_last_step_timestamp_seconds", "Unix time of the last sync step.")
        self.save_seconds = g("trainer_checkpoint_save_seconds", "Wall time the last checkpoint save took.")
        g("trainer_restarts", "torchrun restarts of this job so far (TORCHELASTIC_RESTART_COUNT).").set(shape.attempt)
        g(
            "trainer_job_start_timestamp_seconds",
            "Unix time the job's first attempt started (trainer.job_clock); this process's start without a store.",
        ).set(time.time() if job_started is None else job_started)
        self.wall = Counter("trainer_wall_seconds", "Wall time of this process.", registry=registry)
        self.committed = Counter(
            "trainer_committed_seconds", "Step time made permanent by a finished checkpoint.", registry=registry
        )
        self.badput = Counter(
            "trainer_badput_seconds", "Wall time not spent in steps, by cause.", ["cause"], registry=registry
        )
        self.goodput = g("trainer_goodput_ratio", "Committed step time over this process's wall time.")
        for cause in BADPUT_CAUSES:
            self.badput.labels(cause)
        self.step.set(shape.start_step)
        if shape.fabric is not None:
            _fabric_series(shape.fabric, g)

    def _tick(self, now: float) -> None:
        self.wall.inc(now - self._wall_counted)
        self._wall_counted = now
        self.goodput.set(self._committed / max(now - self.shape.started, 1e-9))

    def log_step(
        self, step: int, loss: float, eval_loss: float | None, eval_seconds: float = 0.0, data_wait_seconds: float = 0.0
    ) -> None:
        """`data_wait_seconds`: time blocked on the data loader since the last sync step; part of
        the steps' wall time (tokens/s, step time) but badput, not committed step time."""
        now = time.perf_counter()
        if self._mark_step == self.shape.start_step and step > self._mark_step:
            self.badput.labels("startup").inc(self._mark_time - self.shape.started)
        steps = max(step - self._mark_step, 1)
        step_time = max(now - self._mark_time - eval_seconds, 1e-9)
        stalled = min(max(data_wait_seconds, 0.0), step_time)
        self._uncommitted += step_time - stalled
        self.badput.labels("data_stall").inc(stalled)
        self.data_wait.set(stalled / steps)
        seconds_per_step = step_time / steps
        tokens_per_s = self.shape.tokens_per_step / seconds_per_step
        self._mark_step, self._mark_time = step, now
        self.step.set(step)
        self.loss.set(loss)
        self.tokens.set(tokens_per_s)
        value = mfu(tokens_per_s, self.shape.flops_per_token, self.shape.peak_tflops, self.shape.world_size)
        self.mfu.set(value if value is not None else float("nan"))
        self.step_seconds.set(seconds_per_step)
        self.last_step.set(time.time())
        if eval_loss is not None:
            self.eval_loss.set(eval_loss)
            self.badput.labels("eval").inc(eval_seconds)
        self._tick(now)

    def saved(self, seconds: float) -> None:
        """A checkpoint finished: the steps before it are permanent; its save time is badput."""
        self._committed += self._uncommitted
        self.committed.inc(self._uncommitted)
        self._uncommitted = 0.0
        self.save_seconds.set(seconds)
        self.badput.labels("checkpoint_save").inc(seconds)
        # The save's wall time is not a step's.
        self._mark_time += seconds
        self._tick(time.perf_counter())


def _fabric_series(report: dict[str, object], g: Callable[..., Gauge]) -> None:
    """The gate's verdict, set once: it ran before the first step and does not run again. The
    bandwidth is the largest probe size's, the one the floor is judged at (trainer.fabric.verdict);
    `check` (warn, enforce) and `transport` (NCCL's network names, "none" under gloo) label the
    bandwidth and the verdict. Under enforce a failed gate stops the job before this endpoint
    starts, so `passed` 0 is a warn run training on a fabric it would have refused."""
    labels = {"check": str(report["check"]), "transport": str(report["transport"])}
    g("trainer_fabric_bus_bandwidth_bytes_per_second",
      "All-reduce bus bandwidth of the fabric probe at its largest size (nccl-tests busbw).",
      tuple(labels)).labels(**labels).set(float(cast(float, report["busbw_gbps"])) * GBPS)
    g("trainer_fabric_probe_size_bytes", "Bytes per rank of the probe's largest all-reduce.").set(
        float(cast(int, report["size_bytes"])))
    if report["floor_gbps"] is not None:
        g("trainer_fabric_floor_bytes_per_second", "The bus bandwidth floor the probe was judged against "
          "(--fabric-floor-gbps).").set(float(cast(float, report["floor_gbps"])) * GBPS)
    g("trainer_fabric_check_passed", "1 when the fabric gate passed (fabric transport, bandwidth over "
      "the floor), 0 when it found a problem.", tuple(labels)).labels(**labels).set(1.0 if report["passed"] else 0.0)


class _Off:
    """The exporter of ranks other than 0, and of runs without a port."""

    def log_step(
        self, step: int, loss: float, eval_loss: float | None, eval_seconds: float = 0.0, data_wait_seconds: float = 0.0
    ) -> None:
        pass

    def saved(self, seconds: float) -> None:
        pass


def start(shape: StepShape, is_main: bool, store: Store | None = None) -> Exporter | _Off:
    """Serve on the port TRAINER_METRICS_PORT names, from rank 0 only; `store`: the checkpoint
    store that remembers the job's first start."""
    port = int(os.environ.get(PORT_ENV, "0") or "0")
    if not is_main or port == 0:
        return _Off()
    registry = CollectorRegistry()
    exporter = Exporter(shape, registry, job_clock.first_start(store) if store is not None else None)
    start_http_server(port, registry=registry)
    return exporter

"""How long a job's pods may take to stop: long enough for the trainer's last checkpoint.

On SIGTERM (a drain, a Kueue or priority preemption, a spot notice, a scale-down) the kubelet
signals torchrun, the container's PID 1; torchrun forwards the signal to its workers and waits
`--shutdown-timeout` seconds before it kills them (torch/distributed/run.py, default 30 s); the
kubelet kills whatever is left after `terminationGracePeriodSeconds` (default 30 s). The trainer
finishes its step, agrees on the stop with every rank and writes a final checkpoint, waiting for
an asynchronous save still under way (docs/trainer.md). Both timeouts must cover that, and
torchrun's must end before the kubelet's so torchrun can still reap its workers.
"""

from __future__ import annotations

import math

from trainer.config import PRESETS

# Sustained write throughput to the jobs' /data assumed for one checkpoint, in bytes per second.
# An assumption, not a measurement: EFS in elastic throughput mode and GCS FUSE both sustain
# hundreds of MB/s of large sequential writes from a node (Amazon EFS user guide, "Amazon EFS
# performance"; Cloud Storage FUSE docs, "Performance and best practices"), and other jobs share
# them. Measure your own save times, and set `gpu-platform job --grace-period` when they differ.
CHECKPOINT_WRITE_BYTES_PER_S = 250_000_000
# Reaching the next sync step (ranks agree on a stop only there: within the trainer's
# --log-every steps, docs/trainer.md) and the all-reduce that tells every rank to stop, plus
# start-up costs of the save (opening files, DCP planning). Runs whose --log-every steps take
# longer than this need a longer --grace-period.
STOP_MARGIN_S = 60
# torchrun's shutdown timeout ends this long before the kubelet's kill, so torchrun can still
# reap its workers and exit with their status.
SHUTDOWN_MARGIN_S = 10
# The shortest grace period a job may ask for: torchrun then still waits 10 s for its workers.
MIN_GRACE_PERIOD_S = 2 * SHUTDOWN_MARGIN_S
ROUND_TO_S = 10


def checkpoint_write_s(preset: str) -> int:
    return math.ceil(PRESETS[preset].checkpoint_bytes / CHECKPOINT_WRITE_BYTES_PER_S)


def default_grace_period(preset: str) -> int:
    """terminationGracePeriodSeconds for a run of `preset`, rounded up to 10 s."""
    seconds = checkpoint_write_s(preset) + STOP_MARGIN_S + SHUTDOWN_MARGIN_S
    return math.ceil(seconds / ROUND_TO_S) * ROUND_TO_S


def shutdown_timeout(grace_period: int) -> int:
    """torchrun's --shutdown-timeout inside a grace period of `grace_period` seconds."""
    return grace_period - SHUTDOWN_MARGIN_S

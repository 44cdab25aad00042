"""Distributed checkpoints that a crash can never leave half-valid, on any storage.

Layout under --checkpoint-dir (a folder or an s3:// / gs:// URL, see trainer.storage):
    step_00000010/   torch.distributed.checkpoint shards, .metadata, trainer.json, .complete

A save writes straight into its step's own folder; nothing is ever renamed, because bucket mounts
(GCS FUSE, Mountpoint for S3) cannot rename a folder, or copy it object by object so that a
reader may see `.metadata` before the shards. The commit is the marker instead:
1. rank 0 clears the step folder (an earlier attempt may have left part of it), all ranks meet;
2. every rank writes its shards; DCP's coordinator writes `.metadata` once it has every rank's
   write results (torch/distributed/checkpoint/state_dict_saver.py, `_save_state_dict`);
3. a barrier, so every rank has finished; then rank 0 writes trainer.json and, last,
   `.complete`; a second barrier, so no rank leaves (or is stopped) before the marker exists.
A step folder counts as complete only with both `.complete` and `.metadata` (the rule DCP's own
readers use still holds). Incomplete folders are removed when a run starts, with two exceptions: a
folder with `.metadata` and a readable trainer.json finished every rank's write (trainer.json
comes after the barrier), so rank 0 gives it its marker; and a checkpoint of the trainer before
markers (published by a rename, its trainer.json without the schedule and data identity a
resume now checks) is kept untouched and named in the log, never deleted, but not resumed from.

With --async-checkpoint, periodic saves go through `dcp.async_save`: the state is staged to host
memory (pinned, on a side stream, on GPUs) and written by a background thread while training
goes on; steps 2-3 then run in a thread of their own once the write is done. Training waits
only before the next optimizer step changes what is being staged. Any save first waits for the
one still pending, so at most one is in flight and commits stay in order; the last save of a run
and the save on SIGTERM are synchronous.

DCP stores the model and optimizer by parameter name, not by rank, which is what lets a run
saved by 2 processes (or by FSDP) resume on 1 (or under DDP).
"""

from __future__ import annotations

import json
import math
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.state_dict_saver import AsyncSaveResponse
from torch.optim import Optimizer

from trainer.config import ConfigError
from trainer.log import log
from trainer.optim import Schedule
from trainer.storage import Store

STEP_PREFIX = "step_"
# Save folders of the trainer before the marker existed were published by renaming these.
LEGACY_TMP_PREFIX = ".tmp_"
METADATA_FILE = ".metadata"
STATE_FILE = "trainer.json"
COMPLETE_FILE = ".complete"


@dataclass(frozen=True)
class TrainerState:
    """Everything besides tensors needed to continue, and what a resume must not change
    (trainer.resume): the preset and model shape, the sample length, the data, the schedule."""

    step: int
    consumed_samples: int
    preset: str
    model: dict[str, int]
    seq_len: int
    data: str
    data_meta: dict[str, Any]
    schedule: Schedule
    # torch.amp.GradScaler's state under fp16 (loss scale, growth tracker), so a resume neither
    # restarts the scale search nor skips steps; None in bf16 and fp32.
    grad_scaler: dict[str, Any] | None
    # The global mean training loss of the saved step; None before this field existed. Only a
    # finite step is ever saved, and pruning keeps the newest checkpoint with a finite loss.
    loss: float | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> TrainerState:
        fields = json.loads(text)
        return cls(**{**fields, "schedule": Schedule(**fields["schedule"])})


def step_name(step: int) -> str:
    return f"{STEP_PREFIX}{step:08d}"


def _step_of(name: str) -> int | None:
    suffix = name.removeprefix(STEP_PREFIX)
    return int(suffix) if name.startswith(STEP_PREFIX) and suffix.isdigit() else None


def is_complete(store: Store, folder: str) -> bool:
    return store.exists(f"{folder}/{COMPLETE_FILE}") and store.exists(f"{folder}/{METADATA_FILE}")


def complete_checkpoints(store: Store) -> list[tuple[int, str]]:
    """(step, folder) of every complete checkpoint, oldest first."""
    found = []
    for name in store.names():
        step = _step_of(name)
        if step is not None and is_complete(store, store.join(name)):
            found.append((step, store.join(name)))
    return sorted(found)


def _unmarked_kind(store: Store, folder: str) -> str:
    """`finished` (every rank wrote; only the marker is missing), `legacy` (a checkpoint of the
    trainer before markers) or `stale` (a save that never finished)."""
    if not (store.exists(f"{folder}/{METADATA_FILE}") and store.exists(f"{folder}/{STATE_FILE}")):
        return "stale"
    text = store.read_text(f"{folder}/{STATE_FILE}")
    try:
        fields = json.loads(text)
    except ValueError:
        return "stale"
    if not isinstance(fields, dict) or "step" not in fields:
        return "stale"
    try:
        TrainerState.from_json(text)
    except (TypeError, KeyError):
        return "legacy"
    return "finished"


def remove_incomplete(store: Store) -> list[str]:
    """Remove every step folder without its marker (a save that never finished) and the legacy
    temporary folders; mark finished saves that lack only the marker, and keep an earlier
    trainer's checkpoints. Returns the names removed."""
    stale: list[str] = []
    for name in store.names():
        folder = store.join(name)
        if name.startswith(LEGACY_TMP_PREFIX):
            stale.append(name)
            continue
        if _step_of(name) is None or is_complete(store, folder):
            continue
        kind = _unmarked_kind(store, folder)
        if kind == "finished":
            store.write_text(f"{folder}/{COMPLETE_FILE}", "")
            log(f"checkpoint {name}: every rank had written it; marked complete", 0)
        elif kind == "legacy":
            log(f"checkpoint {name}: written by an earlier trainer version; kept, not resumed from", 0)
        else:
            stale.append(name)
    for name in stale:
        store.remove(store.join(name))
    return stale


def _recorded_loss_finite(store: Store, folder: str) -> bool:
    try:
        loss = read_state(store, folder).loss
    except (OSError, ValueError, TypeError, KeyError):
        return False
    return loss is not None and math.isfinite(loss)


def newest_finite(store: Store) -> str | None:
    """The newest complete checkpoint whose trainer.json records a finite loss."""
    for _, folder in reversed(complete_checkpoints(store)):
        if _recorded_loss_finite(store, folder):
            return folder
    return None


def remove_old(store: Store, keep: int) -> None:
    """Keep the newest `keep` complete checkpoints (all when keep is 0), and in any case the
    newest one whose recorded loss is finite: the one a diverged run can go back to."""
    if keep == 0:
        return
    found = complete_checkpoints(store)
    older = found[:-keep]
    if not older:
        return
    anchor = None if any(_recorded_loss_finite(store, f) for _, f in found[-keep:]) else newest_finite(store)
    for _, folder in older:
        if folder != anchor:
            store.remove(folder)


def resolve(store: Store) -> str:
    """The location itself when it is a complete step folder, or the newest complete one under it."""
    if is_complete(store, store.location):
        return store.location
    found = complete_checkpoints(store)
    if not found:
        raise ConfigError(
            f"--checkpoint-dir {store.location}: no complete checkpoint "
            f"(a {STEP_PREFIX}* folder with {METADATA_FILE} and {COMPLETE_FILE})"
        )
    return found[-1][1]


def read_state(store: Store, folder: str) -> TrainerState:
    return TrainerState.from_json(store.read_text(f"{folder}/{STATE_FILE}"))


class Checkpointer:
    """Saves and restores on every rank; rank 0 alone commits, cleans up and prunes.

    DCP's collectives (planning, gathering write results) and the commit barriers run on a
    process group of their own, on gloo: on CPU, and apart from the training collectives, which a
    background save must never interleave with (torchtitan's checkpointer does the same).
    """

    def __init__(self, store: Store, keep: int, rank: int, device: torch.device, async_saves: bool) -> None:
        self.store = store
        self.keep = keep
        self.rank = rank
        self.is_main = rank == 0
        self.device = device
        group = dist.new_group(backend="gloo")
        assert isinstance(group, dist.ProcessGroup), "this rank is a member of the checkpoint group"
        self.group = group
        self._writer_thread = ThreadPoolExecutor(1, thread_name_prefix="trainer-checkpoint") if async_saves else None
        self._stager: DefaultStager | None = None
        self._staging: Future[None] | None = None
        self._pending: Future[None] | None = None

    def folder(self, step: int) -> str:
        return self.store.join(step_name(step))

    def save(self, model: nn.Module, optimizer: Optimizer, state: TrainerState, background: bool) -> float:
        """Save `state`'s step; in the background when asked and --async-checkpoint is on.
        Returns the seconds this call took: for a synchronous save, its whole duration,
        including the wait for a pending one."""
        started = time.perf_counter()
        self.wait()
        folder = self.folder(state.step)
        if self.is_main:
            self.store.remove(folder)
            self.store.makedirs(folder)
        dist.barrier(group=self.group)
        model_state, optim_state = get_state_dict(model, optimizer)
        state_dict = {"model": model_state, "optim": optim_state}
        writer = self.store.writer(folder)
        if background and self._writer_thread is not None:
            response = dcp.async_save(state_dict, storage_writer=writer, process_group=self.group,
                                      async_stager=self._async_stager())
            if isinstance(response, AsyncSaveResponse):
                self._staging, upload = response.staging_completion, response.upload_completion
            else:
                upload = response
            self._pending = self._writer_thread.submit(self._commit_when_written, upload, folder, state, started)
            return time.perf_counter() - started
        dcp.save(state_dict, storage_writer=writer, process_group=self.group)
        self._commit(folder, state)
        return time.perf_counter() - started

    def _async_stager(self) -> DefaultStager:
        """Created at the first background save, then reused: it keeps its (pinned) host buffers,
        so later saves copy into them instead of allocating and pinning again. Pinned memory,
        a side stream and non-blocking copies need CUDA; on CPU staging is a plain copy."""
        if self._stager is None:
            cuda = self.device.type == "cuda"
            self._stager = DefaultStager(StagingOptions(
                use_pinned_memory=cuda, use_shared_memory=False, use_async_staging=cuda, use_non_blocking_copy=cuda,
            ))
        return self._stager

    def _commit_when_written(self, upload: Future[Any], folder: str, state: TrainerState, started: float) -> None:
        upload.result()
        self._commit(folder, state)
        if self.is_main:
            log(f"saved {folder} in the background in {time.perf_counter() - started:.1f}s", self.rank)

    def _commit(self, folder: str, state: TrainerState) -> None:
        dist.barrier(group=self.group)
        if self.is_main:
            self.store.write_text(f"{folder}/{STATE_FILE}", state.to_json())
            self.store.write_text(f"{folder}/{COMPLETE_FILE}", "")
            remove_old(self.store, self.keep)
        dist.barrier(group=self.group)

    def wait_for_staging(self) -> None:
        """Block until a background save has its copy of the state: called before an optimizer
        step, which changes the parameters and optimizer state in place."""
        if self._staging is not None:
            staging, self._staging = self._staging, None
            staging.result()

    def wait(self) -> None:
        """Block until a background save is written and committed; its error, if any, is raised."""
        self.wait_for_staging()
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def close(self) -> None:
        self.wait()
        if self._writer_thread is not None:
            self._writer_thread.shutdown()
        if self._stager is not None:
            self._stager.close()

    def newest_finite(self) -> str | None:
        return newest_finite(self.store)

    def latest(self) -> tuple[str, TrainerState] | None:
        """The newest complete checkpoint and its state, chosen by rank 0 so all ranks agree;
        rank 0 first removes what earlier attempts left uncommitted."""
        choice: list[str | None] = [None]
        if self.is_main:
            remove_incomplete(self.store)
            found = complete_checkpoints(self.store)
            choice = [found[-1][1] if found else None]
        dist.broadcast_object_list(choice, src=0)
        folder = choice[0]
        return None if folder is None else (folder, read_state(self.store, folder))

    def load(self, folder: str, model: nn.Module, optimizer: Optimizer) -> None:
        model_state, optim_state = get_state_dict(model, optimizer)
        dcp.load({"model": model_state, "optim": optim_state},
                 storage_reader=self.store.reader(folder), process_group=self.group)
        set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optim_state)

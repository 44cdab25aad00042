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
readers use still holds). Incomplete folders are removed when a run starts.

DCP stores the model and optimizer by parameter name, not by rank, which is what lets a run
saved by 2 processes (or by FSDP) resume on 1 (or under DDP).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.optim import Optimizer

from trainer.config import ConfigError
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


def remove_incomplete(store: Store) -> list[str]:
    """Remove every step folder without its marker (a save that never finished) and the legacy
    temporary folders; returns their names."""
    stale = [
        name for name in store.names()
        if name.startswith(LEGACY_TMP_PREFIX)
        or (_step_of(name) is not None and not is_complete(store, store.join(name)))
    ]
    for name in stale:
        store.remove(store.join(name))
    return stale


def remove_old(store: Store, keep: int) -> None:
    """Keep the newest `keep` complete checkpoints (all when keep is 0)."""
    if keep == 0:
        return
    for _, folder in complete_checkpoints(store)[:-keep]:
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
    process group of their own, on gloo: on CPU, and apart from the training collectives.
    """

    def __init__(self, store: Store, keep: int, is_main: bool) -> None:
        self.store = store
        self.keep = keep
        self.is_main = is_main
        self.group = dist.new_group(backend="gloo")

    def folder(self, step: int) -> str:
        return self.store.join(step_name(step))

    def save(self, model: nn.Module, optimizer: Optimizer, state: TrainerState) -> None:
        folder = self.folder(state.step)
        if self.is_main:
            self.store.remove(folder)
            self.store.makedirs(folder)
        dist.barrier(group=self.group)
        model_state, optim_state = get_state_dict(model, optimizer)
        dcp.save({"model": model_state, "optim": optim_state},
                 storage_writer=self.store.writer(folder), process_group=self.group)
        self._commit(folder, state)

    def _commit(self, folder: str, state: TrainerState) -> None:
        dist.barrier(group=self.group)
        if self.is_main:
            self.store.write_text(f"{folder}/{STATE_FILE}", state.to_json())
            self.store.write_text(f"{folder}/{COMPLETE_FILE}", "")
            remove_old(self.store, self.keep)
        dist.barrier(group=self.group)

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

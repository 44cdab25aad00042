"""Distributed checkpoints that a crash can never leave half-valid.

Layout under --checkpoint-dir:
    step_00000010/      a torch.distributed.checkpoint folder plus trainer.json
    .tmp_step_00000020/ a save in progress (ignored, removed by the next save)

Every rank writes its shards into the temporary folder; rank 0 then adds trainer.json and
renames the folder into place. A step folder counts as complete only once its `.metadata`
exists (DCP writes it last), so a reader can trust any `step_*` folder it sees with one.
The checkpoint folder must be shared by all nodes (a bucket mount or network filesystem).

DCP stores the model and optimizer by parameter name, not by rank, which is what lets a run
saved by 2 processes (or by FSDP) resume on 1 (or under DDP).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.optim import Optimizer

from trainer.config import ConfigError, ModelConfig

STEP_PREFIX = "step_"
TMP_PREFIX = ".tmp_"
METADATA_FILE = ".metadata"
STATE_FILE = "trainer.json"


@dataclass(frozen=True)
class TrainerState:
    """Everything besides tensors needed to continue: the LR schedule is a function of step."""

    step: int
    consumed_samples: int
    model: dict[str, int]
    seq_len: int
    data: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


def step_folder(root: Path, step: int) -> Path:
    return root / f"{STEP_PREFIX}{step:08d}"


def complete_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every complete checkpoint, oldest first."""
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        suffix = path.name.removeprefix(STEP_PREFIX)
        if path.name.startswith(STEP_PREFIX) and suffix.isdigit() and (path / METADATA_FILE).is_file():
            found.append((int(suffix), path))
    return sorted(found)


def resolve(path: Path) -> Path:
    """A step folder itself, or the newest complete one under a checkpoint dir."""
    if (path / METADATA_FILE).is_file():
        return path
    found = complete_checkpoints(path)
    if not found:
        raise ConfigError(f"--checkpoint-dir {path}: no complete checkpoint (a step_* folder with {METADATA_FILE})")
    return found[-1][1]


def read_state(folder: Path) -> TrainerState:
    return TrainerState(**json.loads((folder / STATE_FILE).read_text()))


class Checkpointer:
    def __init__(self, root: Path, keep: int, is_main: bool) -> None:
        self.root = root
        self.keep = keep
        self.is_main = is_main

    def save(self, model: nn.Module, optimizer: Optimizer, state: TrainerState) -> None:
        final = step_folder(self.root, state.step)
        if (final / METADATA_FILE).is_file():
            return
        tmp = self.root / f"{TMP_PREFIX}{final.name}"
        if self.is_main:
            self.root.mkdir(parents=True, exist_ok=True)
            for stale in self.root.glob(f"{TMP_PREFIX}*"):
                shutil.rmtree(stale, ignore_errors=True)
            tmp.mkdir()
        dist.barrier()
        model_state, optim_state = get_state_dict(model, optimizer)
        dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=tmp)
        if self.is_main:
            with open(tmp / STATE_FILE, "w") as out:
                out.write(state.to_json())
                out.flush()
                os.fsync(out.fileno())
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            self.remove_old()
        dist.barrier()

    def remove_old(self) -> None:
        """Keep the newest `keep` complete checkpoints (all when keep is 0)."""
        if self.keep == 0:
            return
        for _, folder in complete_checkpoints(self.root)[: -self.keep]:
            shutil.rmtree(folder, ignore_errors=True)

    def load_latest(self, model: nn.Module, optimizer: Optimizer, model_cfg: ModelConfig) -> TrainerState | None:
        """Restore the newest complete checkpoint, chosen by rank 0 so all ranks agree."""
        found = complete_checkpoints(self.root)
        choice: list[str | None] = [str(found[-1][1]) if found else None]
        dist.broadcast_object_list(choice, src=0)
        if choice[0] is None:
            return None
        folder = Path(choice[0])
        state = read_state(folder)
        if state.model != model_cfg.to_dict():
            raise ConfigError(
                f"--checkpoint-dir {self.root}: {folder.name} holds a model of shape {state.model}, "
                f"not the requested preset's {model_cfg.to_dict()}; use a new --checkpoint-dir"
            )
        model_state, optim_state = get_state_dict(model, optimizer)
        dcp.load({"model": model_state, "optim": optim_state}, checkpoint_id=folder)
        set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optim_state)
        return state

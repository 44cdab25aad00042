"""Trains in one process and prints, as JSON, every host read of a tensor value (`.tolist()`,
`float(tensor)`) and every collective on the training process group, by the step during which it
happened (0: before the first step). Run by test_trainer_sync.py; its arguments are train's."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from trainer import parallel, train
from trainer.config import TrainConfig, parse
from trainer.data import TokenFile
from trainer.storage import Store

events: dict[int, list[str]] = defaultdict(list)
step = [0]


def recording(name: str, original: Callable[..., Any], default_group_only: bool) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        if not default_group_only or kwargs.get("group") is None:
            events[step[0]].append(name)
        return original(*args, **kwargs)

    return call


def counting_steps(original: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        step[0] += 1
        return original(*args, **kwargs)

    return call


def main() -> None:
    cfg = parse(sys.argv[1:])
    assert isinstance(cfg, TrainConfig)
    for name in ("all_reduce", "all_gather", "broadcast", "barrier", "reduce_scatter_tensor", "all_gather_into_tensor"):
        setattr(dist, name, recording(name, getattr(dist, name), default_group_only=True))
    torch.Tensor.tolist = recording("tolist", torch.Tensor.tolist, default_group_only=False)  # type: ignore[method-assign]
    torch.Tensor.__float__ = recording("float", torch.Tensor.__float__, default_group_only=False)  # type: ignore[method-assign]
    train.train_step = counting_steps(train.train_step)  # type: ignore[assignment]
    d = parallel.init_distributed(timedelta(seconds=60))
    code = train.train(cfg, d, parallel.FP32, Store(cfg.checkpoint_dir), TokenFile(cfg.data, "train", cfg.seq_len),
                       TokenFile(cfg.data, "val", cfg.seq_len))
    parallel.shutdown(clean=True)
    print(json.dumps({"code": code, "events": events}))


if __name__ == "__main__":
    main()

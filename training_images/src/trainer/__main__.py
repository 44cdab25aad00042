"""Command line entry: `python -m trainer prepare|train|export`, also under torchrun."""

from __future__ import annotations

import gc
import json
import os
import sys
import traceback

from trainer.config import ConfigError, ExportConfig, PrepareConfig, parse


def _dispatch(argv: list[str]) -> int:
    # The modules behind each command are imported once its arguments parse: torch and
    # torch.distributed.checkpoint take about two seconds, which a refused flag need not wait for.
    cfg = parse(argv)
    if isinstance(cfg, PrepareConfig):
        from trainer.data import prepare

        print(json.dumps(prepare(cfg)))
        return 0
    if isinstance(cfg, ExportConfig):
        from trainer.export import export

        print(json.dumps(export(cfg)))
        return 0
    # torch and the trainer import some 250,000 objects the cyclic collector tracks, alive for
    # the whole process: made with the collector off, then frozen out of it, they are not walked
    # again at every collection the training steps trigger (tests/trainer/test_trainer_distributed
    # and test_trainer_cli: 96 s instead of 100 s of CPU).
    gc.disable()
    try:
        from trainer.train import run
    finally:
        gc.freeze()
        gc.enable()
    return run(cfg)


def main() -> None:
    argv = sys.argv[1:]
    try:
        code = _dispatch(argv)
    except ConfigError as error:
        print(f"trainer: error: {error}", file=sys.stderr)
        code = 2
    except Exception:
        traceback.print_exc()
        code = 1
    if argv[:1] == ["train"]:
        # The process group is closed by now (or abandoned after a bounded wait); skipping the
        # interpreter's teardown avoids the gloo destructor deadlock described in parallel.py.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    main()

"""Command line entry: `python -m trainer prepare|train|export`, also under torchrun."""

from __future__ import annotations

import json
import os
import sys
import traceback

from trainer.config import ConfigError, ExportConfig, PrepareConfig, parse
from trainer.data import prepare
from trainer.export import export
from trainer.fabric import EXIT_FABRIC, FabricFailure, record_failure
from trainer.train import run


def _dispatch(argv: list[str]) -> int:
    cfg = parse(argv)
    if isinstance(cfg, PrepareConfig):
        print(json.dumps(prepare(cfg)))
        return 0
    if isinstance(cfg, ExportConfig):
        print(json.dumps(export(cfg)))
        return 0
    return run(cfg)


def main() -> None:
    argv = sys.argv[1:]
    try:
        code = _dispatch(argv)
    except ConfigError as error:
        print(f"trainer: error: {error}", file=sys.stderr)
        code = 2
    except FabricFailure as failure:
        print(f"trainer: error: {failure}", file=sys.stderr)
        record_failure(str(failure))
        code = EXIT_FABRIC
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

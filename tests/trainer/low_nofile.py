"""Runs `python -m trainer ARGS...` with the soft open-file limit lowered to LIMIT first, as a
container with a low nofile ulimit would start a worker. Usage: low_nofile.py LIMIT ARGS..."""

from __future__ import annotations

import resource
import runpy
import sys

limit = int(sys.argv[1])
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
sys.argv = ["trainer", *sys.argv[2:]]
runpy.run_module("trainer", run_name="__main__")

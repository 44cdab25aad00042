"""The trainer's messages for people: one line each on stderr, prefixed with the rank.

Progress lines go to stdout instead (trainer.metrics); stderr carries what happened (resume,
saves, stops), so both can be followed apart in `kubectl logs`.
"""

from __future__ import annotations

import sys


def log(message: str, rank: int) -> None:
    print(f"[trainer rank {rank}] {message}", file=sys.stderr, flush=True)

"""A file system that refuses renames, for every trainer process the tests start.

Python imports `sitecustomize` at start-up from any folder on PYTHONPATH; the harness puts this
folder there and names a root in TRAINER_TEST_REFUSE_RENAMES_UNDER. Below that root, os.rename
and os.replace (which Path.rename and shutil.move use) fail, as they do on Mountpoint for S3 and,
for folders, on GCS FUSE at its default rename-dir-limit of 0. A trainer that renames anything
there cannot save a checkpoint.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import Any

ENV = "TRAINER_TEST_REFUSE_RENAMES_UNDER"


def _refusing(original: Callable[..., None], root: str) -> Callable[..., None]:
    def rename(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        for path in (src, dst):
            if os.path.realpath(os.fspath(path)).startswith(root + os.sep):
                raise OSError(errno.ENOTSUP, "rename refused (simulated bucket mount)", os.fspath(src))
        original(src, dst, *args, **kwargs)

    return rename


if os.environ.get(ENV):
    _root = os.path.realpath(os.environ[ENV])
    os.rename = _refusing(os.rename, _root)
    os.replace = _refusing(os.replace, _root)

"""Input files are regular files: a FIFO, a device or a socket given as a stack file or a trace
would block the reader forever (a FIFO without a writer) or never end (/dev/zero), so it is
refused, naming the kind of file, before anything reads from it."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFile(OSError):
    """A path that is not a regular file; str() says what it is instead."""


def special_kind(mode: int) -> str | None:
    """What a non-regular file is ("a FIFO (named pipe)"), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((word for test, word in _KINDS if test(mode)), "not a regular file")


def read_bytes(path: Path) -> bytes:
    """The bytes of the regular file at `path` (links followed); NotRegularFile otherwise.

    The kind is checked before opening (opening a FIFO for reading blocks until a writer comes)
    and again on the open descriptor, opened non-blocking, in case the path changed in between.
    """
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    kind = special_kind(mode)
    if kind:
        raise NotRegularFile(f"{kind}, not a regular file")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        kind = special_kind(os.fstat(fd).st_mode)
        if kind:
            raise NotRegularFile(f"{kind}, not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)

"""The output of every command that writes (synth, simulate, review --out): written whole or not
at all, and nothing outside it.

The stack name comes from a file name that anyone can choose, so it is checked twice: it must be
a name Pulumi accepts for a stack (stackfile.stack_name_problem), and every path written must
resolve, symlinks followed, to a place under the folder being written.

A run writes everything into a new sibling folder first, then swaps it in with two renames (the
old folder away, the new one in) and deletes the old one. A rename is atomic, so the folder
holds one run's output and only that, whole: a write that fails (a full disk) leaves the
previous output as it was, and runs of the same stack that overlap leave the last one's. A
symlink at `--out/<stack>` is replaced by the new folder, never followed, and no file of an
earlier run survives. A single output file (`review --out`) is written beside itself and
renamed over it the same way.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from infra import stackfile

# Swaps retried when other runs of the same stack keep putting their folder in between the two
# renames; each retry moves their output away and puts this run's in.
SWAP_ATTEMPTS = 50
# Marks the sibling folders of a run in progress. `~` is not allowed in a stack name, so they
# never clash with another stack's folder.
_NEW, _OLD = "~new-", "~old-"


class OutputError(Exception):
    """A write that failed or would land outside the stack's folder; not the input's fault."""


def folder(out_root: Path, stack: str) -> Path:
    """`out_root/stack` on the resolved path; refused for a stack name that would leave `out_root`."""
    problem = stackfile.stack_name_problem(stack)
    if problem:
        raise stackfile.StackFileError(problem)
    root = out_root.resolve()
    target = root / stack
    if target.parent != root:
        raise stackfile.StackFileError(f"stack name {stack!r} would write outside {root}")
    return target


def inside(base: Path, relative: str) -> Path:
    """`base/relative`, refused unless it resolves to a path strictly below `base`."""
    top = base.resolve()
    path = (top / relative).resolve()
    if path == top or not path.is_relative_to(top):
        raise OutputError(f"{top / relative}: outside the output folder {top}")
    return path


def _sibling(target: Path, marker: str) -> Path:
    return target.with_name(f".{target.name}{marker}{secrets.token_hex(8)}")


def write(files: dict[str, str], target: Path) -> None:
    """`files` (relative path -> text) as the whole content of `target`, swapped in at once."""
    with staged(target) as staging:
        for relative, text in sorted(files.items()):
            path = inside(staging, relative)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            except OSError as exc:
                raise OutputError(
                    f"{target / relative}: cannot write: {exc.strerror or exc} ({target} is left as it was)"
                ) from None


@contextmanager
def staged(target: Path) -> Iterator[Path]:
    """A new, empty folder beside `target` for a command to write its files into; swapped in as
    `target` when the block ends, deleted (and `target` left as it was) when it raises."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = _sibling(target, _NEW)
        staging.mkdir()
    except OSError as exc:
        raise OutputError(f"{target.parent}: cannot create a folder: {exc.strerror or exc}") from None
    try:
        try:
            yield staging
        except OSError as exc:
            raise OutputError(f"{target}: cannot write: {exc.strerror or exc} ({target} is left as it was)") from None
        _swap(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def write_file(path: Path, text: str) -> None:
    """`text` as the file `path`, renamed over it whole: a failed write leaves the old file, and a
    symlink at `path` is replaced, not followed. The caller refuses a folder at `path`."""
    folder_of = path.parent.resolve()
    target = folder_of / path.name
    staging = _sibling(target, _NEW)
    try:
        folder_of.mkdir(parents=True, exist_ok=True)
        with staging.open("x", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(staging, target)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {exc.strerror or exc} (left as it was)") from None
    finally:
        staging.unlink(missing_ok=True)


def _swap(staging: Path, target: Path) -> None:
    """Put `staging` where `target` is, moving whatever is there away and deleting it."""
    for _ in range(SWAP_ATTEMPTS):
        retired = _sibling(target, _OLD)
        try:
            target.rename(retired)
        except FileNotFoundError:
            retired = None
        except OSError as exc:
            raise OutputError(f"{target}: cannot replace it: {exc.strerror or exc}") from None
        try:
            staging.rename(target)
            return
        except OSError as exc:
            # Another run put its folder there between the two renames: retire that one too.
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise OutputError(f"{target}: cannot replace it: {exc.strerror or exc}") from None
        finally:
            if retired is not None:
                _remove(retired)
    raise OutputError(f"{target}: other runs kept replacing it; {SWAP_ATTEMPTS} attempts failed")


def _remove(path: Path) -> None:
    """Delete what a swap moved away: a folder, or a file someone had put where the folder goes."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)

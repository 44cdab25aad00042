"""The synth output folder, `--out/<stack>`: where a run may write, and nothing outside it.

The stack name comes from a file name that anyone can choose, so it is checked twice: it must be
a name Pulumi accepts for a stack (stackfile.stack_name_problem), and every path written must
resolve, symlinks followed, to a place under the stack's folder.
"""

from __future__ import annotations

from pathlib import Path

from infra import stackfile


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


def write(files: dict[str, str], target: Path) -> None:
    """`files` (relative path -> text) as the whole content of `target`: anything else there goes."""
    if target.exists():
        for stale in sorted(target.rglob("*"), reverse=True):
            if stale.is_dir() and not stale.is_symlink():
                stale.rmdir()
            else:
                stale.unlink()
    target.mkdir(parents=True, exist_ok=True)
    for relative, text in sorted(files.items()):
        path = inside(target, relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

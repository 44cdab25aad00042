"""Syntheses kept under build/synth-cache, keyed by everything a synthesis reads.

The key is a digest of the tree the program runs from (Pulumi.yaml, components/, infra/,
training_images/: the project name, the program, its facts and catalog, the trainer's build
context), the stack file's path and bytes, what the caller records (its own recipe) and the
interpreter and SDK versions. A change to any of them is a different key, so an entry is
never stale, only unused; the folder can be deleted at any time. `review` uses it to reuse an
unchanged base, and a stack whose key is the same at base and head is not synthesized at all:
it has nothing to compare.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from components.spec.fleet import worker_stack
from infra import stackfile, synth, yamlfile

FOLDER = Path("build") / "synth-cache"
# What the program reads below the project root (infra.program, components, trainer_image).
INPUTS = ("Pulumi.yaml", "components", "infra", "training_images")
_SKIPPED_PARTS = {"__pycache__", ".pytest_cache", "build", "dist"}
_SKIPPED_SUFFIXES = (".pyc", ".egg-info")
# What `synthesis` keeps of a stack: its entries' recipe, so they never mix with review's
# snapshots (another shape, keyed by their script).
SYNTHESIS_RECIPE = "infra.offline.synthesize: project, stack, resources and outputs"
# Distributions whose code shapes a synthesis beside the project's own.
_DISTRIBUTIONS = ("pulumi", "pulumi-aws", "pulumi-gcp", "pulumi-kubernetes", "protobuf", "PyYAML")


def _files(root: Path) -> list[Path]:
    out: list[Path] = []
    for name in INPUTS:
        top = root / name
        if top.is_file():
            out.append(top)
            continue
        for path in top.rglob("*"):
            parts = path.relative_to(root).parts
            if path.is_file() and not _SKIPPED_PARTS & set(parts) and not any(p.endswith(_SKIPPED_SUFFIXES) for p in parts):
                out.append(path)
    return sorted(out)


def tree_digest(root: Path) -> str:
    """sha256 over the path and bytes of every file the program reads below `root`."""
    digest = hashlib.sha256()
    for path in _files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def environment() -> str:
    """The interpreter and the SDK versions, as one line."""
    versions = []
    for name in _DISTRIBUTIONS:
        try:
            versions.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} missing")
    return f"{sys.version} {' '.join(versions)}"


def stack_inputs(root: Path, stack_rel: str) -> list[str]:
    """The stack files a synthesis of `stack_rel` reads, relative to `root`: the file itself,
    and for a fleet manager its workers' files (infra.offline.synthesize_fleet reads the
    checkout's stacks/Pulumi.<stack>.yaml for each `fleet.workers` entry). Where the workers
    list does not read, every stack file there: the key stays right either way, and a review of
    a change to one cluster stack does not synthesize every fleet over it."""
    path = root / stack_rel
    if not stackfile.is_fleet_file(path):
        return [stack_rel]
    workers = _fleet_workers(path)
    read = (
        (root / stackfile.STACKS_DIR).glob("Pulumi.*.yaml")
        if workers is None
        else (stackfile.resolve(w, root) for w in workers)
    )
    return sorted({stack_rel, *(p.relative_to(root).as_posix() for p in read)})


def _fleet_workers(path: Path) -> list[str] | None:
    """The stack part of each `platform.fleet.workers` name (components.spec.fleet.worker_stack),
    or None where the list is not a list of plain stack names."""
    document = yamlfile.load(path)
    platform = document["config"][f"{stackfile.CONFIG_NAMESPACE}:{stackfile.CONFIG_KEY}"]
    fleet = platform.get("fleet")
    workers = fleet.get("workers") if isinstance(fleet, dict) else None
    if not isinstance(workers, list) or not all(isinstance(w, str) for w in workers):
        return None
    stacks = [worker_stack(w) for w in workers]
    return None if any(stackfile.stack_name_problem(s) for s in stacks) else stacks


def key(tree: str, root: Path, stack_rel: str, recipe: str, env: str) -> str:
    """The cache key of the stack file `stack_rel` of the tree at `root` whose digest is `tree`.
    Two trees with the same key synthesize the stack identically."""
    digest = hashlib.sha256()
    for rel in stack_inputs(root, stack_rel):
        # A worker's missing file is an input too: its synthesis fails the same way while it is missing.
        path = root / rel
        digest.update(rel.encode() + b"\0" + (path.read_bytes().hex().encode() if path.is_file() else b"missing") + b"\0")
    for part in (tree, recipe, env):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def get(folder: Path, entry: str) -> dict[str, Any] | None:
    path = folder / f"{entry}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def put(folder: Path, entry: str, value: dict[str, Any]) -> None:
    """Written to a temporary file and renamed, so a reader never sees half an entry; a cache
    that cannot be written (a read-only checkout) is skipped, not an error."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, staging = tempfile.mkstemp(dir=folder, prefix=f".{entry}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(value, handle, sort_keys=True)
        os.replace(staging, folder / f"{entry}.json")
    except OSError:
        return


def synthesis(ref: str) -> tuple[stackfile.StackFile, synth.Synthesis]:
    """The synthesis of the stack file `ref` (infra.offline.synthesize), read from the cache of
    the checkout it belongs to when the same code synthesized the same stack file before, else
    made and kept there. Only a synthesis that succeeded is kept, so a stack that fails fails the
    same way every time. `simulate` runs through here: a planner replays trace after trace
    against one stack, and the synthesis (SDK imports included) is most of a run's start.
    Outside a checkout, or for a stack file that lies outside it (a symlink), nothing is kept.
    A fleet manager's revealed_outputs (its reading of its workers) is not kept either: this is
    for cluster stacks."""
    from infra import offline

    root = stackfile.root_for(ref)
    stack_file = stackfile.read(ref, root)
    try:
        rel = stack_file.path.resolve().relative_to(root.resolve()).as_posix() if root is not None else None
    except ValueError:
        rel = None
    if root is None or rel is None:
        _, _, made = offline.synthesize(ref, root)
        return stack_file, made
    folder = root / FOLDER
    entry = key(tree_digest(root), root, rel, SYNTHESIS_RECIPE, environment())
    cached = get(folder, entry)
    if cached is not None and {"project", "stack", "resources", "outputs"} <= cached.keys():
        return stack_file, synth.Synthesis(cached["project"], cached["stack"], cached["resources"], cached["outputs"])
    stack_file, _, made = offline.synthesize(ref, root)
    put(folder, entry, {"project": made.project, "stack": made.stack, "resources": made.resources, "outputs": made.outputs})
    return stack_file, made

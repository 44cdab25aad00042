"""`gpu-platform review --base REF`: what a pull request changes, as a Markdown comment.

Both trees are synthesized offline: the base ref in a temporary `git worktree`, the working tree
where it is. Each runs in its own Python process with its own code first on sys.path, so the base
is synthesized by the base's program and the head by the head's, and neither sees the other's
modules or Pulumi runtime state. The report then compares them per stack: resources added,
removed and changed (property by property), changes that make the provider replace a resource,
GPU capacity and $/hour at maximum scale, the policy results of the working tree, and a Mermaid
diagram of the stack's components. Everything is sorted, so identical inputs give identical text.

The synthesis runs against mocked cloud outputs (infra.mock_outputs): what a cloud computes
(IDs, ARNs, endpoints) are placeholders, so a change that only a real `pulumi preview` can see
(drift, provider-side defaults) shows there, not here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import yaml

from infra import offline, stackfile
from infra.tools import parallel, synth_cache
from infra.tools.review.diff import StackReview, review_stack
from infra.tools.review.markdown import render

# Runs in the tree under review, with that tree's code first on sys.path. It uses only APIs the
# spine has had from the start (components.pools, components.spec.SpecError, and the synthesis of
# a stack file: infra.offline.synthesize, infra.cli.synthesize before the house moved it), so a
# base ref from before `review` existed still synthesizes.
_SNAPSHOT = r"""
import gc, json, sys
from pathlib import Path
# The process lives for its few stacks, and what the SDK imports (over half a million objects)
# stays alive to its end. The collector's passes over them, off for the whole process: 2.3 s of
# the 6.3 s of CPU the seven checked-in stacks cost in one process with a synth.run that does
# not pause it (a base from before infra.collector), 0.5 s of 4.4 s with one that does (the
# imports and whatever runs between syntheses), for some 30 MB of cycles left to the exit.
gc.disable()
root = Path(sys.argv[1]).resolve()
sys.path.insert(0, str(root))
from components.pools import derive_pools
from components.spec import SpecError
import yaml
try:
    from infra.offline import synthesize
except ImportError:
    from infra.cli import synthesize
try:
    from infra.offline import synthesize_fleet
except ImportError:
    synthesize_fleet = None
import inspect
# Syntheses by resolved stack file path, for a fleet manager's workers (synthesize_fleet's
# `known`, which a base from before it existed does not take: there it synthesizes them again).
known = {} if synthesize_fleet is not None and "known" in inspect.signature(synthesize_fleet).parameters else None


def is_fleet(path):
    try:
        return yaml.safe_load(path.read_text())["config"]["gpu-platform:platform"]["cloud"] == "fleet"
    except Exception:
        return False

out = {}
rels = [rel for rel in json.loads(sys.argv[2]) if (root / rel).is_file()]
fleets = {rel for rel in rels if synthesize_fleet is not None and is_fleet(root / rel)}
# Managers last, so that each finds its workers this process synthesized in `known`.
for rel in [rel for rel in rels if rel not in fleets] + [rel for rel in rels if rel in fleets]:
    path = root / rel
    stack = path.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
    try:
        if rel in fleets:
            # A fleet manager: its workers synthesized in-process (or found in `known`), then
            # the manager over them.
            fleet = synthesize_fleet(str(path), root) if known is None else synthesize_fleet(str(path), root, known=known)
            stack_file, spec, synthesis = fleet.stack_file, None, fleet.synthesis
            from infra.stackfile import read as read_stack_file
            from components.spec.fleet import worker_stack
            workers = {
                w: {"config": read_stack_file(worker_stack(w), root).config, "resources": r.resources, "outputs": r.outputs}
                for w, (_, r) in fleet.workers.items()
            }
        else:
            stack_file, spec, synthesis = synthesize(str(path), root)
            workers = None
            if known is not None:
                known[path.resolve()] = (spec, synthesis)
    except SpecError as exc:
        out[stack] = {"error": exc.render()}
        continue
    except Exception as exc:
        # Stack file and YAML errors (StackFileError, YamlError) are the input's own lines.
        input_error = type(exc).__name__ in ("StackFileError", "YamlError")
        out[stack] = {"error": str(exc) if input_error else f"synth failed: {type(exc).__name__}: {exc}"}
        continue
    out[stack] = {
        "project": synthesis.project,
        "config": stack_file.config,
        "resources": synthesis.resources,
        "outputs": synthesis.outputs,
        "pools": [
            {
                "name": p.name,
                "gpu": p.gpu.name,
                "instanceType": p.instance_type.name if p.instance_type else None,
                "gpusPerNode": p.gpus_per_node,
                "minNodes": p.min_nodes,
                "maxNodes": p.max_nodes,
                # Pools named it `capacity` before `provisioning` existed.
                "capacity": getattr(p, "provisioning", None) or getattr(p, "capacity", None),
                "sharing": p.sharing_mode if p.sharing_mode == "none" else f"{p.sharing_mode} x{p.slots_per_gpu}",
                "usdPerNodeHour": p.usd_per_node_hour,
            }
            for p in (derive_pools(spec) if spec is not None else [])
        ],
    }
    if workers is not None:
        # What `review --trace` simulates the fleet on (infra.tools.simulate.impact).
        out[stack]["workers"] = workers
Path(sys.argv[3]).write_text(json.dumps(out, sort_keys=True))
# The exit's collection (which runs with the collector disabled too) would walk every SDK module
# and resource object for about a second; frozen, they are not walked (as `gpu-platform synth`
# does at its end).
gc.freeze()
"""


class ReviewError(Exception):
    """A review that cannot run: not a git repository, a tree that fails to load."""


class UsageError(ReviewError):
    """A review asked of something that is not there (a ref, a stack, a repository): exit 2."""


# --- the two trees ------------------------------------------------------------------------


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise ReviewError(f"git {' '.join(args)}: {done.stderr.strip() or 'failed'}")
    return done.stdout.strip()


def resolve_commit(repo: Path, ref: str) -> str:
    try:
        return _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except ReviewError:
        raise UsageError(f"--base {ref}: not a commit of this repository") from None


@contextmanager
def base_worktree(repo: Path, sha: str) -> Iterator[Path]:
    """A detached worktree of commit `sha` in a temporary folder, removed afterwards whatever happens."""
    with tempfile.TemporaryDirectory(prefix="gpu-platform-review-") as tmp:
        tree = Path(tmp) / "base"
        _git(repo, "worktree", "add", "--detach", "--quiet", str(tree), sha)
        try:
            yield tree
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=repo, capture_output=True)
            subprocess.run(["git", "worktree", "prune"], cwd=repo, capture_output=True)


def _run_snapshots(jobs: list[tuple[str, Path, list[str]]]) -> list[dict[str, Any]]:
    """Run the snapshot script once per job (a label, a tree and its stack files), side by side."""
    with tempfile.TemporaryDirectory(prefix="gpu-platform-snapshot-") as tmp:
        running: list[tuple[str, subprocess.Popen[str], Path]] = []
        for number, (label, tree, rels) in enumerate(jobs):
            out = Path(tmp) / f"{number}.json"
            env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
            proc = subprocess.Popen(
                [sys.executable, "-c", _SNAPSHOT, str(tree), json.dumps(rels), str(out)],
                cwd=tree,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            running.append((label, proc, out))
        results: list[dict[str, Any]] = []
        for label, proc, out in running:
            _, stderr = proc.communicate()
            if proc.returncode != 0 or not out.is_file():
                tail = "\n".join(stderr.strip().splitlines()[-5:])
                raise ReviewError(f"synthesizing the {label} tree failed:\n{tail}")
            results.append(json.loads(out.read_text()))
        return results


def _cloud(path: Path) -> str:
    """The cloud a stack file names, to keep one cloud's stacks in one process; the file's name
    where it does not read (its process reports the problem)."""
    try:
        return str(yaml.safe_load(path.read_text())["config"]["gpu-platform:platform"]["cloud"])
    except Exception:  # noqa: BLE001 - only where to run it
        return path.name


def _split(misses: dict[str, list[str]], trees: dict[str, Path], cores: int) -> list[tuple[str, list[str]]]:
    """The stack files to synthesize per tree, cut into one list per process: at least one
    process per tree, more for the trees with the most stacks while cores are left. A process
    takes whole clouds, so it loads each cloud SDK's modules at most once; a fleet manager goes
    to the process with the most of its workers, whose syntheses it reuses (the snapshot script's
    `known`) where another process would synthesize them again."""
    groups: dict[str, list[list[str]]] = {}
    managers: dict[str, list[str]] = {}
    for label, rels in misses.items():
        by_cloud: dict[str, list[str]] = {}
        for rel in rels:
            by_cloud.setdefault(_cloud(trees[label] / rel), []).append(rel)
        # Managers alone are a group of their own: there is no worker to join.
        managers[label] = by_cloud.pop("fleet", []) if len(by_cloud) > 1 else []
        if rels:
            groups[label] = sorted(by_cloud.values(), key=len, reverse=True)
    shares = {label: 1 for label in groups}
    while sum(shares.values()) < cores:
        open_trees = [label for label in groups if shares[label] < len(groups[label])]
        if not open_trees:
            break
        label = max(open_trees, key=lambda name: len(misses[name]) / shares[name])
        shares[label] += 1
    out: list[tuple[str, list[str]]] = []
    for label, share in shares.items():
        bins: list[list[str]] = [[] for _ in range(share)]
        for group in groups[label]:
            min(bins, key=len).extend(group)
        for rel in managers[label]:
            workers = set(synth_cache.stack_inputs(trees[label], rel))
            max(bins, key=lambda part: (len(workers.intersection(part)), -len(part))).append(rel)
        out += [(label, sorted(part)) for part in bins]
    return out


def stack_keys(trees: dict[str, Path], rels: list[str]) -> dict[str, dict[str, str]]:
    """The synthesis cache key (infra.tools.synth_cache) of each stack file present in each tree."""
    env = synth_cache.environment()
    keys: dict[str, dict[str, str]] = {}
    for label, tree in trees.items():
        digest = synth_cache.tree_digest(tree)
        keys[label] = {rel: synth_cache.key(digest, tree, rel, _SNAPSHOT, env) for rel in rels if (tree / rel).is_file()}
    return keys


def _reads(root: Path, rel: str) -> bool:
    """Whether the stack file and its spec read, as a synthesis checks them before the program
    runs."""
    try:
        stack_file = stackfile.read(str(root / rel), root)
        if stack_file.is_fleet:
            stack_file.fleet_spec()
        else:
            offline.checked(str(root / rel), root)
    except Exception:  # noqa: BLE001 - any problem: synthesize it, and its process reports it
        return False
    return True


def unchanged(base: Path, head: Path, rels: list[str]) -> list[str]:
    """The stack files with the same synthesis key in both trees, whose spec reads: the same
    code on the same stack files synthesizes the same resources, so they have no diff and need
    no synthesis. A stack invalid in both trees is left to synthesize, so that the report shows
    its errors."""
    keys = stack_keys({"base": base, "head": head}, rels)
    return [rel for rel in rels if rel in keys["head"] and keys["base"].get(rel) == keys["head"][rel] and _reads(head, rel)]


def snapshots(
    trees: dict[str, Path], rels: list[str], cache: Path | None = None
) -> dict[str, dict[str, Any]]:
    """Synthesize `rels` (stack files relative to each tree) in every tree, side by side.

    With a `cache` folder (infra.synth_cache), a stack whose code and stack file were
    synthesized before is read from there, and a stack the same in several trees is synthesized
    once. Only syntheses that succeeded are kept: an error names the stack file's path, which
    differs between trees."""
    keys = stack_keys(trees, rels) if cache else {label: {} for label in trees}
    found: dict[str, dict[str, Any]] = {}
    misses: dict[str, list[str]] = {label: [] for label in trees}
    first: dict[str, tuple[str, str]] = {}
    for label, tree in trees.items():
        for rel in rels:
            entry = keys[label].get(rel)
            if entry is None:
                misses[label].append(rel)
                continue
            if entry in found or entry in first:
                continue
            cached = synth_cache.get(cache, entry) if cache else None
            if cached is not None:
                found[entry] = cached
            else:
                first[entry] = (label, rel)
                misses[label].append(rel)
    jobs = [(label, trees[label], part) for label, part in _split(misses, trees, parallel.cores())]
    computed: dict[str, dict[str, Any]] = {label: {} for label in trees}
    for (label, _, _), result in zip(jobs, _run_snapshots(jobs), strict=True):
        computed[label].update(result)
    for label in trees:
        for rel in misses[label]:
            entry = keys[label].get(rel)
            value = computed[label].get(_stack_of(rel))
            if cache and entry is not None and value is not None and "error" not in value:
                synth_cache.put(cache, entry, value)
                found[entry] = value
    # A stack the same in two trees but invalid: each tree's own error, with its own path.
    again: dict[str, list[str]] = {label: [] for label in trees}
    for label in trees:
        for rel in rels:
            entry = keys[label].get(rel)
            if entry is not None and entry not in found and first.get(entry, (label, rel))[0] != label:
                again[label].append(rel)
    jobs = [(label, trees[label], part) for label, part in _split(again, trees, parallel.cores())]
    for (label, _, _), result in zip(jobs, _run_snapshots(jobs), strict=True):
        computed[label].update(result)
    results: dict[str, dict[str, Any]] = {}
    for label, tree in trees.items():
        results[label] = {}
        for rel in rels:
            entry = keys[label].get(rel)
            value = found.get(entry) if entry is not None else None
            if value is None:
                value = computed[label].get(_stack_of(rel))
            if value is not None:
                results[label][_stack_of(rel)] = value
    return results


def _stack_of(rel: str) -> str:
    """The stack a stack file names, as the snapshot script derives it."""
    return Path(rel).name.removeprefix("Pulumi.").rsplit(".", 1)[0]


def stack_paths(refs: list[str], root: Path, trees: list[Path]) -> list[str]:
    """Stack files to review, relative to the project root: the ones named, or every stack file
    of either tree."""
    if not refs:
        found = {
            str(p.relative_to(tree))
            for tree in trees
            for p in (tree / stackfile.STACKS_DIR).glob("Pulumi.*.yaml")
        }
        return sorted(found)
    out = []
    for ref in refs:
        path = stackfile.resolve(ref, root).resolve()
        stackfile.stack_name(path)
        try:
            rel = str(path.relative_to(root))
        except ValueError:
            raise UsageError(f"{ref}: not a stack file of this repository ({root})") from None
        if not any((tree / rel).is_file() for tree in trees):
            raise UsageError(f"{ref}: no stack file {rel} in the working tree or at the base")
        out.append(rel)
    return sorted(set(out))


def collect(
    base_ref: str, refs: list[str], cwd: Path | None = None, skip_unchanged: bool = True
) -> tuple[list[StackReview], str]:
    """The review of each stack of the repository at `cwd` against `base_ref`, and the base's
    commit.

    With `skip_unchanged`, a stack whose synthesis key is the same at the base and in the
    working tree (`unchanged`) is not synthesized: its review is "unchanged" with no snapshot
    and no policy findings (a caller that needs every stack's snapshot, the capacity impact of
    a trace, passes False). Its policy is what `gpu-platform check` reports on the base and
    the working tree alike; so a stack that the base already committed with mandatory
    violations, or whose synthesis fails in both trees past its spec, shows as "no changes"."""
    root = stackfile.project_root(cwd)
    try:
        top = Path(_git(root, "rev-parse", "--show-toplevel")).resolve()
    except ReviewError:
        raise UsageError(f"{root}: not in a git repository; review compares git commits") from None
    inner = root.relative_to(top)
    sha = resolve_commit(top, base_ref)
    with base_worktree(top, sha) as base_top:
        base_root = base_top / inner
        rels = stack_paths(refs, root, [base_root, root])
        same = unchanged(base_root, root, rels) if skip_unchanged else []
        rest = [rel for rel in rels if rel not in same]
        snaps = snapshots({"base": base_root, "working": root}, rest, root / synth_cache.FOLDER)
    names = sorted(set(snaps["base"]) | set(snaps["working"]))
    # The policy rules of each stack (review_stack) run side by side, the costliest first: the
    # workers take the stacks in the order given, and the one that starts last sets the end.
    items = sorted(((s, snaps["base"].get(s), snaps["working"].get(s)) for s in names), key=_policy_cost, reverse=True)
    reviews = dict(zip((item[0] for item in items), parallel.map_in_order(_review, items)))
    reviews |= {_stack_of(rel): StackReview(_stack_of(rel), "unchanged", None, None) for rel in same}
    return [reviews[s] for s in sorted(reviews)], sha


def _review(item: tuple[str, dict[str, Any] | None, dict[str, Any] | None]) -> StackReview:
    return review_stack(*item)


def _policy_cost(item: tuple[str, dict[str, Any] | None, dict[str, Any] | None]) -> tuple[int, int]:
    """How long the policy rules take on the working tree's snapshot, as an order: first its
    ValidatingAdmissionPolicies, which components.checks.pod_security_admission evaluates
    (cel-python) against planted attack pods (prod-gcp's rules take 0.85 s, where every other
    checked-in stack's take 0.05 to 0.13 s), then its resources."""
    # Imported here: the policy rules import it anyway, and a review with nothing to compare
    # does not wait for it (0.4 s).
    from components.checks import pod_security_admission

    head = item[2] or {}
    resources = head.get("resources") or []
    return sum(1 for r in resources if r.get("type") == pod_security_admission.POLICY), len(resources)


def run(base_ref: str, refs: list[str], cwd: Path | None = None) -> str:
    """The Markdown review of the working tree of the repository at `cwd` against `base_ref`."""
    reviews, sha = collect(base_ref, refs, cwd)
    return render(reviews, base_ref, sha)

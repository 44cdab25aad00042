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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from components.checks import rules
from components.facts import catalog
from components.facts.rule_catalog import RULES
from components.spec import CONFIG_KEY, CONFIG_NAMESPACE, SpecError, parse_spec
from infra import stackfile, synth
from infra.tools import check

# Input properties whose change makes the provider replace the resource rather than update it,
# by type token (engine camelCase paths; a path covers everything below it). Sources: the
# ForceNew fields of the upstream Terraform providers these Pulumi providers bridge
# (hashicorp/terraform-provider-aws internal/service/eks/node_group.go and cluster.go,
# terraform-provider-google container node_config.go and resource_container_cluster.go), and
# the Kubernetes API's immutable fields (PriorityClass value and preemptionPolicy, a Job's
# pod template and selector), which pulumi-kubernetes applies as a replacement. Where a newer
# provider updates a GKE node_config field in place, GKE still recreates every node of the
# pool, which is what the warning is for.
FORCES_REPLACEMENT: dict[str, tuple[str, ...]] = {
    rules.EKS_NODE_GROUP: (
        "amiType",
        "capacityType",
        "clusterName",
        "diskSize",
        "instanceTypes",
        "launchTemplate.id",
        "launchTemplate.name",
        "nodeGroupName",
        "nodeGroupNamePrefix",
        "nodeRoleArn",
        "remoteAccess",
        "subnetIds",
    ),
    rules.EKS_CLUSTER: (
        "name",
        "roleArn",
        "accessConfig.bootstrapClusterCreatorAdminPermissions",
        "bootstrapSelfManagedAddons",
        "kubernetesNetworkConfig.ipFamily",
        "kubernetesNetworkConfig.serviceIpv4Cidr",
        "outpostConfig",
        "remoteNetworkConfig",
    ),
    rules.GKE_NODE_POOL: (
        "name",
        "cluster",
        "location",
        "project",
        "nodeConfig.machineType",
        "nodeConfig.guestAccelerators",
        "nodeConfig.spot",
        "nodeConfig.preemptible",
        "nodeConfig.diskSizeGb",
        "nodeConfig.diskType",
        "nodeConfig.localSsdCount",
        "nodeConfig.serviceAccount",
        "nodeConfig.oauthScopes",
        "nodeConfig.reservationAffinity",
        "nodeConfig.bootDiskKmsKey",
        "initialNodeCount",
    ),
    rules.GKE_CLUSTER: (
        "name",
        "location",
        "project",
        "network",
        "subnetwork",
        "ipAllocationPolicy",
        "networkingMode",
        "enableAutopilot",
        "clusterIpv4Cidr",
        "defaultMaxPodsPerNode",
        "privateClusterConfig.masterIpv4CidrBlock",
        "initialNodeCount",
        "enableKubernetesAlpha",
    ),
    rules.LAUNCH_TEMPLATE: ("name", "namePrefix"),
    rules.S3_BUCKET: ("bucket", "bucketPrefix", "objectLockEnabled"),
    rules.GCS_BUCKET: ("name", "location", "project"),
    rules.PRIORITY_CLASS: ("value", "preemptionPolicy"),
    "kubernetes:batch/v1:Job": ("spec.template", "spec.selector"),
}
# Every Kubernetes object is replaced when its name or namespace changes.
KUBERNETES_IDENTITY = ("metadata.name", "metadata.namespace")

# Spec fields of a pool whose change replaces the pool's node group (EKS) or node pool (GKE):
# instance type and capacity type are ForceNew on both; on GKE the sharing mode lives in the
# guest accelerator config, and flex-start, queued provisioning and the reservation affinity in
# the node config, all ForceNew too.
POOL_REPLACING_FIELDS: dict[str, tuple[str, ...]] = {
    "aws": ("instanceType", "gpusPerNode", "capacity", "provisioning"),
    "gcp": ("instanceType", "gpusPerNode", "capacity", "provisioning", "reservation", "sharing"),
    "existing": (),
}

# The resources that hold a pool's nodes: a replaced pool is one of these replaced.
POOL_RESOURCE_TYPES = (rules.EKS_NODE_GROUP, rules.GKE_NODE_POOL)

# Runs in the tree under review, with that tree's code first on sys.path. It uses only APIs the
# spine has had from the start (infra.cli.synthesize, infra.stackfile, components.pools), so a
# base ref from before `review` existed still synthesizes.
_SNAPSHOT = r"""
import json, sys
from pathlib import Path
root = Path(sys.argv[1]).resolve()
sys.path.insert(0, str(root))
from components.pools import derive_pools
from components.spec import SpecError
from infra import cli, stackfile

out = {}
for rel in json.loads(sys.argv[2]):
    path = root / rel
    if not path.is_file():
        continue
    stack = path.name.removeprefix("Pulumi.").rsplit(".", 1)[0]
    try:
        stack_file, spec, synthesis = cli.synthesize(str(path), root)
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
            for p in derive_pools(spec)
        ],
    }
Path(sys.argv[3]).write_text(json.dumps(out, sort_keys=True))
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


def snapshots(trees: dict[str, Path], rels: list[str]) -> dict[str, dict[str, Any]]:
    """Synthesize `rels` (stack files relative to each tree) in every tree, side by side."""
    with tempfile.TemporaryDirectory(prefix="gpu-platform-snapshot-") as tmp:
        running: dict[str, tuple[subprocess.Popen[str], Path]] = {}
        for label, tree in trees.items():
            out = Path(tmp) / f"{label}.json"
            env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
            proc = subprocess.Popen(
                [sys.executable, "-c", _SNAPSHOT, str(tree), json.dumps(rels), str(out)],
                cwd=tree,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            running[label] = (proc, out)
        results: dict[str, dict[str, Any]] = {}
        for label, (proc, out) in running.items():
            _, stderr = proc.communicate()
            if proc.returncode != 0 or not out.is_file():
                tail = "\n".join(stderr.strip().splitlines()[-5:])
                raise ReviewError(f"synthesizing the {label} tree failed:\n{tail}")
            results[label] = json.loads(out.read_text())
        return results


# --- diffs --------------------------------------------------------------------------------

_ABSENT = object()


@dataclass(frozen=True)
class Change:
    path: str
    before: Any
    after: Any


def diff_values(before: Any, after: Any, path: str = "") -> list[Change]:
    """The differences between two JSON values as changes at paths like `a.b[0].c`.

    A subtree present on one side only is one change, not one per leaf. Lists of mappings that
    each carry a distinct `name` (pools, containers) are matched by name (`nodePools[name=a]`),
    so inserting an item does not show every later item as changed.
    """
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[Change] = []
        for key in sorted(set(before) | set(after)):
            out += diff_values(before.get(key, _ABSENT), after.get(key, _ABSENT), f"{path}.{key}" if path else str(key))
        return out
    if isinstance(before, list) and isinstance(after, list):
        old, new = _list_keys(before), _list_keys(after)
        if old is not None and new is not None:
            out = []
            for key in sorted(set(old) | set(new)):
                out += diff_values(old.get(key, _ABSENT), new.get(key, _ABSENT), f"{path}[{key}]")
            return out
        out = []
        for i in range(max(len(before), len(after))):
            item_before = before[i] if i < len(before) else _ABSENT
            item_after = after[i] if i < len(after) else _ABSENT
            out += diff_values(item_before, item_after, f"{path}[{i}]")
        return out
    return [] if before == after else [Change(path, before, after)]


def _list_keys(items: list[Any]) -> dict[str, Any] | None:
    """`name=<name>` keys of a list of named mappings, or None when the list is not one."""
    names = [item.get("name") if isinstance(item, dict) else None for item in items]
    if not items or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        return None
    return {f"name={n}": item for n, item in zip(names, items)}


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((f"{prefix}.", f"{prefix}["))


def _touches(path: str, prefix: str) -> bool:
    """Whether a change at `path` changes `prefix`: it lies below it, or encloses it (a whole
    block added or removed)."""
    return prefix == "*" or _under(path, prefix) or _under(prefix, path)


def replacing_paths(type_token: str, changes: list[Change], replace_on_changes: list[str]) -> list[str]:
    """The changed paths that make Pulumi replace the resource instead of updating it."""
    prefixes = [*FORCES_REPLACEMENT.get(type_token, ()), *replace_on_changes]
    if type_token.startswith("kubernetes:"):
        prefixes += KUBERNETES_IDENTITY
    out = []
    for change in changes:
        if change.path == "@parent" or any(_touches(change.path, p) for p in prefixes):
            out.append(change.path)
    return out


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A resource as the diff sees it: its inputs, plus parent, provider and options under `@`
    (a parent change moves the URN, which Pulumi treats as delete and create)."""
    return {
        **record["inputs"],
        "@parent": record["parent"],
        "@provider": record["provider"],
        "@options": record["options"],
    }


@dataclass(frozen=True)
class ResourceChange:
    key: str
    changes: list[Change]
    replacing: list[str]


@dataclass(frozen=True)
class PoolChange:
    name: str
    status: str  # added | removed | changed
    changes: list[Change]
    replacing: list[str]


def _by_key(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{r['type']}::{r['name']}": r for r in records}


def diff_resources(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> tuple[list[str], list[str], list[ResourceChange]]:
    """(added, removed, changed) resources by `type::name`, each sorted."""
    old, new = _by_key(before), _by_key(after)
    changed = []
    for key in sorted(set(old) & set(new)):
        changes = diff_values(_comparable(old[key]), _comparable(new[key]))
        if changes:
            replace_on = list(new[key]["options"].get("replaceOnChanges", []))
            changed.append(ResourceChange(key, changes, replacing_paths(new[key]["type"], changes, replace_on)))
    return sorted(set(new) - set(old)), sorted(set(old) - set(new)), changed


def diff_pools(before: list[dict[str, Any]], after: list[dict[str, Any]], cloud: str) -> list[PoolChange]:
    old = {p["name"]: p for p in before}
    new = {p["name"]: p for p in after}
    out = []
    for name in sorted(set(old) | set(new)):
        if name not in old:
            out.append(PoolChange(name, "added", [], []))
        elif name not in new:
            out.append(PoolChange(name, "removed", [], []))
        else:
            changes = [c for c in diff_values(old[name], new[name]) if c.path != "usdPerNodeHour"]
            if changes:
                fields = POOL_REPLACING_FIELDS.get(cloud, ())
                out.append(PoolChange(name, "changed", changes, [c.path for c in changes if c.path in fields]))
    return out


@dataclass(frozen=True)
class Capacity:
    max_gpus: int
    usd_min: float | None
    usd_max: float | None


def capacity(pools: list[dict[str, Any]]) -> Capacity:
    """Physical GPUs at maximum scale, and $/hour at minimum and maximum scale; no price (None)
    when no pool has one (nodes of an existing cluster)."""
    priced = [p for p in pools if p["usdPerNodeHour"] is not None]
    if pools and not priced:
        return Capacity(sum(p["maxNodes"] * p["gpusPerNode"] for p in pools), None, None)
    return Capacity(
        max_gpus=sum(p["maxNodes"] * p["gpusPerNode"] for p in pools),
        usd_min=sum(p["usdPerNodeHour"] * p["minNodes"] for p in priced),
        usd_max=sum(p["usdPerNodeHour"] * p["maxNodes"] for p in priced),
    )


def _pool_capacity(pool: dict[str, Any] | None) -> Capacity:
    return capacity([pool] if pool else [])


# --- one stack ------------------------------------------------------------------------------


@dataclass
class StackReview:
    stack: str
    # added | removed | changed | unchanged | invalid
    status: str
    base: dict[str, Any] | None
    head: dict[str, Any] | None
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[ResourceChange] = field(default_factory=list)
    settings: list[Change] = field(default_factory=list)
    outputs: list[Change] = field(default_factory=list)
    pools: list[PoolChange] = field(default_factory=list)
    findings: list[rules.Finding] = field(default_factory=list)
    # The spec or stack-file errors of a side that does not synthesize.
    base_error: str = ""
    head_error: str = ""

    @property
    def replacements(self) -> int:
        """Resources replaced, each once: a pool's replacement is its node group's (node pool's)."""
        alone = [p for p in self.pools if p.replacing and self.pool_resource(p.name) is None]
        return sum(1 for c in self.changed if c.replacing) + len(alone)

    def pool_resource(self, pool: str) -> ResourceChange | None:
        """The replaced EKS node group or GKE node pool of a pool: named `<cluster>-<pool>` by
        both wings, as every resource name derives from the spec."""
        platform = (self.head or self.base or {}).get("config", {}).get(f"{CONFIG_NAMESPACE}:{CONFIG_KEY}") or {}
        name = f"{(platform.get('cluster') or {}).get('name', '')}-{pool}"
        for change in self.changed:
            type_token, resource = change.key.split("::", 1)
            if change.replacing and type_token in POOL_RESOURCE_TYPES and resource == name:
                return change
        return None

    @property
    def cloud(self) -> str:
        platform = (self.head or self.base or {}).get("config", {}).get(f"{CONFIG_NAMESPACE}:{CONFIG_KEY}") or {}
        return str(platform.get("cloud", ""))


def review_stack(stack: str, base: dict[str, Any] | None, head: dict[str, Any] | None) -> StackReview:
    """The review of one stack. A side that does not synthesize makes the stack invalid: with
    nothing to compare, no capacity, resource or policy figure is shown for it."""
    base_error = (base or {}).get("error", "")
    head_error = (head or {}).get("error", "")
    if base_error or head_error:
        return StackReview(
            stack,
            "invalid",
            None if base_error else base,
            None if head_error else head,
            base_error=base_error,
            head_error=head_error,
        )
    before = base
    review = StackReview(stack, "changed", before, head)
    old_resources = before["resources"] if before else []
    new_resources = head["resources"] if head else []
    review.added, review.removed, review.changed = diff_resources(old_resources, new_resources)
    review.settings = diff_values(before["config"] if before else {}, head["config"] if head else {})
    review.outputs = diff_values(before["outputs"] if before else {}, head["outputs"] if head else {})
    review.pools = diff_pools(before["pools"] if before else [], head["pools"] if head else [], review.cloud)
    if head is not None:
        review.findings = policy_findings(stack, head)
    if head is None:
        review.status = "removed"
    elif base is None:
        review.status = "added"
    elif not (review.added or review.removed or review.changed or review.settings or review.outputs or review.pools):
        review.status = "unchanged"
    return review


def policy_findings(stack: str, head: dict[str, Any]) -> list[rules.Finding]:
    """The policy rules and schema checks of `gpu-platform check`, on the working tree's stack."""
    raw = head["config"].get(f"{CONFIG_NAMESPACE}:{CONFIG_KEY}")
    try:
        spec = parse_spec(raw, f"{stackfile.STACKS_DIR}/Pulumi.{stack}.yaml")
    except SpecError:
        return []
    synthesis = synth.Synthesis(head["project"], stack, head["resources"], head["outputs"])
    return check.check_synthesis(spec, synthesis).findings


# --- Markdown -----------------------------------------------------------------------------

_MAX_VALUE = 100


def _value(value: Any) -> str:
    if value is _ABSENT:
        return "(absent)"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    if len(text) > _MAX_VALUE:
        text = text[: _MAX_VALUE - 1] + "…"
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`"


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def _delta_int(before: int, after: int) -> str:
    if before == after:
        return str(after)
    return f"{before} → {after} ({after - before:+d})"


def _delta_usd(before: float | None, after: float | None) -> str:
    if before == after:
        return _usd(after)
    if before is None or after is None:
        return f"{_usd(before)} → {_usd(after)}"
    return f"{_usd(before)} → {_usd(after)} ({after - before:+,.2f})"


def _policy_cell(findings: list[rules.Finding]) -> str:
    counts = {level: sum(1 for f in findings if f.level == level) for level in ("mandatory", "advisory", "overridden")}
    parts = [f"{n} {level}" for level, n in counts.items() if n]
    return ", ".join(parts) if parts else "pass"


def _changes_table(changes: list[Change], replacing: set[str] | None = None, header: str = "property") -> list[str]:
    lines = [f"| {header} | before | after |", "|---|---|---|"]
    for c in changes:
        mark = " ⚠️ replaces" if replacing and c.path in replacing else ""
        lines.append(f"| `{c.path}`{mark} | {_value(c.before)} | {_value(c.after)} |")
    return lines


def _pool_rows(review: StackReview) -> list[str]:
    old = {p["name"]: p for p in (review.base or {}).get("pools", [])}
    new = {p["name"]: p for p in (review.head or {}).get("pools", [])}
    lines = [
        "| pool | change | GPU | nodes | max GPUs | $/h min | $/h max |",
        "|---|---|---|---|---|---|---|",
    ]
    for change in review.pools:
        before, after = old.get(change.name), new.get(change.name)
        shown = after or before or {}
        what = change.status if change.status != "changed" else ", ".join(
            f"{c.path} {_plain(c.before)} → {_plain(c.after)}" for c in change.changes
        )
        nodes_before = f"{before['minNodes']}-{before['maxNodes']}" if before else "-"
        nodes_after = f"{after['minNodes']}-{after['maxNodes']}" if after else "-"
        nodes = nodes_after if nodes_before == nodes_after else f"{nodes_before} → {nodes_after}"
        cb, ca = _pool_capacity(before), _pool_capacity(after)
        lines.append(
            f"| `{change.name}` | {what} | {shown.get('gpu', '')} | {nodes} | {_delta_int(cb.max_gpus, ca.max_gpus)}"
            f" | {_delta_usd(cb.usd_min, ca.usd_min)} | {_delta_usd(cb.usd_max, ca.usd_max)} |"
        )
    tb, ta = capacity(list(old.values())), capacity(list(new.values()))
    lines.append(
        f"| **stack total** | | | | {_delta_int(tb.max_gpus, ta.max_gpus)} | {_delta_usd(tb.usd_min, ta.usd_min)}"
        f" | {_delta_usd(tb.usd_max, ta.usd_max)} |"
    )
    return lines


def _plain(value: Any) -> str:
    return "(absent)" if value is _ABSENT else str(value)


def _replacement_lines(review: StackReview) -> list[str]:
    lines = []
    covered = {r.key for p in review.pools if p.replacing and (r := review.pool_resource(p.name))}
    for change in review.changed:
        if change.replacing and change.key not in covered:
            paths = ", ".join(f"`{p}`" for p in change.replacing)
            lines.append(f"> - `{change.key}` is **replaced** (deleted and created again): {paths} changed")
    for pool in review.pools:
        if pool.replacing:
            fields = ", ".join(
                f"`{c.path}` {_plain(c.before)} → {_plain(c.after)}" for c in pool.changes if c.path in pool.replacing
            )
            resource = review.pool_resource(pool.name)
            held_by = f" (`{resource.key}`)" if resource else ""
            lines.append(
                f"> - pool `{pool.name}`: {fields} replaces the pool's node group / node pool{held_by}:"
                " its nodes are recreated and running pods evicted"
            )
    return ["> [!WARNING]", "> **Replacements**", *lines] if lines else []


def mermaid(review: StackReview) -> list[str]:
    """The components of the working tree's stack (the base's if the stack is removed) as a graph;
    components with added, removed or changed resources below them are highlighted."""
    source = review.head if review.head is not None else review.base or {}
    records = source.get("resources", [])
    by_key = _by_key(records)
    base_by_key = _by_key((review.base or {}).get("resources", []))
    components = sorted(k for k, r in by_key.items() if not r["custom"])
    ids = {key: f"c{i}" for i, key in enumerate(components)}

    def owner(key: str, table: dict[str, dict[str, Any]]) -> str | None:
        parent = table[key]["parent"] if key in table else None
        while parent is not None and parent in table and table[parent]["custom"]:
            parent = table[parent]["parent"]
        return parent if parent in ids else None

    counts: dict[str | None, int] = {}
    for key, record in by_key.items():
        if record["custom"]:
            at = owner(key, by_key)
            counts[at] = counts.get(at, 0) + 1
    touched_keys = [*review.added, *(c.key for c in review.changed)]
    touched: set[str] = set()
    for key in touched_keys:
        _mark_ancestors(key, by_key, ids, touched)
    for key in review.removed:
        _mark_ancestors(key, base_by_key, ids, touched)
    lines = ["```mermaid", "graph TD", f'  stack["{review.stack} ({counts.get(None, 0)} resources)"]']
    for key in components:
        token, name = key.split("::", 1)
        count = counts.get(key, 0)
        lines.append(f'  {ids[key]}["{token.split(":", 1)[-1]}<br/>{name} ({count})"]')
    for key in components:
        parent = owner(key, by_key)
        lines.append(f"  {ids[parent] if parent else 'stack'} --> {ids[key]}")
    added = [ids[k] for k in components if k in review.added]
    changed = [ids[k] for k in components if k in touched and k not in review.added]
    if added:
        lines.append(f"  class {','.join(added)} added")
    if changed:
        lines.append(f"  class {','.join(changed)} changed")
    lines += [
        "  classDef added fill:#dafbe1,stroke:#1a7f37",
        "  classDef changed fill:#fff8c5,stroke:#9a6700",
        "```",
    ]
    return lines


def _mark_ancestors(key: str, table: dict[str, dict[str, Any]], ids: dict[str, str], marked: set[str]) -> None:
    if key in ids:
        marked.add(key)
    parent = table[key]["parent"] if key in table else None
    while parent is not None:
        if parent in ids:
            marked.add(parent)
        parent = table[parent]["parent"] if parent in table else None


def _invalid_lines(review: StackReview) -> list[str]:
    lines = [f"### `{review.stack}`: invalid", ""]
    for side, error in (("at the base", review.base_error), ("in the working tree", review.head_error)):
        if error:
            lines += [f"The stack file {side} is invalid; nothing was synthesized or compared:", "", "```", error, "```", ""]
    return lines


def invalid_sides(review: StackReview) -> str:
    """`base`, `working tree` or both, for the summary table."""
    sides = [name for name, error in (("base", review.base_error), ("working tree", review.head_error)) if error]
    return " and ".join(sides)


def render_stack(review: StackReview) -> list[str]:
    platform = (review.head or review.base or {}).get("config", {}).get(f"{CONFIG_NAMESPACE}:{CONFIG_KEY}") or {}
    cluster = (platform.get("cluster") or {}).get("name", "")
    title = f"### `{review.stack}`: {review.status} ({platform.get('cloud', '?')} {platform.get('environment', '?')}, cluster {cluster})"
    if review.status == "invalid":
        return _invalid_lines(review)
    lines = [title, ""]
    if review.status == "removed":
        lines += [
            "The stack file is removed: the deploy workflow stops updating this stack; its resources stay"
            " until someone runs `pulumi destroy` on it.",
            "",
        ]
    replacements = _replacement_lines(review)
    if replacements:
        lines += [*replacements, ""]
    if review.pools:
        lines += [f"**GPU capacity** ({catalog.PRICE_NOTE})", "", *_pool_rows(review), ""]
    if review.settings:
        lines += ["**Stack file**", "", *_changes_table(review.settings, header="setting"), ""]
    lines += [f"**Resources**: {len(review.added)} added, {len(review.removed)} removed, {len(review.changed)} changed", ""]
    lines += [f"- ➕ `{key}`" for key in review.added]
    lines += [f"- ➖ `{key}`" for key in review.removed]
    if review.added or review.removed:
        lines.append("")
    for change in review.changed:
        verb = "**replaced**" if change.replacing else "updated"
        lines += [f"`{change.key}`: {verb}", "", *_changes_table(change.changes, set(change.replacing)), ""]
    if review.outputs:
        lines += ["**Stack outputs**", "", *_changes_table(review.outputs, header="output"), ""]
    if review.head is not None:
        lines += ["**Policy** (working tree)", ""]
        if review.findings:
            lines += [f"- `{f.rule}` on `{f.violation.resource or 'the stack'}`: {f.message}" for f in review.findings]
        else:
            lines.append(f"All {len(RULES)} policy rules and the Kubernetes schema checks pass.")
        lines.append("")
    lines += ["**Components**", "", *mermaid(review), ""]
    return lines


def render(reviews: list[StackReview], base_ref: str, sha: str) -> str:
    lines = [
        "## gpu-platform review",
        "",
        f"Base `{base_ref}` (`{sha[:12]}`) compared with this branch, both synthesized offline"
        " (mocked cloud outputs: IDs, ARNs and endpoints are placeholders).",
        "",
    ]
    changed = [r for r in reviews if r.status != "unchanged"]
    unchanged = [r for r in reviews if r.status == "unchanged"]
    if not changed:
        lines += [f"**No changes**: all {len(reviews)} stack(s) synthesize identically.", ""]
    else:
        lines += [
            "| stack | change | resources | replacements | max GPUs | $/h at max scale | policy |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in changed:
            if r.status == "invalid":
                lines.append(f"| `{r.stack}` | invalid ({invalid_sides(r)}) | - | - | - | - | - |")
                continue
            before = capacity((r.base or {}).get("pools", []))
            after = capacity((r.head or {}).get("pools", []))
            counts = f"+{len(r.added)} −{len(r.removed)} ~{len(r.changed)}"
            lines.append(
                f"| `{r.stack}` | {r.status} | {counts} | {r.replacements} | {_delta_int(before.max_gpus, after.max_gpus)}"
                f" | {_delta_usd(before.usd_max, after.usd_max)} | {_policy_cell(r.findings) if r.head else '-'} |"
            )
        lines.append("")
        for r in changed:
            lines += render_stack(r)
    for r in unchanged:
        blocking = sum(1 for f in r.findings if f.blocking)
        suffix = f" (policy: {blocking} mandatory violation(s), see `gpu-platform check`)" if blocking else ""
        lines.append(f"- `{r.stack}`: no changes{suffix}")
    return "\n".join(lines).rstrip() + "\n"


# --- the command -----------------------------------------------------------------------------


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


def collect(base_ref: str, refs: list[str], cwd: Path | None = None) -> tuple[list[StackReview], str]:
    """The review of each stack of the repository at `cwd` against `base_ref`, and the base's
    commit."""
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
        snaps = snapshots({"base": base_root, "working": root}, rels)
    stacks = sorted(set(snaps["base"]) | set(snaps["working"]))
    return [review_stack(s, snaps["base"].get(s), snaps["working"].get(s)) for s in stacks], sha


def run(base_ref: str, refs: list[str], cwd: Path | None = None) -> str:
    """The Markdown review of the working tree of the repository at `cwd` against `base_ref`."""
    reviews, sha = collect(base_ref, refs, cwd)
    return render(reviews, base_ref, sha)

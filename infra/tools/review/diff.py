"""What a change does to one stack: resources added, removed and changed property by property,
the changes that make a provider replace a resource, and GPU capacity and $/hour per pool."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.checks import declared
from components.checks.rules import base
from components.spec import CONFIG_KEY, CONFIG_NAMESPACE, SpecError, parse_spec
from components.spec.fleet import parse_fleet_spec, worker_stack
from infra import offline, stackfile, synth
from infra.tools import check, fleet_check

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
    declared.EKS_NODE_GROUP: (
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
    declared.EKS_CLUSTER: (
        "name",
        "roleArn",
        "accessConfig.bootstrapClusterCreatorAdminPermissions",
        "bootstrapSelfManagedAddons",
        "kubernetesNetworkConfig.ipFamily",
        "kubernetesNetworkConfig.serviceIpv4Cidr",
        "outpostConfig",
        "remoteNetworkConfig",
    ),
    declared.GKE_NODE_POOL: (
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
    declared.GKE_CLUSTER: (
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
    declared.LAUNCH_TEMPLATE: ("name", "namePrefix"),
    declared.S3_BUCKET: ("bucket", "bucketPrefix", "objectLockEnabled"),
    declared.GCS_BUCKET: ("name", "location", "project"),
    declared.PRIORITY_CLASS: ("value", "preemptionPolicy"),
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
POOL_RESOURCE_TYPES = (declared.EKS_NODE_GROUP, declared.GKE_NODE_POOL)


class _Absent:
    """A value missing on one side of a change. It pickles as the module's one instance, so a
    review made in a worker process (infra.tools.parallel) keeps `value is ABSENT` true."""

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()


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
            out += diff_values(before.get(key, ABSENT), after.get(key, ABSENT), f"{path}.{key}" if path else str(key))
        return out
    if isinstance(before, list) and isinstance(after, list):
        old, new = _list_keys(before), _list_keys(after)
        if old is not None and new is not None:
            out = []
            for key in sorted(set(old) | set(new)):
                out += diff_values(old.get(key, ABSENT), new.get(key, ABSENT), f"{path}[{key}]")
            return out
        out = []
        for i in range(max(len(before), len(after))):
            item_before = before[i] if i < len(before) else ABSENT
            item_after = after[i] if i < len(after) else ABSENT
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


def records_by_key(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{r['type']}::{r['name']}": r for r in records}


def diff_resources(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> tuple[list[str], list[str], list[ResourceChange]]:
    """(added, removed, changed) resources by `type::name`, each sorted."""
    old, new = records_by_key(before), records_by_key(after)
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


def pool_capacity(pool: dict[str, Any] | None) -> Capacity:
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
    findings: list[base.Finding] = field(default_factory=list)
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


def policy_findings(stack: str, head: dict[str, Any]) -> list[base.Finding]:
    """The policy rules and schema checks of `gpu-platform check`, on the working tree's stack."""
    raw = head["config"].get(f"{CONFIG_NAMESPACE}:{CONFIG_KEY}")
    if "workers" in head:
        return fleet_findings(stack, head)
    try:
        spec = parse_spec(raw, f"{stackfile.STACKS_DIR}/Pulumi.{stack}.yaml")
    except SpecError:
        return []
    synthesis = synth.Synthesis(head["project"], stack, head["resources"], head["outputs"])
    return check.check_synthesis(spec, synthesis).findings


def fleet_findings(stack: str, head: dict[str, Any]) -> list[base.Finding]:
    """`gpu-platform check` on a fleet manager (infra.tools.fleet_check): its schema checks, the
    reach check and the fit proof over the workers the snapshot carries."""
    source = f"{stackfile.STACKS_DIR}/Pulumi.{stack}.yaml"
    try:
        spec = parse_fleet_spec(head["config"].get(f"{CONFIG_NAMESPACE}:{CONFIG_KEY}"), source)
        workers = {
            w: (
                stackfile.StackFile(Path(f"{stackfile.STACKS_DIR}/Pulumi.{worker_stack(w)}.yaml"), worker_stack(w), side["config"]).spec(),
                synth.Synthesis(head["project"], worker_stack(w), side["resources"], side["outputs"]),
            )
            for w, side in head["workers"].items()
        }
    except SpecError:
        return []
    manager = synth.Synthesis(head["project"], stack, head["resources"], head["outputs"])
    fleet = offline.FleetSynthesis(stackfile.StackFile(Path(source), stack, head["config"]), spec, manager, workers)
    return [f for report in fleet_check.check_fleet(fleet) for f in report.findings]

"""Names: no control character in any string of a stack file, and every field that ends up in a
cloud or Kubernetes name valid for its target (components.facts.names), together with the names
the wings derive from it (`<cluster>-<pool>`, `<cluster>-system-`, ...), shown when too long.

The derived shapes mirror the wings' (components/aws, components/gcp, components.naming); the
naming property test (tests/spec/test_name_property.py) checks every name the synthesized
artifacts hold against the same table, so a wing that changes a shape without this list fails.
"""

from __future__ import annotations

import unicodedata
from typing import Any, Iterator

from components.facts.names import NameKind, name_problem
from components.spec.models import PlatformSpec
from components.spec.problems import ROOT, Problem

# Unicode categories refused in any string: controls (C0, DEL, C1: a newline or escape sequence
# in a name lands in resource names and URNs) and lone surrogates (not characters at all: no
# UTF-8 writer can encode them).
_REFUSED_CATEGORIES = ("Cc", "Cs")


def control_character_problems(value: Any, path: str = ROOT) -> list[Problem]:
    """Every string (key or value) under `value` holding a control character or lone surrogate."""
    problems: list[Problem] = []
    if isinstance(value, str):
        bad = next((c for c in value if unicodedata.category(c) in _REFUSED_CATEGORIES), None)
        if bad is not None:
            problems.append(
                Problem(path, f"expected text without control characters, got {value!r} (U+{ord(bad):04X})")
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key!r}" if control_character_problems(key) else f"{path}.{key}"
            problems += control_character_problems(key, here) + control_character_problems(item, here)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            problems += control_character_problems(item, f"{path}[{index}]")
    return problems


def name_problems(spec: PlatformSpec) -> list[Problem]:
    """Each user field and each derived name that its target refuses, one problem per field."""
    problems: list[Problem] = []
    reported: set[str] = set()
    for path, name, kind, source in _names(spec):
        if source is not None and (name_problem("dns-label", source) or _cluster_refused(spec)):
            continue  # the field itself is refused already (platform_rules, gcp_rules)
        problem = name_problem(kind, name)
        if problem is None or path in reported:
            continue
        reported.add(path)
        shown = f"the derived {kind} name {name!r}" if source is not None else repr(name)
        problems.append(Problem(path, f"{problem}; got {shown}"))
    return problems


def _cluster_refused(spec: PlatformSpec) -> bool:
    """Whether the cluster name is refused by its own rules, which then speak for its derived names."""
    name = spec.cluster.name
    return bool(name_problem("dns-label", name) or (spec.cloud == "gcp" and name_problem("gke-cluster", name)))


_Name = tuple[str, str, NameKind, "str | None"]


def _names(spec: PlatformSpec) -> Iterator[_Name]:
    """(field, name, target, the field's value when the name is derived from it) for every name
    the stack makes from its fields. The cluster, pool and team names themselves are DNS-1123
    labels (platform_rules, scheduling_rules; the GKE cluster's bound in gcp_rules), stricter than
    the EKS names they become; `<cluster>-<pool>` is bounded there too."""
    cluster = spec.cluster.name
    at = f"{ROOT}.cluster.name"
    for i, pool in enumerate(spec.node_pools):
        for key, value in pool.node_selector.items():
            yield f"{ROOT}.nodePools[{i}].nodeSelector.{key}", key, "label-key", None
            yield f"{ROOT}.nodePools[{i}].nodeSelector.{key}", value, "label-value", None
    if spec.storage.bucket_name is not None:
        kind: NameKind = "gcs-bucket" if spec.cloud == "gcp" else "s3-bucket"
        yield f"{ROOT}.storage.bucketName", spec.storage.bucket_name, kind, None
    if spec.cloud == "aws":
        yield from _aws_names(spec, cluster, at)
    if spec.cloud == "gcp":
        yield from _gcp_names(spec, cluster, at)


def _aws_names(spec: PlatformSpec, cluster: str, at: str) -> Iterator[_Name]:
    # components/aws/cluster.py: the EKS cluster, the system node group's prefix, the roles.
    yield at, f"{cluster}-system-", "eks-node-group-prefix", cluster
    for role in ("cluster", "node", "vpc-cni", "aws-ebs-csi-driver", "cluster-autoscaler"):
        yield at, f"{cluster}-{role}", "iam-role-autonamed", cluster
    # components/aws/storage.py: the trainer image repository and the bucket's default name.
    yield at, f"{cluster}/trainer", "ecr-repository", cluster
    if spec.storage.bucket_name is None:
        yield at, f"{cluster}-{spec.environment}-training", "s3-bucket", cluster
    # components/aws/storage.py: each team's trainer role.
    for i, team in enumerate(spec.scheduling.teams):
        yield f"{ROOT}.scheduling.teams[{i}].name", f"{cluster}-storage-trainer-{team.name}", "iam-role-autonamed", team.name


def _gcp_names(spec: PlatformSpec, cluster: str, at: str) -> Iterator[_Name]:
    # components/gcp: the cluster, its network, the image repository, the bucket's default name.
    gcp = spec.gcp
    existing = gcp.network.existing if gcp is not None else None
    if existing is None:
        for part in ("vpc", "subnet", "router", "nat"):
            yield at, f"{cluster}-{part}", "gce-name", cluster
    else:
        here = f"{ROOT}.gcp.network.existing"
        for field, value in (("network", existing.network), ("subnetwork", existing.subnetwork)):
            yield f"{here}.{field}", value, "gce-name", None
        for field, value in (("podsRange", existing.pods_range), ("servicesRange", existing.services_range)):
            yield f"{here}.{field}", value, "gce-name", None
    yield at, f"{cluster}-images", "artifact-registry-repository", cluster
    if spec.storage.bucket_name is None:
        yield at, f"{cluster}-{spec.environment}-training", "gcs-bucket", cluster

"""What the fit proof compares: a node as one of its consumers sees it, a pod as a job asks, and the
reading of taints, tolerations and affinities the way the scheduler reads them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from components.checks import quantities
from components.checks.declared import UNKNOWN, get, items, mapping
from components.node_resources import Requests

# EKS and GKE spell taint effects in upper snake case; Kubernetes in camel case.
TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


@dataclass(frozen=True)
class NodeView:
    """One view of a scaled-from-zero node: what its consumer sees. None: unknown, not judged."""

    what: str
    resource: str | None
    labels: Mapping[str, str] | None
    taints: list[Taint] | None
    extended: Mapping[str, int] | None
    # CPU and memory left to jobs, with the DaemonSets counted; None where unknown.
    left: Requests | None
    daemonsets: tuple[str, ...]
    max_nodes: int | None
    # Where each extended resource comes from, for messages; `{name}` in the pattern is the resource.
    sources: Mapping[str, str] = field(default_factory=dict)
    source_pattern: str = ""
    # Nodes come only through ProvisioningRequests (GKE queued provisioning).
    queued: bool = False
    # What keeps the provisioner from launching such a node for this job at all (Karpenter).
    blocked: tuple[str, ...] = ()
    # What the pods must leave of `left` for node agents the stack does not know of
    # (node_resources.JOB_MARGIN on AWS nodes).
    margin: Requests = Requests(0, 0)

    def source(self, name: str) -> str:
        return self.sources.get(name) or self.source_pattern.format(name=name)


@dataclass(frozen=True)
class PodShape:
    """What one pod of a rendered job asks of a node, and how many of them there are."""

    pods: int
    one_per_node: bool
    extended: dict[str, int]
    requests: Requests | None
    node_selector: dict[str, str]
    tolerations: list[Mapping[str, Any]]
    namespace: str
    queue: str

    def admitted(self, flavor: Mapping[str, Any]) -> PodShape:
        """The pod as Kueue admits it on `flavor`: the flavor's labels and tolerations added."""
        return PodShape(
            pods=self.pods,
            one_per_node=self.one_per_node,
            extended=self.extended,
            requests=self.requests,
            node_selector={**self.node_selector, **str_map(get(flavor, "nodeLabels"))},
            tolerations=self.tolerations + [t for t in items(get(flavor, "tolerations")) if isinstance(t, Mapping)],
            namespace=self.namespace,
            queue=self.queue,
        )


# --- reading engine-shaped values --------------------------------------------------------------


def is_known(value: Any) -> bool:
    return value != UNKNOWN


def str_map(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in mapping(value).items() if is_known(v)}


def int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def requests_of(resources: Any) -> Requests:
    requests = mapping(get(resources, "requests"))
    return Requests(quantities.cpu_millicores(requests.get("cpu")), quantities.memory_mib(requests.get("memory")))


def taints_of(value: Any) -> list[Taint] | None:
    if not is_known(value):
        return None
    return [
        Taint(str(get(t, "key")), str(get(t, "value") or ""), TAINT_EFFECTS.get(str(get(t, "effect")), str(get(t, "effect"))))
        for t in items(value)
    ]


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Taint) -> bool:
    """Kubernetes toleration matching (core/v1 Toleration: key, operator, value, effect)."""
    for toleration in tolerations:
        key, operator = toleration.get("key") or "", toleration.get("operator") or "Equal"
        effect = toleration.get("effect") or ""
        if effect and effect != taint.effect:
            continue
        if operator == "Exists" and key in ("", taint.key):
            return True
        if operator == "Equal" and key == taint.key and (toleration.get("value") or "") == taint.value:
            return True
    return False


def untolerated(tolerations: Sequence[Mapping[str, Any]], taints: Sequence[Taint]) -> list[Taint]:
    return [t for t in taints if t.effect in ("NoSchedule", "NoExecute") and not tolerates(tolerations, t)]


def affinity_matches(affinity: Any, labels: Mapping[str, str]) -> bool:
    """Required node affinity: any term whose In/Exists expressions all hold; none: every node."""
    terms = items(get(affinity, "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"))
    if not terms:
        return True
    for term in terms:
        matched = True
        for expression in items(get(term, "matchExpressions")):
            key, operator = get(expression, "key"), get(expression, "operator")
            values = [str(v) for v in items(get(expression, "values"))]
            if operator == "In" and labels.get(str(key)) not in values:
                matched = False
            elif operator == "Exists" and key not in labels:
                matched = False
            elif operator == "NotIn" and labels.get(str(key)) in values:
                matched = False
        if matched:
            return True
    return False

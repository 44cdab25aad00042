"""The spec of a fleet manager stack (`cloud: fleet`): which workers it dispatches to, in what order.

A manager runs no GPUs: it holds Kueue with MultiKueue on an existing cluster, reached through a
kubeconfig context as `cloud: existing` stacks are, and reads its workers' stack outputs through
Pulumi StackReferences (components.fleet.manager). Why a stack kind of its own and not a section of
a cluster stack is in docs/fleet.md ("Why `cloud: fleet`").
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, ValidationError

from components.spec.models import ClusterSpec, Environment, PlatformSpec, _Spec
from components.spec.problems import ROOT, Problem, SpecError, dns_label_problems, in_file_order, shape_problem

FLEET = "fleet"
# MultiKueueConfig `spec.clusters`: at most 20 (kueue.x-k8s.io_v1beta2_MultiKueueConfig schema, maxItems).
MAX_WORKERS = 20
# A Pulumi stack reference's fully qualified name: <organization>/<project>/<stack>.
_STACK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*\Z")


class FleetManagerSpec(_Spec):
    # Pulumi stack names of the workers (organization/project/stack), each a stack with
    # `fleet.worker: true`.
    workers: list[str] = Field(min_length=1, max_length=MAX_WORKERS)
    # Dispatch preference, most preferred first, as worker stack names; None: cheapest $/GPU-hour
    # first (components.fleet.order). Must list every worker once.
    order: Optional[list[str]] = None
    # Per team, per GPU model (e.g. H100-80GB), the GPU slots the manager admits; a team or model
    # not listed gets the sum of the workers' quotas.
    quotas: dict[str, dict[str, Annotated[int, Field(ge=0)]]] = Field(default_factory=dict)
    # The manager cluster's egress ranges (IPv4 CIDRs): MultiKueue connects from there to each
    # worker's API endpoint, so `gpu-platform check` requires every worker to admit them
    # (components.checks.rules.fleet, `fleet-worker-reachable`).
    manager_cidrs: list[str] = Field(min_length=1)


class FleetStackSpec(_Spec):
    cloud: Literal["fleet"]
    environment: Environment
    # `context`: the kubeconfig context of the manager cluster (required).
    cluster: ClusterSpec
    fleet: FleetManagerSpec


def is_fleet(raw: Any) -> bool:
    """Whether a raw `gpu-platform:platform` value is a manager stack's."""
    return isinstance(raw, dict) and raw.get("cloud") == FLEET


def worker_stack(name: str) -> str:
    """The stack part of a fully qualified stack name: the worker's stack file is Pulumi.<it>.yaml."""
    return name.rsplit("/", 1)[-1]


def parse_fleet_spec(raw: Any, source: str) -> FleetStackSpec:
    """Validate a manager stack's `gpu-platform:platform`; every problem at once, as parse_spec."""
    try:
        spec = FleetStackSpec.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(source, in_file_order(raw, [shape_problem(e, FleetStackSpec) for e in exc.errors()])) from None
    problems = fleet_problems(spec)
    if problems:
        raise SpecError(source, in_file_order(raw, problems))
    return spec


def fleet_problems(spec: FleetStackSpec) -> list[Problem]:
    at = f"{ROOT}.fleet"
    problems = dns_label_problems(spec.cluster.name, f"{ROOT}.cluster.name")
    if not spec.cluster.context:
        problems.append(Problem(f"{ROOT}.cluster.context", "required for cloud: fleet (the manager cluster's kubeconfig context)"))
    workers = spec.fleet.workers
    for i, name in enumerate(workers):
        if not _STACK_NAME.match(name):
            problems.append(Problem(f"{at}.workers[{i}]", f"expected a Pulumi stack name organization/project/stack, got {name!r}"))
        elif name in workers[:i]:
            problems.append(Problem(f"{at}.workers[{i}]", f"{name} is listed twice"))
    stacks = [worker_stack(w) for w in workers]
    for i, stack in enumerate(stacks):
        if stack in stacks[:i] and workers[i] not in workers[:i]:
            problems.append(Problem(f"{at}.workers[{i}]", f"two workers end in stack {stack!r}: each names its stack file"))
    for i, cidr in enumerate(spec.fleet.manager_cidrs):
        try:
            ipaddress.IPv4Network(cidr)
        except ValueError:
            problems.append(Problem(f"{at}.managerCidrs[{i}]", f"expected an IPv4 CIDR such as 198.51.100.0/24, got {cidr!r}"))
    if spec.fleet.order is not None and sorted(spec.fleet.order) != sorted(workers):
        problems.append(Problem(f"{at}.order", f"must list every worker once, in dispatch order; workers: {', '.join(workers)}"))
    return problems


def fleet_worker_problems(spec: PlatformSpec) -> list[Problem]:
    """A worker exports a kubeconfig of its endpoint: the wings build one; an existing cluster's
    context names credentials the program never sees."""
    if spec.fleet.worker and spec.cloud == "existing":
        return [Problem(f"{ROOT}.fleet.worker", "supported on cloud: aws and gcp (an existing cluster has no endpoint the program knows)")]
    return []

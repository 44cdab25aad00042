"""The platform spec: the one place user input is checked.

A stack file carries one structured key, `gpu-platform:platform`. It is parsed in two passes,
both of which collect every problem before reporting:

1. shape: types, required fields, unknown keys, simple bounds (pydantic, strict, no coercion);
2. rules: facts that need the catalog or several fields at once (`rule_problems`).

Anything downstream may assume a `PlatformSpec` is valid; nothing downstream re-checks input.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from components import catalog, rule_catalog

CONFIG_NAMESPACE = "gpu-platform"
CONFIG_KEY = "platform"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Kubernetes names and most cloud names derived from `<cluster>-<pool>` are capped at 63.
_MAX_NAME = 63

Cloud = Literal["aws", "gcp", "existing"]
Environment = Literal["dev", "staging", "prod"]
Capacity = Literal["on-demand", "spot"]
SharingMode = Literal["none", "time-slicing", "mps", "mig"]
DevicePlugin = Literal["nvidia", "managed", "none"]
PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]


class _Spec(BaseModel):
    """Strict, camelCase, closed: a typo in a stack file is an error, never a silent default."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        strict=True,
        frozen=True,
    )


class SharingSpec(_Spec):
    """How a pool's GPUs are shared between pods.

    time-slicing and mps advertise each GPU `replicas` times; mig splits each GPU into
    hardware instances of one `profile` (e.g. 1g.10gb) from the GPU's MIG table.
    """

    mode: SharingMode = "none"
    replicas: Optional[int] = None
    profile: Optional[str] = None


class NodePoolSpec(_Spec):
    """A GPU pool. On aws/gcp the instance type fixes the hardware; on `existing` clusters the
    pool describes nodes that are already there (gpuModel, gpusPerNode, nodeSelector)."""

    name: str
    instance_type: Optional[str] = None
    gpu_model: Optional[str] = None
    gpus_per_node: Optional[int] = Field(default=None, ge=1)
    node_selector: dict[str, str] = Field(default_factory=dict)
    min_nodes: int = Field(default=0, ge=0)
    max_nodes: int = Field(default=1, ge=0)
    capacity: Capacity = "on-demand"
    sharing: SharingSpec = Field(default_factory=SharingSpec)
    # Zones the pool's nodes may run in (AWS availability zones, GCP zones); empty: the wing's
    # zones. Each must belong to the stack's region.
    zones: list[str] = Field(default_factory=list)


class ClusterSpec(_Spec):
    name: str
    kubernetes_version: str = "1.33"
    # kubeconfig context of an existing cluster (cloud: existing only).
    context: Optional[str] = None


class PriorityTierSpec(_Spec):
    """A PriorityClass (and its Kueue WorkloadPriorityClass twin) jobs pick by name."""

    name: str
    value: int
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
    global_default: bool = False
    description: str = ""


class TeamSpec(_Spec):
    """A team: a namespace of its own and a GPU quota per pool (in schedulable GPU slots)."""

    name: str
    quotas: dict[str, int] = Field(default_factory=dict)


class SchedulingSpec(_Spec):
    # None: the platform's default tiers (components.kubernetes).
    priority_tiers: Optional[list[PriorityTierSpec]] = None
    teams: list[TeamSpec] = Field(default_factory=list)


class MonitoringSpec(_Spec):
    dcgm: bool = True
    # Only where the Prometheus Operator's CRDs are installed.
    service_monitor: bool = False


class StorageSpec(_Spec):
    # Bucket for datasets and checkpoints. Bucket names are global: override the default
    # (components.naming.bucket_name) when it is taken.
    bucket_name: Optional[str] = None


class PolicyOverrideSpec(_Spec):
    """A waiver of one overridable policy rule for this stack, with the reason reviewers read."""

    rule: str
    reason: str


class PolicySpec(_Spec):
    """Limits and waivers for the policy rules (components.rule_catalog) that check and the pack run."""

    # gpu-pool-max-nodes: the most nodes one GPU pool may scale to.
    max_nodes_per_pool: int = Field(default=16, ge=1)
    # stack-max-gpus: the most physical GPUs all pools of the stack may reach together.
    max_gpus: int = Field(default=256, ge=1)
    # spot-allowed: None means spot in dev and staging, never in prod (training runs that must
    # finish on time should not be preempted).
    allow_spot: Optional[bool] = None
    overrides: list[PolicyOverrideSpec] = Field(default_factory=list)

    def spot_allowed(self, environment: Environment) -> bool:
        return self.allow_spot if self.allow_spot is not None else environment != "prod"


class PlatformSpec(_Spec):
    """The whole intent of one stack: which cloud, which environment, which GPU pools."""

    cloud: Cloud
    environment: Environment
    cluster: ClusterSpec
    node_pools: list[NodePoolSpec] = Field(min_length=1)
    # Who advertises nvidia.com/gpu on GPU nodes; None: `nvidia` on aws and existing, `managed`
    # on gcp (GKE runs its own). See `device_plugin`.
    device_plugin_choice: Optional[DevicePlugin] = Field(default=None, alias="devicePlugin")
    scheduling: SchedulingSpec = Field(default_factory=SchedulingSpec)
    monitoring: MonitoringSpec = Field(default_factory=MonitoringSpec)
    storage: StorageSpec = Field(default_factory=StorageSpec)
    policy: PolicySpec = Field(default_factory=PolicySpec)

    @property
    def device_plugin(self) -> DevicePlugin:
        """The effective choice: exactly one nvidia.com/gpu advertiser per node."""
        if self.device_plugin_choice is not None:
            return self.device_plugin_choice
        return "managed" if self.cloud == "gcp" else "nvidia"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a stack file: where (`platform.nodePools[1].maxNodes`) and what."""

    path: str
    message: str


class SpecError(Exception):
    """Every problem found in one stack file, reported together."""

    def __init__(self, source: str, problems: list[Problem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(f"{self.source}: {p.path}: {p.message}" for p in self.problems)


def parse_spec(raw: Any, source: str) -> PlatformSpec:
    """Validate the raw `gpu-platform:platform` value from the stack file named `source`."""
    if raw is None:
        raise SpecError(source, [Problem(_ROOT, f"missing: set `{CONFIG_NAMESPACE}:{CONFIG_KEY}`")])
    try:
        spec = PlatformSpec.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(source, [_shape_problem(err) for err in exc.errors()]) from None
    problems = rule_problems(spec)
    if problems:
        raise SpecError(source, problems)
    return spec


# --- pass 1: shape errors from pydantic, said in the stack file's terms ---------------------

_ROOT = CONFIG_KEY


def _path(loc: tuple[int | str, ...]) -> str:
    out = _ROOT
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _model_at(loc: tuple[int | str, ...]) -> type[_Spec] | None:
    """The spec model a location points into, to list the keys it allows."""
    model: type[_Spec] = PlatformSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = next(
            (f for f in model.model_fields.values() if f.alias == part), None
        )
        if field is None:
            return model
        inner = _spec_class(field.annotation)
        if inner is None:
            return None
        model = inner
    return model


def _spec_class(annotation: Any) -> type[_Spec] | None:
    if isinstance(annotation, type) and issubclass(annotation, _Spec):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _spec_class(arg)
        if found is not None:
            return found
    return None


def _shape_problem(err: Any) -> Problem:
    loc: tuple[int | str, ...] = tuple(err["loc"])
    kind: str = err["type"]
    value = err.get("input")
    if kind == "missing":
        return Problem(_path(loc), "required field is missing")
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        allowed = sorted(f.alias or n for n, f in parent.model_fields.items()) if parent else []
        hint = _did_you_mean(str(loc[-1]), allowed)
        return Problem(
            _path(loc), f"unknown key{hint}; allowed keys: {', '.join(allowed)}"
        )
    if kind == "literal_error":
        expected = err["ctx"]["expected"]
        return Problem(_path(loc), f"expected {expected}, got {value!r}")
    if kind in ("string_type", "int_type", "bool_type", "dict_type", "list_type", "model_type"):
        wanted = {
            "string_type": "a string",
            "int_type": "a whole number",
            "bool_type": "true or false",
            "dict_type": "a mapping",
            "list_type": "a list",
            "model_type": "a mapping",
        }[kind]
        hint = ' (quote versions: "1.33")' if kind == "string_type" and isinstance(value, float) else ""
        return Problem(_path(loc), f"expected {wanted}, got {value!r}{hint}")
    if kind in ("greater_than_equal", "too_short"):
        return Problem(_path(loc), f"{err['msg'].lower()}, got {value!r}")
    return Problem(_path(loc), err["msg"])


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --- pass 2: rules that need the catalog or several fields --------------------------------


def rule_problems(spec: PlatformSpec) -> list[Problem]:
    problems = _cluster_problems(spec)
    names = Counter(pool.name for pool in spec.node_pools)
    for i, pool in enumerate(spec.node_pools):
        at = f"{_ROOT}.nodePools[{i}]"
        problems += _pool_name_problems(spec, pool, at, names)
        problems += _pool_hardware_problems(spec, pool, at)
        if pool.max_nodes < pool.min_nodes:
            problems.append(
                Problem(f"{at}.maxNodes", f"must be >= minNodes ({pool.min_nodes}), got {pool.max_nodes}")
            )
        problems += _sharing_problems(pool, at)
    problems += _policy_problems(spec.policy)
    return problems


def _cluster_problems(spec: PlatformSpec) -> list[Problem]:
    at = f"{_ROOT}.cluster"
    problems = _dns_label_problems(spec.cluster.name, f"{at}.name")
    if spec.cluster.kubernetes_version not in catalog.SUPPORTED_KUBERNETES_VERSIONS:
        supported = ", ".join(catalog.SUPPORTED_KUBERNETES_VERSIONS)
        problems.append(
            Problem(
                f"{at}.kubernetesVersion",
                f"expected one of {supported}, got {spec.cluster.kubernetes_version!r}",
            )
        )
    if spec.cloud == "existing" and not spec.cluster.context:
        problems.append(
            Problem(f"{at}.context", "required for cloud: existing (the kubeconfig context to use)")
        )
    if spec.cloud != "existing" and spec.cluster.context is not None:
        problems.append(
            Problem(f"{at}.context", f"only for cloud: existing; the {spec.cloud} wing builds its own kubeconfig")
        )
    return problems


def _dns_label_problems(name: str, path: str) -> list[Problem]:
    if not name:
        return [Problem(path, "must not be empty")]
    if len(name) > _MAX_NAME or not _DNS_LABEL.match(name):
        return [
            Problem(
                path,
                f"expected a DNS-1123 label (lowercase letters, digits and '-', "
                f"starting and ending alphanumeric, at most {_MAX_NAME} characters), got {name!r}",
            )
        ]
    return []


def _pool_name_problems(
    spec: PlatformSpec, pool: NodePoolSpec, at: str, names: Counter[str]
) -> list[Problem]:
    problems = _dns_label_problems(pool.name, f"{at}.name")
    if names[pool.name] > 1:
        problems.append(Problem(f"{at}.name", f"duplicate pool name {pool.name!r}: pool names must be unique"))
    combined = f"{spec.cluster.name}-{pool.name}"
    if not problems and len(combined) > _MAX_NAME:
        problems.append(
            Problem(
                f"{at}.name",
                f"'{combined}' (cluster name + pool name) is longer than {_MAX_NAME} characters; shorten either",
            )
        )
    return problems


def _pool_hardware_problems(spec: PlatformSpec, pool: NodePoolSpec, at: str) -> list[Problem]:
    if spec.cloud == "existing":
        return _existing_pool_problems(pool, at)
    problems = [
        Problem(f"{at}.{key}", f"only for cloud: existing; on {spec.cloud} the instanceType decides it")
        for key, value in (("gpuModel", pool.gpu_model), ("nodeSelector", pool.node_selector))
        if value
    ]
    if pool.instance_type is None:
        return [*problems, Problem(f"{at}.instanceType", "required field is missing")]
    problem = instance_type_problem(pool.instance_type, spec.cloud)
    if problem:
        return [*problems, Problem(f"{at}.instanceType", problem)]
    shape = catalog.INSTANCE_TYPES[pool.instance_type]
    if pool.gpus_per_node is not None and pool.gpus_per_node not in shape.gpu_counts:
        counts = " or ".join(str(c) for c in shape.gpu_counts)
        problems.append(
            Problem(f"{at}.gpusPerNode", f"{pool.instance_type} carries {counts} GPUs, got {pool.gpus_per_node}")
        )
    return problems


def instance_type_problem(name: str, cloud: Literal["aws", "gcp"]) -> str | None:
    """Why `name` cannot back an NVIDIA pool on `cloud`, or None when it can."""
    if catalog.family(name) in catalog.NOT_NVIDIA:
        return f"{name} has {catalog.NOT_NVIDIA[catalog.family(name)]}; pick an NVIDIA GPU type"
    shape = catalog.INSTANCE_TYPES.get(name)
    if shape is None:
        hint = _did_you_mean(name, catalog.instance_types(cloud))
        return f"{name!r} is not an NVIDIA GPU type in the {cloud} catalog{hint}"
    if shape.cloud != cloud:
        return f"{name} is a {shape.cloud} type, but this stack's cloud is {cloud}"
    return None


def _existing_pool_problems(pool: NodePoolSpec, at: str) -> list[Problem]:
    problems: list[Problem] = []
    if pool.instance_type is not None:
        problems.append(
            Problem(f"{at}.instanceType", "not for cloud: existing; describe the nodes with gpuModel and gpusPerNode")
        )
    if pool.gpu_model is None:
        problems.append(Problem(f"{at}.gpuModel", f"required for cloud: existing; one of {', '.join(catalog.GPU_MODELS)}"))
    elif pool.gpu_model not in catalog.GPU_MODELS:
        hint = _did_you_mean(pool.gpu_model, list(catalog.GPU_MODELS))
        problems.append(
            Problem(f"{at}.gpuModel", f"unknown GPU model {pool.gpu_model!r}{hint}; one of {', '.join(catalog.GPU_MODELS)}")
        )
    if pool.gpus_per_node is None:
        problems.append(Problem(f"{at}.gpusPerNode", "required for cloud: existing"))
    if not pool.node_selector:
        problems.append(Problem(f"{at}.nodeSelector", "required for cloud: existing: the labels that find these nodes"))
    if pool.min_nodes != pool.max_nodes:
        problems.append(
            Problem(f"{at}.maxNodes", f"existing nodes do not scale: set minNodes = maxNodes (the node count), got {pool.min_nodes} and {pool.max_nodes}")
        )
    if pool.capacity != "on-demand":
        problems.append(Problem(f"{at}.capacity", "existing nodes are not spot capacity: leave capacity unset"))
    return problems


def _sharing_problems(pool: NodePoolSpec, at: str) -> list[Problem]:
    sharing = pool.sharing
    at = f"{at}.sharing"
    problems: list[Problem] = []
    if sharing.mode in ("time-slicing", "mps"):
        if sharing.replicas is None:
            problems.append(Problem(f"{at}.replicas", f"required for mode {sharing.mode} (at least 2)"))
        elif sharing.replicas < 2:
            problems.append(Problem(f"{at}.replicas", f"expected at least 2 for mode {sharing.mode}, got {sharing.replicas}"))
    elif sharing.replicas is not None:
        problems.append(Problem(f"{at}.replicas", f"only for time-slicing and mps, not mode {sharing.mode}"))
    if sharing.mode != "mig":
        if sharing.profile is not None:
            problems.append(Problem(f"{at}.profile", f"only for mode mig, not mode {sharing.mode}"))
        return problems
    gpu = gpu_model_name(pool)
    if gpu is None:
        return problems
    profiles = catalog.GPU_MODELS[gpu].mig_profiles
    if not profiles:
        problems.append(Problem(f"{at}.mode", f"{gpu} GPUs have no MIG; use time-slicing or mps"))
    elif sharing.profile is None:
        problems.append(Problem(f"{at}.profile", f"required for mode mig; one of {', '.join(profiles)}"))
    elif sharing.profile not in profiles:
        problems.append(
            Problem(f"{at}.profile", f"{gpu} has no MIG profile {sharing.profile!r}; one of {', '.join(profiles)}")
        )
    return problems


def _policy_problems(policy: PolicySpec) -> list[Problem]:
    """An override names a known, overridable rule once, with a reason a reviewer can judge."""
    problems: list[Problem] = []
    seen: set[str] = set()
    for i, override in enumerate(policy.overrides):
        at = f"{_ROOT}.policy.overrides[{i}]"
        rule = rule_catalog.RULES_BY_ID.get(override.rule)
        if rule is None:
            hint = _did_you_mean(override.rule, list(rule_catalog.RULES_BY_ID))
            problems.append(Problem(f"{at}.rule", f"unknown policy rule {override.rule!r}{hint}"))
        elif not rule.overridable:
            problems.append(
                Problem(
                    f"{at}.rule",
                    f"{override.rule} cannot be overridden; overridable rules: {', '.join(rule_catalog.OVERRIDABLE)}",
                )
            )
        elif override.rule in seen:
            problems.append(Problem(f"{at}.rule", f"{override.rule} is overridden twice; keep one entry"))
        seen.add(override.rule)
        if not override.reason.strip():
            problems.append(Problem(f"{at}.reason", "must say why the rule does not apply to this stack"))
    return problems


def gpu_model_name(pool: NodePoolSpec) -> str | None:
    """The pool's GPU model, from its instance type or (existing clusters) its gpuModel."""
    if pool.instance_type is not None:
        shape = catalog.INSTANCE_TYPES.get(pool.instance_type)
        return shape.gpu if shape else None
    return pool.gpu_model if pool.gpu_model in catalog.GPU_MODELS else None


def stack_file_schema() -> dict[str, Any]:
    """JSON Schema of a whole stack file, for editors (`# yaml-language-server: $schema=`)."""
    platform = PlatformSpec.model_json_schema(by_alias=True)
    definitions = platform.pop("$defs", {})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "gpu-platform stack file (stacks/Pulumi.<stack>.yaml)",
        "type": "object",
        "properties": {
            "config": {
                "type": "object",
                "properties": {f"{CONFIG_NAMESPACE}:{CONFIG_KEY}": platform},
                "required": [f"{CONFIG_NAMESPACE}:{CONFIG_KEY}"],
            }
        },
        "$defs": definitions,
    }

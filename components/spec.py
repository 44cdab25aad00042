"""The platform spec: the one place user input is checked.

A stack file carries one structured key, `gpu-platform:platform`. It is parsed in two passes,
both of which collect every problem before reporting:

1. shape: types, required fields, unknown keys, simple bounds (pydantic, strict, no coercion);
2. rules: facts that need the catalog or several fields at once (`rule_problems`).

Anything downstream may assume a `PlatformSpec` is valid; nothing downstream re-checks input.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections import Counter
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from components import catalog, charts, rule_catalog

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
# EKS managed node group AMI types with NVIDIA drivers (EKS CreateNodegroup API, amiType).
AmiType = Literal[
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
    "BOTTLEROCKET_x86_64_NVIDIA",
    "BOTTLEROCKET_ARM_64_NVIDIA",
]
# Bottlerocket NVIDIA AMIs run their own NVIDIA device plugin; AL2023 NVIDIA AMIs ship none.
BOTTLEROCKET_AMI_TYPES: tuple[AmiType, ...] = ("BOTTLEROCKET_x86_64_NVIDIA", "BOTTLEROCKET_ARM_64_NVIDIA")
ARM64_AMI_TYPES: tuple[AmiType, ...] = ("AL2023_ARM_64_NVIDIA", "BOTTLEROCKET_ARM_64_NVIDIA")
DEFAULT_VPC_CIDR = "10.0.0.0/16"
ANYWHERE = "0.0.0.0/0"
ReleaseChannel = Literal["RAPID", "REGULAR", "STABLE"]
DriverVersion = Literal["DEFAULT", "LATEST"]


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
    # AWS only. The EKS AMI of the pool's nodes. Bottlerocket NVIDIA brings its own device plugin,
    # so a platform of Bottlerocket pools defaults `devicePlugin` to `managed`.
    ami_type: AmiType = "AL2023_x86_64_NVIDIA"
    # AWS only. Encrypted gp3 volume holding container images and local scratch, in GiB
    # (training images are 10-20 GiB; the default leaves room for a few plus scratch).
    root_volume_gib: int = Field(default=200, ge=20, le=16384, alias="rootVolumeGiB")
    # AWS only. EFA network interfaces and a cluster placement group (one zone) for multi-node
    # NCCL traffic; the instance type must support EFA.
    efa: bool = False

    # Fields only the AWS wing reads, as (stack file key, attribute); rejected elsewhere.
    AWS_ONLY_FIELDS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("amiType", "ami_type"),
        ("rootVolumeGiB", "root_volume_gib"),
        ("efa", "efa"),
    )
    # GCP only, below. The GPU driver GKE installs: DEFAULT is the version GKE pairs with the
    # node's GKE version and tests with it, and it moves with node upgrades; LATEST is the newest
    # GKE offers for that version, for a GPU generation or CUDA release DEFAULT does not cover yet.
    driver_version: DriverVersion = "DEFAULT"
    # A Compute Engine reservation the nodes must consume: its name, or
    # projects/<project>/reservations/<name> for one shared from another project.
    reservation: Optional[str] = None
    # Nodes placed close together (a compact placement policy) for lower latency between
    # them; GKE needs the pool in exactly one zone for it.
    compact_placement: bool = False
    # Pods here request several GPUs each. GKE's shared GPUs (time-sharing, MPS) give a pod at
    # most one, so such a pool may not share GPUs through GKE's device plugin.
    multi_gpu_training: bool = False


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


class TrainerSpec(_Spec):
    # `build`: build training_images/ and push it to the stack's registry (aws, gcp); any other
    # value: an existing image reference jobs use as is. None: jobs name their image.
    image: Optional[str] = None


class AwsNetworkSpec(_Spec):
    """Where the cluster lives: a new VPC (`vpcCidr`) or an existing one (`vpcId` + `subnetIds`)."""

    # CIDR of a new VPC (None: 10.0.0.0/16); split into one private and one public subnet per zone.
    vpc_cidr: Optional[str] = None
    # An existing VPC; its private subnets, by availability zone, go in `subnetIds`. They need
    # a NAT route, and the `kubernetes.io/role/internal-elb` tag for internal load balancers.
    vpc_id: Optional[str] = None
    subnet_ids: dict[str, str] = Field(default_factory=dict)

    @property
    def effective_vpc_cidr(self) -> str:
        return self.vpc_cidr or DEFAULT_VPC_CIDR


class AwsSystemNodesSpec(_Spec):
    """The small on-demand node group that runs add-ons (CoreDNS, autoscaler, Kueue)."""

    instance_type: str = "m6i.large"
    min_nodes: int = Field(default=2, ge=1)
    max_nodes: int = Field(default=3, ge=1)


class AwsSpec(_Spec):
    """Cloud-level settings of the AWS wing (cloud: aws only); every field has a default."""

    # Availability zones of a new VPC's subnets (at least two); empty: the region's first three.
    zones: list[str] = Field(default_factory=list)
    network: AwsNetworkSpec = Field(default_factory=AwsNetworkSpec)
    # IAM role or user ARNs that get cluster-admin access entries. The identity running
    # `pulumi up` is admin already (it creates the cluster): do not list it again.
    admins: list[str] = Field(default_factory=list)
    # Whether the API endpoint is reachable from the internet; None: yes in dev and staging,
    # no in prod. The private endpoint is always on (nodes use it).
    public_endpoint: Optional[bool] = None
    # Who may reach a public endpoint; empty: anyone (0.0.0.0/0), which prod does not allow.
    public_access_cidrs: list[str] = Field(default_factory=list)
    system_nodes: AwsSystemNodesSpec = Field(default_factory=AwsSystemNodesSpec)

    def endpoint_public(self, environment: Environment) -> bool:
        if self.public_endpoint is not None:
            return self.public_endpoint
        return environment != "prod"

    def endpoint_cidrs(self) -> list[str]:
        return list(self.public_access_cidrs) or [ANYWHERE]


class GcpExistingNetworkSpec(_Spec):
    """A VPC made elsewhere (e.g. a shared VPC). The wing then creates no network, router or NAT:
    the network must already give private nodes a way out (Cloud NAT)."""

    network: str
    subnetwork: str
    # Names of the subnetwork's secondary ranges for pods and services.
    pods_range: str
    services_range: str


class GcpCidrsSpec(_Spec):
    """Address ranges of the VPC the wing creates: nodes are the subnet's primary range, pods and
    services its secondary ranges. A /14 for pods holds 1024 nodes of 110 pods (a /24 each)."""

    nodes: str = "10.0.0.0/20"
    pods: str = "10.16.0.0/14"
    services: str = "10.20.0.0/20"


class GcpNetworkSpec(_Spec):
    # None: the wing creates a VPC from `cidrs`, with Cloud NAT for the private nodes.
    existing: Optional[GcpExistingNetworkSpec] = None
    cidrs: GcpCidrsSpec = Field(default_factory=GcpCidrsSpec)


class AuthorizedNetworkSpec(_Spec):
    """A source range that may reach the cluster's control plane (kubectl, CI)."""

    cidr: str
    name: str


class NodeAutoProvisioningSpec(_Spec):
    """GKE node auto-provisioning: new node pools for pods no declared pool fits.

    The limits are cluster totals: GKE counts the declared pools against them too, so they must
    cover the GPU pools at their maximum (the spec checks it) plus the system nodes.
    """

    enabled: bool = False
    max_cpu: Optional[int] = Field(default=None, ge=1)
    max_memory_gib: Optional[int] = Field(default=None, ge=1)
    # Maximum GPUs per GKE accelerator type (e.g. nvidia-l4: 16); auto-provisioning adds GPU
    # nodes only of the types listed.
    gpu_limits: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)


class SystemNodesSpec(_Spec):
    """The small CPU pool for cluster services (DNS, Kueue, JobSet, controllers), kept off GPUs."""

    machine_type: str = "e2-standard-4"
    min_nodes: int = Field(default=1, ge=1)
    max_nodes: int = Field(default=3, ge=1)


class GcpSpec(_Spec):
    """GKE settings (cloud: gcp only). The region comes from the stack's `gcp:region`."""

    # Regional: control plane replicated across the region's zones; zonal: one zone, cheaper.
    regional: bool = True
    # Zones the nodes run in, in the stack's region; pools may narrow them with their own
    # `zones`. Pick zones that offer the pools' GPUs (`gcloud compute accelerator-types list`).
    # On a zonal cluster the first zone is the cluster's location.
    zones: list[str] = Field(default_factory=list)
    release_channel: ReleaseChannel = "REGULAR"
    network: GcpNetworkSpec = Field(default_factory=GcpNetworkSpec)
    # Who may reach the control plane; empty: anyone with credentials (refused in prod).
    authorized_networks: list[AuthorizedNetworkSpec] = Field(default_factory=list)
    node_auto_provisioning: NodeAutoProvisioningSpec = Field(default_factory=NodeAutoProvisioningSpec)
    system_nodes: SystemNodesSpec = Field(default_factory=SystemNodesSpec)


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
    trainer: TrainerSpec = Field(default_factory=TrainerSpec)
    # cloud: aws only; None: every default of AwsSpec.
    aws: Optional[AwsSpec] = None
    # GKE settings; required for cloud: gcp (at least `zones`), refused elsewhere.
    gcp: Optional[GcpSpec] = None
    policy: PolicySpec = Field(default_factory=PolicySpec)

    @property
    def device_plugin(self) -> DevicePlugin:
        """The effective choice: exactly one nvidia.com/gpu advertiser per node.

        Bottlerocket NVIDIA nodes advertise GPUs themselves, so an AWS platform whose pools all
        run Bottlerocket defaults to `managed`; mixed AMI families are a spec error.
        """
        if self.device_plugin_choice is not None:
            return self.device_plugin_choice
        if self.cloud == "gcp":
            return "managed"
        if self.cloud == "aws" and all(p.ami_type in BOTTLEROCKET_AMI_TYPES for p in self.node_pools):
            return "managed"
        return "nvidia"

    @property
    def aws_settings(self) -> AwsSpec:
        """The `aws` section with its defaults filled in."""
        return self.aws or AwsSpec()


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


def parse_spec(raw: Any, source: str, region: str | None = None) -> PlatformSpec:
    """Validate the raw `gpu-platform:platform` value from the stack file named `source`.

    `region` is the stack's region for the spec's cloud (see `region_namespace`); zone rules
    check against it, and skip that check when it is None.
    """
    if raw is None:
        raise SpecError(source, [Problem(_ROOT, f"missing: set `{CONFIG_NAMESPACE}:{CONFIG_KEY}`")])
    try:
        spec = PlatformSpec.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(source, [_shape_problem(err) for err in exc.errors()]) from None
    problems = rule_problems(spec, region)
    if problems:
        raise SpecError(source, problems)
    return spec


def region_namespace(raw: Any) -> str | None:
    """The provider config namespace whose `region` the raw spec's cloud runs in (`aws`, `gcp`).

    The region is provider config (`aws:region`, `gcp:region`), not part of the spec, so both
    the program and the offline tools read it from there and hand it to `parse_spec`.
    """
    cloud = raw.get("cloud") if isinstance(raw, dict) else None
    return cloud if cloud in ("aws", "gcp") else None


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


def rule_problems(spec: PlatformSpec, region: str | None = None) -> list[Problem]:
    problems = _cluster_problems(spec) + _trainer_problems(spec)
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
    problems += _scheduling_problems(spec)
    problems += _monitoring_problems(spec)
    problems += aws_problems(spec, region)
    problems += gcp_problems(spec, region)
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


_IMAGE_REF = re.compile(r"^[a-z0-9]+([._/:-][a-zA-Z0-9_.-]+)*(@sha256:[0-9a-f]{64})?$")


def _trainer_problems(spec: PlatformSpec) -> list[Problem]:
    image = spec.trainer.image
    at = f"{_ROOT}.trainer.image"
    if image == "build" and spec.cloud == "existing":
        return [Problem(at, "`build` pushes to the stack's registry, which only aws and gcp stacks have; name an image")]
    if image is not None and image != "build" and not _IMAGE_REF.match(image):
        return [Problem(at, f"expected `build` or an image reference like registry/repo:tag, got {image!r}")]
    return []


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
    cluster_ok = not _dns_label_problems(spec.cluster.name, "")
    if cluster_ok and not problems and len(combined) > _MAX_NAME:
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


# --- AWS-only rules: the `aws` section, pool AMI/EFA/volume fields, zones in the region -----

_AWS_ZONE_SUFFIX = re.compile(r"^[a-z]$")
_IAM_PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")
_VPC_ID = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8,17}$")
# The AWS wing's own node group for add-ons; a pool of that name would collide with it.
AWS_SYSTEM_POOL = "system"
# A new VPC is cut into per-zone subnets; below /20 the private subnets (one pod IP each with
# the VPC CNI) get too small for GPU nodes full of pods.
_MAX_VPC_PREFIX = 20


def aws_problems(spec: PlatformSpec, region: str | None) -> list[Problem]:
    """Rules for the AWS wing; on other clouds, that no AWS-only field is set."""
    if spec.cloud != "aws":
        problems = [
            Problem(f"{_ROOT}.nodePools[{i}].{key}", f"only for cloud: aws, not {spec.cloud}")
            for i, pool in enumerate(spec.node_pools)
            for key, attr in NodePoolSpec.AWS_ONLY_FIELDS
            if attr in pool.model_fields_set
        ]
        if spec.aws is not None:
            problems.append(Problem(f"{_ROOT}.aws", f"only for cloud: aws, not {spec.cloud}"))
        return problems
    settings = spec.aws_settings
    at = f"{_ROOT}.aws"
    problems = _aws_network_problems(settings, region, at)
    problems += _aws_endpoint_problems(spec, settings, at)
    problems += [
        Problem(f"{at}.admins[{i}]", f"expected an IAM role or user ARN (arn:aws:iam::<account>:role/<name>), got {arn!r}")
        for i, arn in enumerate(settings.admins)
        if not _IAM_PRINCIPAL_ARN.match(arn)
    ]
    nodes = settings.system_nodes
    if nodes.max_nodes < nodes.min_nodes:
        problems.append(
            Problem(f"{at}.systemNodes.maxNodes", f"must be >= minNodes ({nodes.min_nodes}), got {nodes.max_nodes}")
        )
    network_zones = _aws_network_zones(settings)
    for i, pool in enumerate(spec.node_pools):
        problems += _aws_pool_problems(pool, f"{_ROOT}.nodePools[{i}]", region, network_zones)
    problems += _aws_device_plugin_problems(spec)
    return problems


def _aws_network_zones(settings: AwsSpec) -> list[str] | None:
    """The zones the cluster has subnets in, when the stack file says (None: chosen at deploy)."""
    if settings.network.subnet_ids:
        return sorted(settings.network.subnet_ids)
    return list(settings.zones) or None


def _zone_problem(zone: str, region: str | None) -> str | None:
    """Why `zone` cannot be used in `region` (None when it can, or when the region is unknown)."""
    if region is None or (zone.startswith(region) and _AWS_ZONE_SUFFIX.match(zone[len(region):])):
        return None
    return (
        f"{zone!r} is not an availability zone of region {region} (stack file key aws:region); "
        f"zones there are named {region}a, {region}b, ..."
    )


def _zone_problems(zones: list[str], region: str | None, at: str) -> list[Problem]:
    problems: list[Problem] = []
    for i, zone in enumerate(zones):
        if zone in zones[:i]:
            problems.append(Problem(f"{at}[{i}]", f"duplicate zone {zone!r}"))
        message = _zone_problem(zone, region)
        if message:
            problems.append(Problem(f"{at}[{i}]", message))
    return problems


def _aws_network_problems(settings: AwsSpec, region: str | None, at: str) -> list[Problem]:
    network = settings.network
    problems = _zone_problems(settings.zones, region, f"{at}.zones")
    if settings.zones and len(set(settings.zones)) < 2:
        problems.append(Problem(f"{at}.zones", "EKS needs subnets in at least two zones; list two or more"))
    if network.vpc_id is None:
        if network.subnet_ids:
            problems.append(Problem(f"{at}.network.subnetIds", "only with vpcId (an existing VPC); a new VPC gets its own subnets"))
        if network.vpc_cidr is not None:
            problems += _vpc_cidr_problems(network.vpc_cidr, f"{at}.network.vpcCidr")
        return problems
    if not _VPC_ID.match(network.vpc_id):
        problems.append(Problem(f"{at}.network.vpcId", f"expected a VPC id (vpc-0123abcd), got {network.vpc_id!r}"))
    if network.vpc_cidr is not None:
        problems.append(Problem(f"{at}.network.vpcCidr", "only for a new VPC; an existing VPC (vpcId) keeps its CIDR"))
    if settings.zones:
        problems.append(Problem(f"{at}.zones", "not with vpcId: the zones are the keys of network.subnetIds"))
    if len(network.subnet_ids) < 2:
        problems.append(
            Problem(f"{at}.network.subnetIds", "required with vpcId: private subnet ids by zone, in at least two zones")
        )
    for zone, subnet in sorted(network.subnet_ids.items()):
        message = _zone_problem(zone, region)
        if message:
            problems.append(Problem(f"{at}.network.subnetIds.{zone}", message))
        if not _SUBNET_ID.match(subnet):
            problems.append(
                Problem(f"{at}.network.subnetIds.{zone}", f"expected a subnet id (subnet-0123abcd), got {subnet!r}")
            )
    return problems


def _vpc_cidr_problems(cidr: str, at: str) -> list[Problem]:
    try:
        net = ipaddress.IPv4Network(cidr)
    except ValueError:
        return [Problem(at, f"expected an IPv4 network such as 10.0.0.0/16, got {cidr!r}")]
    if net.prefixlen > _MAX_VPC_PREFIX:
        return [Problem(at, f"expected a /{_MAX_VPC_PREFIX} or larger network (pods take one VPC IP each), got /{net.prefixlen}")]
    if not net.is_private:
        return [Problem(at, f"expected a private range (10/8, 172.16/12, 192.168/16), got {cidr}")]
    return []


def _aws_endpoint_problems(spec: PlatformSpec, settings: AwsSpec, at: str) -> list[Problem]:
    problems: list[Problem] = []
    cidrs = settings.public_access_cidrs
    for i, cidr in enumerate(cidrs):
        try:
            ipaddress.IPv4Network(cidr)
        except ValueError:
            problems.append(Problem(f"{at}.publicAccessCidrs[{i}]", f"expected an IPv4 CIDR such as 203.0.113.0/24, got {cidr!r}"))
    public = settings.endpoint_public(spec.environment)
    if not public and cidrs:
        problems.append(Problem(f"{at}.publicAccessCidrs", "only with publicEndpoint: true; the endpoint is private"))
    if public and spec.environment == "prod" and ANYWHERE in settings.endpoint_cidrs():
        problems.append(
            Problem(
                f"{at}.publicEndpoint",
                "prod must not expose the Kubernetes API to the whole internet: set publicEndpoint: false "
                "(run `pulumi up` from inside the VPC) or list your CI/VPN ranges in publicAccessCidrs",
            )
        )
    return problems


def _aws_pool_problems(pool: NodePoolSpec, at: str, region: str | None, network_zones: list[str] | None) -> list[Problem]:
    problems = _zone_problems(pool.zones, region, f"{at}.zones")
    if pool.name == AWS_SYSTEM_POOL:
        problems.append(Problem(f"{at}.name", f"{AWS_SYSTEM_POOL!r} is the add-on node group's name on aws; pick another"))
    if pool.zones and network_zones is None:
        problems.append(
            Problem(f"{at}.zones", "list the platform's zones in platform.aws.zones too, so the VPC has subnets there")
        )
    elif network_zones is not None:
        problems += [
            Problem(f"{at}.zones[{i}]", f"{zone!r} is not one of the cluster's zones ({', '.join(network_zones)})")
            for i, zone in enumerate(pool.zones)
            if zone not in network_zones and _zone_problem(zone, region) is None
        ]
    shape = catalog.INSTANCE_TYPES.get(pool.instance_type or "")
    if pool.efa:
        if shape is not None and not shape.fast_interconnect:
            efa_types = ", ".join(t for t in catalog.instance_types("aws") if catalog.INSTANCE_TYPES[t].fast_interconnect)
            problems.append(Problem(f"{at}.efa", f"{shape.name} has no EFA; EFA types: {efa_types}"))
        if len(pool.zones) > 1:
            problems.append(
                Problem(f"{at}.zones", "an EFA pool runs in one cluster placement group, which lives in one zone: list one zone")
            )
    if pool.ami_type in ARM64_AMI_TYPES and shape is not None:
        problems.append(
            Problem(f"{at}.amiType", f"{pool.ami_type} runs on Arm (Graviton) instances; {shape.name} is x86_64: use the x86_64 AMI type")
        )
    if pool.ami_type in BOTTLEROCKET_AMI_TYPES and pool.sharing.mode != "none":
        problems.append(
            Problem(
                f"{at}.sharing.mode",
                f"GPU sharing is configured through the NVIDIA device plugin's named configs, which Bottlerocket's "
                f"built-in plugin does not read; use amiType AL2023_x86_64_NVIDIA for {pool.sharing.mode} pools",
            )
        )
    return problems


def _aws_device_plugin_problems(spec: PlatformSpec) -> list[Problem]:
    """Exactly one nvidia.com/gpu advertiser per node: the AMI family and devicePlugin must agree."""
    bottlerocket = [p.ami_type in BOTTLEROCKET_AMI_TYPES for p in spec.node_pools]
    choice = spec.device_plugin_choice
    if choice is None and any(bottlerocket) and not all(bottlerocket):
        return [
            Problem(
                f"{_ROOT}.nodePools",
                "Bottlerocket NVIDIA pools advertise GPUs themselves and AL2023 NVIDIA pools need the NVIDIA "
                "device plugin: use one AMI family for all pools",
            )
        ]
    if choice == "nvidia":
        reason = "Bottlerocket NVIDIA nodes run their own device plugin (each GPU would be advertised twice)"
        clashes = bottlerocket
    elif choice == "managed":
        reason = "AL2023 NVIDIA nodes have no device plugin of their own (no GPU would be advertised)"
        clashes = [not b for b in bottlerocket]
    else:
        return []
    return [
        Problem(f"{_ROOT}.nodePools[{i}].amiType", f"devicePlugin: {choice} does not fit {pool.ami_type}: {reason}")
        for i, pool in enumerate(spec.node_pools)
        if clashes[i]
    ]


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


# --- scheduling and monitoring: priority tiers, teams and their quotas -----------------------

# PriorityClass limits (Kubernetes API): user classes may not exceed 1e9, values are int32, and
# the `system-` prefix is reserved for the built-in classes.
MAX_PRIORITY = 1_000_000_000
MIN_PRIORITY = -2_147_483_648
RESERVED_PRIORITY_PREFIX = "system-"
# WorkloadPriorityClass `description` maxLength (Kueue v1beta2 CRD).
MAX_TIER_DESCRIPTION = 2048
# Namespaces a team may not take: Kubernetes' own, and those the platform installs into.
# `default` hosts the implicit team of a stack without teams (components.naming.DEFAULT_TEAM).
RESERVED_NAMESPACES = frozenset(
    {"default", "kube-system", "kube-public", "kube-node-lease", *(chart.namespace for chart in charts.CHARTS)}
)


def _scheduling_problems(spec: PlatformSpec) -> list[Problem]:
    at = f"{_ROOT}.scheduling"
    problems: list[Problem] = []
    if spec.scheduling.priority_tiers is not None:
        problems += _tier_problems(spec.scheduling.priority_tiers, f"{at}.priorityTiers")
    problems += _team_problems(spec, f"{at}.teams")
    return problems


def _tier_problems(tiers: list[PriorityTierSpec], at: str) -> list[Problem]:
    if not tiers:
        return [Problem(at, "must list at least one tier; leave priorityTiers out for the platform's default tiers")]
    problems: list[Problem] = []
    first_name: dict[str, int] = {}
    first_value: dict[int, str] = {}
    default_tier: str | None = None
    for i, tier in enumerate(tiers):
        here = f"{at}[{i}]"
        problems += _dns_label_problems(tier.name, f"{here}.name")
        if tier.name.startswith(RESERVED_PRIORITY_PREFIX):
            problems.append(
                Problem(f"{here}.name", f"{tier.name!r}: names starting with {RESERVED_PRIORITY_PREFIX!r} are reserved for Kubernetes' own classes")
            )
        if tier.name in first_name:
            problems.append(Problem(f"{here}.name", f"duplicate tier name {tier.name!r}: tier names must be unique"))
        first_name.setdefault(tier.name, i)
        if tier.value > MAX_PRIORITY:
            problems.append(
                Problem(f"{here}.value", f"must be at most {MAX_PRIORITY} (higher values are reserved for system classes), got {tier.value}")
            )
        elif tier.value < MIN_PRIORITY:
            problems.append(Problem(f"{here}.value", f"must be at least {MIN_PRIORITY}, got {tier.value}"))
        if tier.value in first_value:
            problems.append(
                Problem(
                    f"{here}.value",
                    f"{tier.value} is already the value of tier {first_value[tier.value]!r}: tiers must rank strictly, give each its own value",
                )
            )
        first_value.setdefault(tier.value, tier.name)
        if tier.global_default:
            if default_tier is not None:
                problems.append(
                    Problem(f"{here}.globalDefault", f"only one tier may be the global default, and {default_tier!r} already is")
                )
            default_tier = default_tier or tier.name
        if len(tier.description) > MAX_TIER_DESCRIPTION:
            problems.append(
                Problem(f"{here}.description", f"at most {MAX_TIER_DESCRIPTION} characters, got {len(tier.description)}")
            )
    return problems


def _team_problems(spec: PlatformSpec, at: str) -> list[Problem]:
    problems: list[Problem] = []
    names = Counter(team.name for team in spec.scheduling.teams)
    pool_names = [pool.name for pool in spec.node_pools]
    for i, team in enumerate(spec.scheduling.teams):
        here = f"{at}[{i}]"
        problems += _dns_label_problems(team.name, f"{here}.name")
        if names[team.name] > 1:
            problems.append(Problem(f"{here}.name", f"duplicate team name {team.name!r}: each team gets a namespace of its own"))
        if team.name in RESERVED_NAMESPACES:
            problems.append(
                Problem(f"{here}.name", f"{team.name!r} is a namespace Kubernetes or the platform already uses; pick another team name")
            )
        for pool, slots in team.quotas.items():
            if pool not in pool_names:
                hint = _did_you_mean(pool, pool_names)
                problems.append(
                    Problem(f"{here}.quotas.{pool}", f"no pool named {pool!r}{hint}; pools: {', '.join(pool_names)}")
                )
            if slots < 0:
                problems.append(Problem(f"{here}.quotas.{pool}", f"must be >= 0 GPU slots, got {slots}"))
    return problems + _quota_capacity_problems(spec, at)


def _quota_capacity_problems(spec: PlatformSpec, at: str) -> list[Problem]:
    """Teams may not be promised more GPU slots on a pool than it holds at its largest."""
    # Pools derive from a valid pool spec; imported here because components.pools builds on
    # this module.
    from components.pools import derive_pool

    problems: list[Problem] = []
    for pool_spec in spec.node_pools:
        asks = {team.name: team.quotas[pool_spec.name] for team in spec.scheduling.teams if team.quotas.get(pool_spec.name, 0) > 0}
        # A pool with problems of its own has no known capacity; those problems are reported.
        if not asks or _pool_hardware_problems(spec, pool_spec, "") or _sharing_problems(pool_spec, ""):
            continue
        pool = derive_pool(pool_spec)
        total = sum(asks.values())
        if total > pool.max_slots:
            shape = f"{pool.max_nodes} nodes x {pool.gpus_per_node} GPUs"
            if pool.slots_per_gpu > 1:
                shape += f" x {pool.slots_per_gpu} {pool.sharing_mode} slots"
            split = ", ".join(f"{team} {slots}" for team, slots in asks.items())
            problems.append(
                Problem(
                    at,
                    f"teams ask for {total} GPU slots on pool {pool.name!r} ({split}), which holds {pool.max_slots}"
                    f" ({shape}); lower the quotas or raise the pool's maxNodes",
                )
            )
    return problems


def _monitoring_problems(spec: PlatformSpec) -> list[Problem]:
    if spec.monitoring.service_monitor and not spec.monitoring.dcgm:
        return [
            Problem(f"{_ROOT}.monitoring.serviceMonitor", "scrapes the DCGM exporter: needs dcgm: true")
        ]
    return []


# --- GCP-only rules -------------------------------------------------------------------------

_GCP = f"{_ROOT}.gcp"
# Pool fields only the GCP wing reads: (attribute, stack file key).
_GCP_POOL_FIELDS = (
    ("driver_version", "driverVersion"),
    ("reservation", "reservation"),
    ("compact_placement", "compactPlacement"),
    ("multi_gpu_training", "multiGpuTraining"),
)
# A zone is `<region>-<letter>` (Compute Engine regions and zones page).
_GCP_ZONE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
# GKE node pool names: 1-40 characters, starting with a letter (GKE node pool API).
_GKE_POOL_NAME_MAX = 40
# Service account ids are 6-30 characters (IAM API); the wing names two `<cluster>-trainer`
# and `<cluster>-nodes`, so the cluster name gets 30 - len("-trainer").
_GKE_CLUSTER_NAME_MAX = 30 - len("-trainer")
# The GKE name of the wing's CPU pool, so no GPU pool may take it.
GKE_SYSTEM_POOL = "system"
# GKE accepts 2-48 clients per shared GPU (GKE GPU sharing: time-sharing and MPS pages).
_GKE_MAX_SHARED_CLIENTS = 48


def gcp_problems(spec: PlatformSpec, region: str | None) -> list[Problem]:
    """GKE rules, and GCP-only settings refused on other clouds."""
    if spec.cloud != "gcp":
        problems = [
            Problem(f"{_ROOT}.nodePools[{i}].{key}", f"only for cloud: gcp, not {spec.cloud}")
            for i, pool in enumerate(spec.node_pools)
            for field, key in _GCP_POOL_FIELDS
            if field in pool.model_fields_set
        ]
        if spec.gcp is not None:
            problems.insert(0, Problem(_GCP, f"only for cloud: gcp, not {spec.cloud}"))
        return problems
    if spec.gcp is None:
        return [Problem(_GCP, "required for cloud: gcp (at least `zones`: where the GPU nodes run)")]
    gcp = spec.gcp
    problems = _gke_cluster_name_problems(spec.cluster.name)
    problems += _gcp_zone_problems(gcp.zones, f"{_GCP}.zones", region)
    if not gcp.zones:
        problems.append(Problem(f"{_GCP}.zones", "required: the zones the nodes run in; pick zones that offer the pools' GPUs"))
    problems += _gcp_network_problems(gcp.network)
    problems += _authorized_network_problems(spec, gcp.authorized_networks)
    problems += _node_auto_provisioning_problems(spec, gcp.node_auto_provisioning)
    if gcp.system_nodes.max_nodes < gcp.system_nodes.min_nodes:
        problems.append(
            Problem(
                f"{_GCP}.systemNodes.maxNodes",
                f"must be >= minNodes ({gcp.system_nodes.min_nodes}), got {gcp.system_nodes.max_nodes}",
            )
        )
    for i, pool in enumerate(spec.node_pools):
        problems += _gke_pool_problems(spec, gcp, pool, f"{_ROOT}.nodePools[{i}]", region)
    return problems


def _gke_cluster_name_problems(name: str) -> list[Problem]:
    if not _DNS_LABEL.match(name):
        return []
    if not name[0].isalpha() or len(name) > _GKE_CLUSTER_NAME_MAX:
        return [
            Problem(
                f"{_ROOT}.cluster.name",
                f"on gcp: start with a letter and use at most {_GKE_CLUSTER_NAME_MAX} characters "
                f"(service account ids '<name>-trainer' must fit in 30), got {name!r}",
            )
        ]
    return []


def _gcp_zone_problems(zones: list[str], path: str, region: str | None) -> list[Problem]:
    problems: list[Problem] = []
    for j, zone in enumerate(zones):
        if not _GCP_ZONE.match(zone):
            problems.append(Problem(f"{path}[{j}]", f"expected a GCP zone like us-central1-a, got {zone!r}"))
        elif region is not None and zone.rsplit("-", 1)[0] != region:
            problems.append(Problem(f"{path}[{j}]", f"zone {zone} is not in the stack's region {region} (gcp:region)"))
    duplicates = sorted(zone for zone, count in Counter(zones).items() if count > 1)
    if duplicates:
        problems.append(Problem(path, f"duplicate zones: {', '.join(duplicates)}"))
    return problems


def _gke_pool_problems(
    spec: PlatformSpec, gcp: GcpSpec, pool: NodePoolSpec, at: str, region: str | None
) -> list[Problem]:
    problems = _gcp_zone_problems(pool.zones, f"{at}.zones", region)
    if pool.name == GKE_SYSTEM_POOL:
        problems.append(Problem(f"{at}.name", f"'{GKE_SYSTEM_POOL}' is the GKE name of the platform's CPU pool; pick another"))
    elif _DNS_LABEL.match(pool.name) and (len(pool.name) > _GKE_POOL_NAME_MAX or not pool.name[0].isalpha()):
        problems.append(
            Problem(f"{at}.name", f"on gcp: start with a letter and use at most {_GKE_POOL_NAME_MAX} characters (GKE node pool names), got {pool.name!r}")
        )
    if pool.compact_placement and len(pool.zones or gcp.zones) != 1:
        zones = ", ".join(pool.zones or gcp.zones) or "none"
        problems.append(
            Problem(f"{at}.compactPlacement", f"needs the pool in exactly one zone (set the pool's zones to one), got {zones}")
        )
    if spec.device_plugin != "managed" or pool.sharing.mode not in ("time-slicing", "mps"):
        return problems
    if pool.multi_gpu_training:
        problems.append(
            Problem(
                f"{at}.sharing.mode",
                f"{pool.sharing.mode} through GKE's device plugin gives each pod at most one GPU, but this pool "
                "is marked multiGpuTraining; drop the sharing, or set devicePlugin: nvidia",
            )
        )
    if pool.sharing.replicas is not None and pool.sharing.replicas > _GKE_MAX_SHARED_CLIENTS:
        problems.append(
            Problem(f"{at}.sharing.replicas", f"GKE shares a GPU between at most {_GKE_MAX_SHARED_CLIENTS} pods, got {pool.sharing.replicas}")
        )
    return problems


def _cidr_problem(value: str) -> str | None:
    try:
        ipaddress.IPv4Network(value)
    except ValueError:
        return f"expected an IPv4 CIDR block like 10.0.0.0/20, got {value!r}"
    return None


def _gcp_network_problems(network: GcpNetworkSpec) -> list[Problem]:
    at = f"{_GCP}.network"
    if network.existing is not None:
        if "cidrs" in network.model_fields_set:
            return [Problem(f"{at}.cidrs", "only when the wing creates the network; an existing one brings its own ranges")]
        return []
    problems: list[Problem] = []
    ranges: dict[str, ipaddress.IPv4Network] = {}
    for key in ("nodes", "pods", "services"):
        value: str = getattr(network.cidrs, key)
        problem = _cidr_problem(value)
        if problem:
            problems.append(Problem(f"{at}.cidrs.{key}", problem))
            continue
        block = ipaddress.IPv4Network(value)
        if not block.is_private:
            problems.append(Problem(f"{at}.cidrs.{key}", f"expected a private (RFC 1918) range, got {value}"))
        for other, other_block in ranges.items():
            if block.overlaps(other_block):
                problems.append(Problem(f"{at}.cidrs.{key}", f"{value} overlaps cidrs.{other} ({other_block})"))
        ranges[key] = block
    return problems


def _authorized_network_problems(spec: PlatformSpec, networks: list[AuthorizedNetworkSpec]) -> list[Problem]:
    at = f"{_GCP}.authorizedNetworks"
    if spec.environment == "prod" and not networks:
        return [Problem(at, "required in prod: the CIDR blocks that may reach the control plane (your office, VPN, CI)")]
    problems: list[Problem] = []
    for j, network in enumerate(networks):
        problem = _cidr_problem(network.cidr)
        if problem:
            problems.append(Problem(f"{at}[{j}].cidr", problem))
        elif spec.environment == "prod" and ipaddress.IPv4Network(network.cidr).prefixlen == 0:
            problems.append(Problem(f"{at}[{j}].cidr", f"{network.cidr} opens the control plane to the whole internet; not in prod"))
    return problems


def _node_auto_provisioning_problems(spec: PlatformSpec, nap: NodeAutoProvisioningSpec) -> list[Problem]:
    at = f"{_GCP}.nodeAutoProvisioning"
    accelerators = sorted({t.gke_accelerator for t in catalog.INSTANCE_TYPES.values() if t.cloud == "gcp"})
    problems = [
        Problem(f"{at}.gpuLimits.{name}", f"unknown GKE accelerator type{_did_you_mean(name, accelerators)}; one of {', '.join(accelerators)}")
        for name in nap.gpu_limits
        if name not in accelerators
    ]
    if not nap.enabled:
        problems += [
            Problem(f"{at}.{key}", "only with enabled: true")
            for field, key in (("max_cpu", "maxCpu"), ("max_memory_gib", "maxMemoryGib"), ("gpu_limits", "gpuLimits"))
            if field in nap.model_fields_set
        ]
        return problems
    needs = _declared_pool_maxima(spec)
    for value, key, need, unit in (
        (nap.max_cpu, "maxCpu", needs.vcpus, "vCPUs"),
        (nap.max_memory_gib, "maxMemoryGib", needs.memory_gib, "GiB"),
    ):
        if value is None:
            problems.append(Problem(f"{at}.{key}", "required with enabled: true (a cluster total GKE needs for auto-provisioning)"))
        elif value < need:
            problems.append(
                Problem(f"{at}.{key}", f"at least {need} {unit}: GKE counts the GPU pools at their maximum against it, got {value}")
            )
    for accelerator, gpus in sorted(needs.gpus.items()):
        have = nap.gpu_limits.get(accelerator, 0)
        if have < gpus:
            problems.append(
                Problem(
                    f"{at}.gpuLimits.{accelerator}",
                    f"at least {gpus}: GKE counts the GPU pools at their maximum against it, got {have}",
                )
            )
    return problems


@dataclass(frozen=True)
class _PoolMaxima:
    vcpus: int
    memory_gib: int
    # GPUs per GKE accelerator type.
    gpus: dict[str, int]


def _declared_pool_maxima(spec: PlatformSpec) -> _PoolMaxima:
    """What every GPU pool holds at maxNodes (catalog shapes)."""
    vcpus = memory = 0
    gpus: Counter[str] = Counter()
    for pool in spec.node_pools:
        shape = catalog.INSTANCE_TYPES.get(pool.instance_type or "")
        if shape is None:
            continue
        vcpus += shape.vcpus * pool.max_nodes
        memory += shape.memory_gib * pool.max_nodes
        gpus[shape.gke_accelerator] += (pool.gpus_per_node or shape.gpus_per_node) * pool.max_nodes
    return _PoolMaxima(vcpus, memory, dict(gpus))


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

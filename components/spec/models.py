"""The platform spec's shape: every key a stack file may hold, its type and its default.

Pydantic models, strict (no coercion), camelCase, closed (unknown keys are errors), frozen.
Rules that need the catalog or several fields at once live beside them (the *_rules modules).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from components.facts.aws import BOTTLEROCKET_AMI_TYPES, AmiType
from components.facts.capacity import RESERVED, Way
from components.facts.catalog import DEFAULT_KUBERNETES_VERSION
from components.facts.limits import INT32_MAX

CONFIG_NAMESPACE = "gpu-platform"
CONFIG_KEY = "platform"


Cloud = Literal["aws", "gcp", "existing"]
Environment = Literal["dev", "staging", "prod"]
Capacity = Literal["on-demand", "spot"]
SharingMode = Literal["none", "time-slicing", "mps", "mig"]
DevicePlugin = Literal["nvidia", "managed", "none"]
PrometheusChoice = Literal["kube-prometheus-stack", "amp", "managed", "none"]
PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]
DEFAULT_VPC_CIDR = "10.0.0.0/16"
ANYWHERE = "0.0.0.0/0"
ReleaseChannel = Literal["RAPID", "REGULAR", "STABLE"]
# EKS upgrade policy (CreateCluster upgradePolicy.supportType): STANDARD upgrades the cluster when
# its version leaves standard support; EXTENDED keeps it there, at extended-support prices.
SupportType = Literal["STANDARD", "EXTENDED"]
DriverVersion = Literal["DEFAULT", "LATEST"]
# Who adds and removes the AWS GPU nodes (components/aws/karpenter.py; docs/aws.md, "Provisioners").
Provisioner = Literal["cluster-autoscaler", "karpenter"]


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
    # The older spelling of `provisioning` (on-demand or spot), kept for existing stack files.
    capacity: Capacity = "on-demand"
    # How the pool's nodes are obtained (components.facts.capacity): on-demand, spot, reservation,
    # capacity-block (AWS), flex-start or queued (GKE). None: `capacity`, or `reservation` when the
    # pool names one. The instance type must be sold that way; the spec lists the ways that work.
    provisioning: Optional[Way] = None
    # The reservation the nodes consume (provisioning reservation or capacity-block). GCP: a
    # Compute Engine reservation's name, or projects/<project>/reservations/<name> for one shared
    # from another project. AWS: an On-Demand Capacity Reservation or Capacity Block id
    # (cr-0123456789abcdef0), or the ARN of a resource group of reservations.
    reservation: Optional[str] = None
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

    # GCP only, below. The GPU driver GKE installs: DEFAULT is the version GKE pairs with the
    # node's GKE version and tests with it, and it moves with node upgrades; LATEST is the newest
    # GKE offers for that version, for a GPU generation or CUDA release DEFAULT does not cover yet.
    driver_version: DriverVersion = "DEFAULT"
    # Nodes placed close together (a compact placement policy) for lower latency between
    # them; GKE needs the pool in exactly one zone for it.
    compact_placement: bool = False
    # Pods here request several GPUs each. GKE's shared GPUs (time-sharing, MPS) give a pod at
    # most one, so such a pool may not share GPUs through GKE's device plugin.
    multi_gpu_training: bool = False
    # GPUDirect pools only: which run of /24s of the GPU subnet block the pool's GPU subnets take
    # (components.pools). Unset: derived from the pool's name, so adding, removing or reordering
    # pools never moves another pool's subnets; set it where two pools' names land on one run.
    gpu_subnet_slot: int | None = Field(default=None, ge=0, le=15)

    @property
    def way(self) -> Way:
        """How the nodes are obtained: `provisioning`, else `capacity`; a named reservation without
        either means consuming it (how GKE pools asked for one before `provisioning` existed)."""
        if self.provisioning is not None:
            return self.provisioning
        if self.capacity == "spot":
            return "spot"
        return "reservation" if self.reservation is not None else "on-demand"

    @property
    def reserved(self) -> bool:
        return self.way in RESERVED


class ClusterSpec(_Spec):
    name: str
    # In standard support on both clouds at the pins' date (components.facts.catalog).
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    # kubeconfig context of an existing cluster (cloud: existing only).
    context: Optional[str] = None
    # EKS and GKE deletion protection: the cloud refuses to delete the cluster while it is on.
    # None: on in prod, off elsewhere. Turn it off (and `pulumi up`) before tearing a stack down.
    deletion_protection: Optional[bool] = None

    def deletion_protected(self, environment: Environment) -> bool:
        if self.deletion_protection is not None:
            return self.deletion_protection
        return environment == "prod"


class PriorityTierSpec(_Spec):
    """A PriorityClass (and its Kueue WorkloadPriorityClass twin) jobs pick by name."""

    name: str
    value: int
    # Kueue preempts; the kube-scheduler must not (components.kubernetes.tiers).
    preemption_policy: PreemptionPolicy = "Never"
    global_default: bool = False
    description: str = ""


class TeamSpec(_Spec):
    """A team: a namespace of its own, a GPU quota per pool (in schedulable GPU slots), the people
    who may run jobs there and a cloud identity of its own (components.tenancy)."""

    name: str
    quotas: dict[str, int] = Field(default_factory=dict)
    # Who may run jobs in the team's namespace, and only there: IAM role or user ARNs on aws,
    # `user:<email>` or `group:<email>` on gcp, `user:<name>` or `group:<name>` (Kubernetes
    # subjects as the cluster's authenticator names them) on existing clusters.
    members: list[str] = Field(default_factory=list)


class FairSharingSpec(_Spec):
    """Kueue fair sharing: idle quota is lent in proportion to weights, and a team above its fair
    share is preempted first (Kueue docs, "Fair Sharing")."""

    enabled: bool = False
    # Per team name; a team not listed weighs 1.
    weights: dict[str, Annotated[int, Field(ge=1, le=1000)]] = Field(default_factory=dict)


class SchedulingSpec(_Spec):
    # None: the platform's default tiers (components.kubernetes).
    priority_tiers: Optional[list[PriorityTierSpec]] = None
    teams: list[TeamSpec] = Field(default_factory=list)
    fair_sharing: FairSharingSpec = Field(default_factory=FairSharingSpec)


class MonitoringSpec(_Spec):
    dcgm: bool = True
    # Only where the Prometheus Operator's CRDs are installed.
    service_monitor: bool = False


class ObservabilitySpec(_Spec):
    """Where metrics are stored and shown (docs/observability.md).

    `prometheus`: kube-prometheus-stack (the chart, in the cluster), amp (the chart, remote
    writing to an Amazon Managed Service for Prometheus workspace; AWS only), managed (Google
    Cloud Managed Service for Prometheus; GKE only) or none. None: managed on gcp, the chart
    elsewhere. Grafana runs only with the chart (it reads the chart's Prometheus).
    """

    prometheus: Optional[PrometheusChoice] = None
    # Grafana with the platform's dashboards; None: on wherever the chart runs (GKE managed
    # collection shows metrics in Cloud Monitoring instead).
    grafana: Optional[bool] = None
    # How long the in-cluster Prometheus keeps samples (Prometheus duration: 15d, 12h).
    retention: str = Field(default="15d", pattern=r"^[0-9]+(ms|s|m|h|d|w|y)$")
    # Alert thresholds (docs/observability.md, "Alerts").
    idle_gpu_minutes: int = Field(default=30, ge=5, le=1440)
    goodput_threshold: float = Field(default=0.8, gt=0, lt=1)
    # Minutes a workload may pend before the alert, per priority tier name; a tier not listed
    # uses `pendingMinutes`.
    pending_minutes: int = Field(default=60, ge=1, le=10080)
    pending_minutes_per_tier: dict[str, Annotated[int, Field(ge=1, le=10080)]] = Field(default_factory=dict)

    def backend(self, cloud: Cloud) -> PrometheusChoice:
        if self.prometheus is not None:
            return self.prometheus
        return "managed" if cloud == "gcp" else "kube-prometheus-stack"

    def grafana_on(self, cloud: Cloud) -> bool:
        if self.grafana is not None:
            return self.grafana
        return self.runs_chart(cloud)

    def runs_chart(self, cloud: Cloud) -> bool:
        """kube-prometheus-stack runs in the cluster: alone, or remote writing to AMP."""
        return self.backend(cloud) in ("kube-prometheus-stack", "amp")


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


class AwsKarpenterSpec(_Spec):
    """Settings of Karpenter's pools (aws.provisioner: karpenter)."""

    # The EC2NodeClasses' AMI alias, e.g. al2023@v20240807 to pin a release in prod; None:
    # al2023@latest (components.facts.karpenter.AMI_ALIAS).
    ami_alias: Optional[str] = None


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
    # What EKS does when the cluster's version leaves standard support (see SupportType).
    support_type: SupportType = "STANDARD"
    # Who provisions the GPU nodes: the cluster-autoscaler sizing one managed node group per pool,
    # or Karpenter launching them from a NodePool per pool (EFA pools stay on node groups).
    provisioner: Provisioner = "cluster-autoscaler"
    karpenter: AwsKarpenterSpec = Field(default_factory=AwsKarpenterSpec)

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
    max_cpu: Optional[int] = Field(default=None, ge=1, le=INT32_MAX)
    max_memory_gib: Optional[int] = Field(default=None, ge=1, le=INT32_MAX)
    # Maximum GPUs per GKE accelerator type (e.g. nvidia-l4: 16); auto-provisioning adds GPU
    # nodes only of the types listed.
    gpu_limits: dict[str, Annotated[int, Field(ge=0, le=INT32_MAX)]] = Field(default_factory=dict)


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
    # Google Groups for RBAC: the `gke-security-groups@<domain>` group whose member groups
    # RoleBindings may name (GKE docs, "Configure Google Groups for RBAC"). Needed for
    # `group:` members; users are bound one by one without it.
    rbac_security_group: Optional[str] = None
    node_auto_provisioning: NodeAutoProvisioningSpec = Field(default_factory=NodeAutoProvisioningSpec)
    system_nodes: SystemNodesSpec = Field(default_factory=SystemNodesSpec)


class PolicyOverrideSpec(_Spec):
    """A waiver of one overridable policy rule for this stack, with the reason reviewers read."""

    rule: str
    reason: str


class PolicySpec(_Spec):
    """Limits and waivers for the policy rules (docs/gitops.md lists them) that check and the pack run."""

    # gpu-pool-max-nodes: the most nodes one GPU pool may scale to.
    max_nodes_per_pool: int = Field(default=16, ge=1, le=INT32_MAX)
    # stack-max-gpus: the most physical GPUs all pools of the stack may reach together.
    max_gpus: int = Field(default=256, ge=1, le=INT32_MAX)
    # spot-allowed: None means spot in dev and staging, never in prod (training runs that must
    # finish on time should not be preempted).
    allow_spot: Optional[bool] = None
    overrides: list[PolicyOverrideSpec] = Field(default_factory=list)

    def spot_allowed(self, environment: Environment) -> bool:
        return self.allow_spot if self.allow_spot is not None else environment != "prod"


class FleetSpec(_Spec):
    """This cluster as a MultiKueue worker of a fleet manager stack (docs/fleet.md)."""

    # A ServiceAccount with the role MultiKueue documents for workers, its long-lived token, and
    # the `fleetKubeconfig` (secret) and `fleetQueues` stack outputs a manager reads.
    worker: bool = False


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
    observability: ObservabilitySpec = Field(default_factory=ObservabilitySpec)
    storage: StorageSpec = Field(default_factory=StorageSpec)
    trainer: TrainerSpec = Field(default_factory=TrainerSpec)
    # cloud: aws only; None: every default of AwsSpec.
    aws: Optional[AwsSpec] = None
    # GKE settings; required for cloud: gcp (at least `zones`), refused elsewhere.
    gcp: Optional[GcpSpec] = None
    policy: PolicySpec = Field(default_factory=PolicySpec)
    fleet: FleetSpec = Field(default_factory=FleetSpec)
    # Cluster administrators (cluster-admin everywhere), in the cloud's member format (see
    # TeamSpec.members). On aws these join `aws.admins`.
    admins: list[str] = Field(default_factory=list)

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

"""What the GCP wing builds, computed from the spec and the pool facts: pure, no Pulumi.

The component (components.gcp.platform) only maps these plans onto pulumi_gcp resources, so
every GKE decision (accelerators, sharing, zones, scaling, labels) is tested here plainly.
"""

from __future__ import annotations

import hashlib

import math
from dataclasses import dataclass

import yaml

from components import naming
from components.facts import gcs_iam
from components.pools import Pool
from components.spec import GcpSpec, NodeAutoProvisioningSpec, NodePoolSpec, PlatformSpec

# GKE spells taint effects in upper snake case (NodePool node_config.taints[].effect).
GKE_TAINT_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
# Node label that keeps GKE's own device plugin off a GPU node, so another one (NVIDIA's) can
# advertise nvidia.com/gpu (GKE docs: using the NVIDIA GPU Operator on GKE).
NO_GKE_DEVICE_PLUGIN_LABEL = "gke-no-default-nvidia-gpu-device-plugin"
# GKE's gpu_sharing_config.gpu_sharing_strategy for each spec sharing mode.
GKE_SHARING_STRATEGIES = {"time-slicing": "TIME_SHARING", "mps": "MPS"}
# reservation_affinity key that names a specific reservation (Compute Engine ReservationAffinity).
RESERVATION_NAME_KEY = "compute.googleapis.com/reservation-name"
# Flex-start and queued-provisioning node pools consume no reservation, have no auto-repair, and
# scale from zero wherever capacity comes (cluster-toolkit gke-node-pool preconditions:
# reservation_affinity NO_RESERVATION, auto_repair false, autoscaling_total_min_nodes 0,
# location_policy ANY; GKE "About flex-start provisioning mode").
NO_RESERVATION = "NO_RESERVATION"
# Annotation on a Kubernetes service account naming the Google service account it acts as
# (GKE Workload Identity); the storage proof reads it from the same table.
WORKLOAD_IDENTITY_ANNOTATION = gcs_iam.GSA_ANNOTATION
# The exec credential plugin kubectl and the Kubernetes provider use for GKE since 1.26.
AUTH_PLUGIN = "gke-gcloud-auth-plugin"


@dataclass(frozen=True)
class Sharing:
    """GKE-native GPU sharing: `clients` pods per physical GPU."""

    strategy: str
    clients: int


@dataclass(frozen=True)
class GpuPoolPlan:
    """One GKE node pool for one spec pool."""

    name: str
    machine_type: str
    accelerator: str
    accelerator_count: int
    driver_version: str
    # GKE's sharing, or None where there is none or another device plugin does it.
    sharing: Sharing | None
    # MIG profile GKE partitions each GPU into.
    partition_size: str | None
    spot: bool
    zones: list[str]
    total_min_nodes: int
    total_max_nodes: int
    # Nodes per zone at creation: enough for the pool's minimum.
    initial_node_count: int
    location_policy: str
    labels: dict[str, str]
    taint_key: str
    taint_value: str
    taint_effect: str
    # (consume_reservation_type, reservation name): a specific reservation, none at all (flex-start
    # and queued), or None for GKE's default.
    reservation_affinity: tuple[str, str | None] | None
    compact_placement: bool
    # node_config.flex_start: nodes from the flex-start provisioning model (Dynamic Workload Scheduler).
    flex_start: bool
    # queued_provisioning.enabled: nodes only through ProvisioningRequests (Kueue's admission check).
    queued_provisioning: bool
    auto_repair: bool


def gpu_pool_plan(spec: PlatformSpec, gcp: GcpSpec, spec_pool: NodePoolSpec, pool: Pool) -> GpuPoolPlan:
    shape = pool.instance_type
    assert shape is not None, "parse_spec guarantees a catalog machine type on gcp"
    zones = list(spec_pool.zones or gcp.zones)
    managed = spec.device_plugin == "managed"
    labels = dict(pool.labels)
    if not managed:
        labels[NO_GKE_DEVICE_PLUGIN_LABEL] = "true"
    strategy = GKE_SHARING_STRATEGIES.get(pool.sharing_mode)
    spot = pool.spot
    flex_start = pool.on_request
    return GpuPoolPlan(
        name=pool.name,
        machine_type=shape.name,
        accelerator=shape.gke_accelerator,
        accelerator_count=pool.gpus_per_node,
        driver_version=spec_pool.driver_version,
        sharing=Sharing(strategy, pool.slots_per_gpu) if managed and strategy else None,
        partition_size=pool.mig_profile if pool.sharing_mode == "mig" else None,
        spot=spot,
        zones=zones,
        total_min_nodes=pool.min_nodes,
        total_max_nodes=pool.max_nodes,
        initial_node_count=math.ceil(pool.min_nodes / len(zones)),
        # Spot and flex-start capacity comes wherever it is free; on-demand nodes spread evenly.
        location_policy="ANY" if spot or flex_start else "BALANCED",
        labels=labels,
        taint_key=pool.taint.key,
        taint_value=pool.taint.value,
        taint_effect=GKE_TAINT_EFFECTS[pool.taint.effect],
        reservation_affinity=reservation_affinity(spec_pool),
        compact_placement=spec_pool.compact_placement,
        flex_start=flex_start,
        queued_provisioning=pool.provisioning == "queued",
        auto_repair=not flex_start,
    )


def reservation_affinity(spec_pool: NodePoolSpec) -> tuple[str, str | None] | None:
    if spec_pool.way == "reservation" and spec_pool.reservation:
        return "SPECIFIC_RESERVATION", spec_pool.reservation
    if spec_pool.way in ("flex-start", "queued"):
        return NO_RESERVATION, None
    return None


def cluster_location(gcp: GcpSpec, region: str) -> str:
    """A regional cluster lives in the region; a zonal one in its first zone."""
    return region if gcp.regional else gcp.zones[0]


def cluster_node_locations(gcp: GcpSpec) -> list[str]:
    """The cluster's default node zones. GKE lists a zonal cluster's own zone implicitly."""
    return list(gcp.zones) if gcp.regional else list(gcp.zones[1:])


def system_pool_initial_node_count(gcp: GcpSpec) -> int:
    return math.ceil(gcp.system_nodes.min_nodes / len(gcp.zones))


def nap_resource_limits(nap: NodeAutoProvisioningSpec) -> list[tuple[str, int]]:
    """(resource type, maximum) for GKE's cluster_autoscaling.resource_limits; empty when off."""
    if not nap.enabled or nap.max_cpu is None or nap.max_memory_gib is None:
        return []
    return [
        ("cpu", nap.max_cpu),
        ("memory", nap.max_memory_gib),
        *sorted(nap.gpu_limits.items()),
    ]


def service_account_id(spec: PlatformSpec, role: str) -> str:
    """`<cluster>-<role>`; the spec keeps the cluster name short enough for IAM's 30 characters."""
    return naming.resource_name(spec, role)


def trainer_namespaces(spec: PlatformSpec) -> list[str]:
    """Namespaces whose `trainer` service account may use the bucket: one per team, or default."""
    teams = [naming.team_namespace(team.name) for team in spec.scheduling.teams]
    return sorted(teams) or ["default"]


# Service account ids: 6-30 characters, lowercase letters, digits and hyphens (IAM API,
# projects.serviceAccounts.create accountId).
_MAX_ACCOUNT_ID = 30
_DIGEST = 6


def team_service_account_id(spec: PlatformSpec, team: str) -> str:
    """`<cluster>-t-<team>`, or its first characters and a digest of the team's name where that
    is longer than IAM allows, so two long team names never share an account."""
    account_id = naming.resource_name(spec, "t", team)
    if len(account_id) <= _MAX_ACCOUNT_ID:
        return account_id
    digest = hashlib.sha256(team.encode()).hexdigest()[:_DIGEST]
    return f"{account_id[: _MAX_ACCOUNT_ID - _DIGEST - 1].rstrip('-')}-{digest}"


def workload_pool(project: str) -> str:
    return f"{project}.svc.id.goog"


def workload_identity_member(project: str, namespace: str) -> str:
    """The IAM principal of the trainer Kubernetes service account in `namespace`."""
    return f"serviceAccount:{workload_pool(project)}[{namespace}/{naming.TRAINER_SERVICE_ACCOUNT}]"


def kubeconfig(context: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig that authenticates with gke-gcloud-auth-plugin (the user's gcloud login)."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": context, "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate}}
        ],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
        "preferences": {},
        "users": [
            {
                "name": context,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": AUTH_PLUGIN,
                        "installHint": f"Install {AUTH_PLUGIN}: gcloud components install {AUTH_PLUGIN}",
                        "provideClusterInfo": True,
                    }
                },
            }
        ],
    }
    return yaml.safe_dump(document, sort_keys=True)


def kubeconfig_context(project: str, location: str, cluster: str) -> str:
    """The context name `gcloud container clusters get-credentials` gives the same cluster."""
    return f"gke_{project}_{location}_{cluster}"

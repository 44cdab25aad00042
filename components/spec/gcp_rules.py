"""GCP-only rules: the `gcp` section, GKE names, zones, networks, auto-provisioning."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections import Counter
from dataclasses import dataclass

from components.facts import catalog, limits, regions
from components.facts.gpudirect import GPU_SUBNET_BLOCK, GPUDIRECT, MAX_GPUDIRECT_POOLS
from components.facts.machine_types import system_node_type_problem
from components.spec.models import (
    AuthorizedNetworkSpec,
    GcpNetworkSpec,
    GcpSpec,
    NodeAutoProvisioningSpec,
    NodePoolSpec,
    PlatformSpec,
)
from components.spec.problems import DNS_LABEL, ROOT, Problem, cloud_only_problems, did_you_mean

# --- GCP-only rules -------------------------------------------------------------------------

_GCP = f"{ROOT}.gcp"
# Pool fields only the GCP wing reads.
_GCP_POOL_FIELDS = ("driver_version", "compact_placement", "multi_gpu_training", "gpu_subnet_slot")
# A zone is `<region>-<letter>`, or `<region>-ai<n><letter>` for an AI zone (Compute Engine
# regions and zones page).
_GCP_ZONE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-(ai[0-9]+)?[a-z]$")
# GKE node pool names: 1-40 characters, starting with a letter (GKE node pool API).
_GKE_POOL_NAME_MAX = 40
# Service account ids are 6-30 characters (IAM API); the wing names two `<cluster>-trainer`
# and `<cluster>-nodes`, so the cluster name gets 30 - len("-trainer").
_GKE_CLUSTER_NAME_MAX = 30 - len("-trainer")
# The GKE name of the wing's CPU pool, so no GPU pool may take it.
GKE_SYSTEM_POOL = "system"
# GKE flex-start (and queued provisioning on it) needs GKE 1.32.2-gke.1652000 or later (GKE "About
# flex-start provisioning mode", requirements).
_FLEX_START_MINOR = (1, 32)
# A Compute Engine reservation: a resource name, or one shared from another project
# (Compute Engine reservations API; GKE reservation_affinity values).
_RESERVATION = re.compile(r"^(projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def gcp_problems(spec: PlatformSpec, region: str | None) -> list[Problem]:
    """GKE rules, and GCP-only settings refused on other clouds."""
    if spec.cloud != "gcp":
        return cloud_only_problems(spec, "gcp", _GCP_POOL_FIELDS)
    if spec.gcp is None:
        return [Problem(_GCP, "required for cloud: gcp (at least `zones`: where the GPU nodes run)")]
    gcp = spec.gcp
    problems = _gke_cluster_name_problems(spec.cluster.name)
    if spec.device_plugin_choice == "nvidia":
        # The standalone plugin needs the NVIDIA container toolkit (k8s-device-plugin README,
        # prerequisites), which COS does not ship; GKE installs its own plugin on GPU nodes.
        problems.append(
            Problem(
                f"{ROOT}.devicePlugin",
                "not on gcp: NVIDIA's standalone device plugin needs the NVIDIA container toolkit on the node, which "
                "GKE's Container-Optimized OS nodes do not have (GKE runs its own device plugin there); use managed "
                "(the default on gcp)",
            )
        )
    problems += _gcp_zone_problems(gcp.zones, f"{_GCP}.zones", region)
    if not gcp.zones:
        problems.append(Problem(f"{_GCP}.zones", "required: the zones the nodes run in; pick zones that offer the pools' GPUs"))
    problems += _gcp_network_problems(gcp.network)
    problems += _gpudirect_network_problems(spec, gcp)
    problems += _authorized_network_problems(spec, gcp.authorized_networks)
    problems += _node_auto_provisioning_problems(spec, gcp.node_auto_provisioning)
    type_problem = system_node_type_problem("gcp", gcp.system_nodes.machine_type)
    if type_problem:
        problems.append(Problem(f"{_GCP}.systemNodes.machineType", type_problem))
    if gcp.system_nodes.max_nodes < gcp.system_nodes.min_nodes:
        problems.append(
            Problem(
                f"{_GCP}.systemNodes.maxNodes",
                f"must be >= minNodes ({gcp.system_nodes.min_nodes}), got {gcp.system_nodes.max_nodes}",
            )
        )
    problems += _pool_size_problems(gcp.system_nodes.max_nodes, gcp.zones, f"{_GCP}.systemNodes.maxNodes")
    total = gcp.system_nodes.max_nodes + sum(pool.max_nodes for pool in spec.node_pools)
    if total > limits.GKE_NODES_PER_CLUSTER:
        problems.append(
            Problem(
                f"{ROOT}.nodePools",
                f"the pools and system nodes reach {total} nodes; a GKE cluster holds at most "
                f"{limits.GKE_NODES_PER_CLUSTER} (GKE 'Plan for large clusters')",
            )
        )
    for i, pool in enumerate(spec.node_pools):
        problems += _gke_pool_problems(spec, gcp, pool, f"{ROOT}.nodePools[{i}]", region)
    return problems


def _gke_cluster_name_problems(name: str) -> list[Problem]:
    if not DNS_LABEL.match(name):
        return []
    if not name[0].isalpha() or len(name) > _GKE_CLUSTER_NAME_MAX:
        return [
            Problem(
                f"{ROOT}.cluster.name",
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
        elif region in regions.GCP_ZONES and zone not in regions.GCP_ZONES[region]:
            problems.append(
                Problem(f"{path}[{j}]", f"{region} has no zone {zone}; its zones: {', '.join(regions.GCP_ZONES[region])}")
            )
    duplicates = sorted(zone for zone, count in Counter(zones).items() if count > 1)
    if duplicates:
        problems.append(Problem(path, f"duplicate zones: {', '.join(duplicates)}"))
    return problems


def _pool_size_problems(max_nodes: int, zones: list[str], at: str) -> list[Problem]:
    """A GKE node pool holds at most 1,000 nodes in each of its zones (GKE quotas and limits)."""
    most = limits.GKE_NODES_PER_POOL_ZONE * max(1, len(zones))
    if max_nodes > most:
        return [
            Problem(
                at,
                f"at most {most} nodes: GKE allows {limits.GKE_NODES_PER_POOL_ZONE} per node pool and zone, "
                f"in {max(1, len(zones))} zone(s) here; got {max_nodes}",
            )
        ]
    return []


def _gke_pool_problems(
    spec: PlatformSpec, gcp: GcpSpec, pool: NodePoolSpec, at: str, region: str | None
) -> list[Problem]:
    problems = _gcp_zone_problems(pool.zones, f"{at}.zones", region)
    problems += _pool_size_problems(pool.max_nodes, pool.zones or gcp.zones, f"{at}.maxNodes")
    if pool.name == GKE_SYSTEM_POOL:
        problems.append(Problem(f"{at}.name", f"'{GKE_SYSTEM_POOL}' is the GKE name of the platform's CPU pool; pick another"))
    elif DNS_LABEL.match(pool.name) and (len(pool.name) > _GKE_POOL_NAME_MAX or not pool.name[0].isalpha()):
        problems.append(
            Problem(f"{at}.name", f"on gcp: start with a letter and use at most {_GKE_POOL_NAME_MAX} characters (GKE node pool names), got {pool.name!r}")
        )
    if pool.reservation is not None and pool.way == "reservation" and not _RESERVATION.match(pool.reservation):
        problems.append(
            Problem(
                f"{at}.reservation",
                f"expected a Compute Engine reservation name, or projects/<project>/reservations/<name>, got {pool.reservation!r}",
            )
        )
    if pool.way in ("flex-start", "queued") and _minor(spec.cluster.kubernetes_version) < _FLEX_START_MINOR:
        problems.append(
            Problem(
                f"{at}.provisioning",
                f"{pool.way} needs GKE 1.32.2 or later; cluster.kubernetesVersion is {spec.cluster.kubernetes_version}",
            )
        )
    if pool.compact_placement and pool.way == "queued":
        problems.append(
            Problem(
                f"{at}.compactPlacement",
                "not with provisioning: queued: queued provisioning places the nodes itself and GKE takes no COMPACT "
                "placement policy on such a pool (cluster-toolkit gke-node-pool)",
            )
        )
    if pool.compact_placement and len(pool.zones or gcp.zones) != 1:
        zones = ", ".join(pool.zones or gcp.zones) or "none"
        problems.append(
            Problem(f"{at}.compactPlacement", f"needs the pool in exactly one zone (set the pool's zones to one), got {zones}")
        )
    family = GPUDIRECT.get(pool.instance_type or "") if pool.multi_gpu_training else None
    if family is not None and family.stack == "rdma" and len(pool.zones or gcp.zones) != 1:
        zones = ", ".join(pool.zones or gcp.zones) or "none"
        problems.append(
            Problem(
                f"{at}.zones",
                f"{pool.instance_type} with multiGpuTraining gets GPUDirect RDMA, whose RoCE VPC belongs to one zone "
                f"(VPC docs, RDMA RoCE network profile): set the pool's zones to exactly one, got {zones}",
            )
        )
    if spec.device_plugin != "managed" or pool.sharing.mode not in ("time-slicing", "mps"):
        return problems
    if pool.multi_gpu_training:
        problems.append(
            Problem(
                f"{at}.sharing.mode",
                f"{pool.sharing.mode} through GKE's device plugin gives each pod at most one GPU, but this pool "
                "is marked multiGpuTraining; drop the sharing or the mark",
            )
        )
    # MPS pools are held to the same 48 clients on every cloud (platform_rules.sharing_problems).
    replicas = pool.sharing.replicas
    if pool.sharing.mode == "time-slicing" and replicas is not None and replicas > limits.GKE_MAX_SHARED_CLIENTS_PER_GPU:
        problems.append(
            Problem(
                f"{at}.sharing.replicas",
                f"GKE shares a GPU between at most {limits.GKE_MAX_SHARED_CLIENTS_PER_GPU} pods, got {pool.sharing.replicas}",
            )
        )
    return problems


def _minor(version: str) -> tuple[int, int]:
    """(major, minor) of a "1.33" version; (0, 0) when it does not parse (another rule reports it)."""
    parts = version.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return (0, 0)
    return (int(parts[0]), int(parts[1]))


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


def gpu_subnet_slot(pool: NodePoolSpec) -> int:
    """A GPUDirect pool's run of GPU subnets (components.pools): its `gpuSubnetSlot`, else a hash of
    its name. Never its position: a subnet's range is create-only, so a shifted range would replace
    the subnet under the live NICs of a pool that did not change."""
    if pool.gpu_subnet_slot is not None:
        return pool.gpu_subnet_slot
    return int.from_bytes(hashlib.sha256(pool.name.encode()).digest()[:4], "big") % MAX_GPUDIRECT_POOLS


def _gpudirect_network_problems(spec: PlatformSpec, gcp: GcpSpec) -> list[Problem]:
    """GPUDirect pools' GPU subnets come out of GPU_SUBNET_BLOCK, a run per pool (components.pools):
    the cluster's own ranges must stay clear of it, since a node has NICs in both."""
    gpudirect = [p for p in spec.node_pools if p.multi_gpu_training and (p.instance_type or "") in GPUDIRECT]
    if not gpudirect:
        return []
    problems: list[Problem] = []
    if len(gpudirect) > MAX_GPUDIRECT_POOLS:
        problems.append(Problem(f"{ROOT}.nodePools", f"at most {MAX_GPUDIRECT_POOLS} GPUDirect pools (multiGpuTraining "
                                                     f"on {', '.join(sorted({p.instance_type or '' for p in gpudirect}))}), got {len(gpudirect)}"))
    taken: dict[int, str] = {}
    for pool in gpudirect:
        slot = gpu_subnet_slot(pool)
        if slot in taken:
            at = f"{ROOT}.nodePools[{spec.node_pools.index(pool)}]"
            problems.append(Problem(f"{at}.gpuSubnetSlot", f"pool {pool.name} would take GPU subnet slot {slot}, which pool "
                                                           f"{taken[slot]} takes; set gpuSubnetSlot to a free one of 0-"
                                                           f"{MAX_GPUDIRECT_POOLS - 1} (taken: {sorted(taken)})"))
        taken.setdefault(slot, pool.name)
    if gcp.network.existing is None:
        block = ipaddress.IPv4Network(GPU_SUBNET_BLOCK)
        for key in ("nodes", "pods", "services"):
            value: str = getattr(gcp.network.cidrs, key)
            if _cidr_problem(value) is None and ipaddress.IPv4Network(value).overlaps(block):
                problems.append(Problem(f"{_GCP}.network.cidrs.{key}", f"{value} overlaps {GPU_SUBNET_BLOCK}, where the "
                                                                        "GPUDirect pools' GPU subnets are; pick another range"))
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
        Problem(f"{at}.gpuLimits.{name}", f"unknown GKE accelerator type{did_you_mean(name, accelerators)}; one of {', '.join(accelerators)}")
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

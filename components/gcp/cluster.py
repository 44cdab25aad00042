"""The GKE cluster and its node pools: the cluster with Workload Identity, Dataplane V2 and GKE's
autoscaling, the system pool, and one node pool per GPU pool (components.gcp.plan decides each)."""

from __future__ import annotations

import pulumi_gcp as gcp

from components.gcp import plan
from components.gcp.network import FabricNics, Network
from components.gcp.wing import Wing
from components.observability.objects import managed_components
from components.pools import Pool
from components.spec import GKE_SYSTEM_POOL, NodePoolSpec

# Full API scope on nodes: IAM roles, not scopes, decide what a node may do (GKE hardening guide).
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def gke_cluster(
    wing: Wing, network: Network, node_account: gcp.serviceaccount.Account, multi_networking: bool = False
) -> gcp.container.Cluster:
    spec, settings = wing.spec, wing.gcp
    authorized = [
        gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block=n.cidr, display_name=n.name)
        for n in settings.authorized_networks
    ]
    return gcp.container.Cluster(
        wing.name,
        name=spec.cluster.name,
        location=plan.cluster_location(settings, wing.region),
        node_locations=plan.cluster_node_locations(settings) or None,
        # Pools are separate resources, so each can change without touching the cluster.
        remove_default_node_pool=True,
        initial_node_count=1,
        # The provider refuses to delete the cluster while this is on: docs/gcp.md, "Tear down".
        deletion_protection=spec.cluster.deletion_protected(spec.environment),
        # The minimum; the release channel upgrades from there.
        min_master_version=spec.cluster.kubernetes_version,
        release_channel=gcp.container.ClusterReleaseChannelArgs(channel=settings.release_channel),
        network=network.network,
        subnetwork=network.subnetwork,
        networking_mode="VPC_NATIVE",
        ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
            cluster_secondary_range_name=network.pods_range,
            services_secondary_range_name=network.services_range,
        ),
        # Dataplane V2 (eBPF): network policy enforcement built in; multi-networking needs it.
        datapath_provider="ADVANCED_DATAPATH",
        # GPUDirect pools hand their GPU NICs to pods as extra interfaces (GKE docs "Maximize GPU
        # network bandwidth": clusters with --enable-dataplane-v2 --enable-multi-networking).
        enable_multi_networking=True if multi_networking else None,
        # Nodes get no public IPs; the control plane keeps its public endpoint, limited by the
        # authorized networks. Since GKE 1.29 the control plane connects over Private Service
        # Connect, so no master CIDR block is needed.
        private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
            enable_private_nodes=True,
            enable_private_endpoint=False,
        ),
        master_authorized_networks_config=(
            gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(cidr_blocks=authorized) if authorized else None
        ),
        # Google Groups for RBAC: RoleBindings may name groups that are members of this one.
        authenticator_groups_config=(
            gcp.container.ClusterAuthenticatorGroupsConfigArgs(security_group=settings.rbac_security_group)
            if settings.rbac_security_group
            else None
        ),
        workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
            workload_pool=plan.workload_pool(wing.project)
        ),
        cluster_autoscaling=_cluster_autoscaling(wing, node_account),
        # Training pods mount the stack's bucket through the GCS FUSE CSI driver
        # (components.jobs.renderer), so checkpoints land in GCS without a copy step.
        addons_config=gcp.container.ClusterAddonsConfigArgs(
            gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True),
        ),
        monitoring_config=(
            gcp.container.ClusterMonitoringConfigArgs(
                enable_components=managed_components(spec),
                managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True),
            )
            if managed_components(spec)
            else None
        ),
        resource_labels={"gpu-platform-environment": spec.environment},
        opts=wing.child(protect=wing.prod),
    )


def _cluster_autoscaling(wing: Wing, node_account: gcp.serviceaccount.Account) -> gcp.container.ClusterClusterAutoscalingArgs:
    nap = wing.gcp.node_auto_provisioning
    # Scale down sooner and pack tighter than the BALANCED default: idle GPUs are the cost.
    profile = "OPTIMIZE_UTILIZATION"
    if not nap.enabled:
        return gcp.container.ClusterClusterAutoscalingArgs(enabled=False, autoscaling_profile=profile)
    return gcp.container.ClusterClusterAutoscalingArgs(
        enabled=True,
        autoscaling_profile=profile,
        resource_limits=[
            gcp.container.ClusterClusterAutoscalingResourceLimitArgs(resource_type=kind, minimum=0, maximum=maximum)
            for kind, maximum in plan.nap_resource_limits(nap)
        ],
        auto_provisioning_locations=list(wing.gcp.zones),
        auto_provisioning_defaults=gcp.container.ClusterClusterAutoscalingAutoProvisioningDefaultsArgs(
            service_account=node_account.email,
            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
            management=gcp.container.ClusterClusterAutoscalingAutoProvisioningDefaultsManagementArgs(
                auto_repair=True, auto_upgrade=True
            ),
        ),
    )


def system_pool(wing: Wing, cluster: gcp.container.Cluster, node_account: gcp.serviceaccount.Account) -> gcp.container.NodePool:
    system = wing.gcp.system_nodes
    return gcp.container.NodePool(
        f"{wing.name}-{GKE_SYSTEM_POOL}",
        name=GKE_SYSTEM_POOL,
        cluster=cluster.name,
        location=cluster.location,
        initial_node_count=plan.system_pool_initial_node_count(wing.gcp),
        autoscaling=gcp.container.NodePoolAutoscalingArgs(
            total_min_node_count=system.min_nodes,
            total_max_node_count=system.max_nodes,
            location_policy="BALANCED",
        ),
        management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
        # CPU capacity is plentiful: add the new node before draining the old one.
        upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(strategy="SURGE", max_surge=1, max_unavailable=0),
        node_config=gcp.container.NodePoolNodeConfigArgs(
            machine_type=system.machine_type,
            image_type="COS_CONTAINERD",
            service_account=node_account.email,
            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
            resource_labels={"gpu-platform-pool": GKE_SYSTEM_POOL},
        ),
        opts=wing.child(ignore_changes=["nodeCount", "initialNodeCount"]),
    )


def gpu_pool(
    wing: Wing,
    cluster: gcp.container.Cluster,
    node_account: gcp.serviceaccount.Account,
    spec_pool: NodePoolSpec,
    pool: Pool,
    fabric: FabricNics | None = None,
) -> gcp.container.NodePool:
    p = plan.gpu_pool_plan(wing.spec, wing.gcp, spec_pool, pool)
    accelerator = gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
        type=p.accelerator,
        count=p.accelerator_count,
        gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
            gpu_driver_version=p.driver_version
        ),
        gpu_sharing_config=(
            gcp.container.NodePoolNodeConfigGuestAcceleratorGpuSharingConfigArgs(
                gpu_sharing_strategy=p.sharing.strategy, max_shared_clients_per_gpu=p.sharing.clients
            )
            if p.sharing
            else None
        ),
        gpu_partition_size=p.partition_size,
    )
    reservation = None
    if p.reservation_affinity is not None:
        kind, name = p.reservation_affinity
        reservation = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type=kind,
            key=plan.RESERVATION_NAME_KEY if name else None,
            values=[name] if name else None,
        )
    return gcp.container.NodePool(
        f"{wing.name}-{pool.name}",
        name=p.name,
        cluster=cluster.name,
        location=cluster.location,
        node_locations=p.zones,
        initial_node_count=p.initial_node_count,
        autoscaling=gcp.container.NodePoolAutoscalingArgs(
            total_min_node_count=p.total_min_nodes,
            total_max_node_count=p.total_max_nodes,
            location_policy=p.location_policy,
        ),
        management=gcp.container.NodePoolManagementArgs(auto_repair=p.auto_repair, auto_upgrade=True),
        queued_provisioning=gcp.container.NodePoolQueuedProvisioningArgs(enabled=True) if p.queued_provisioning else None,
        # GPU capacity is scarce and quota-bound: upgrade in place, one node at a time,
        # instead of asking for a surge node that may never come.
        upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(strategy="SURGE", max_surge=0, max_unavailable=1),
        placement_policy=gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT") if p.compact_placement else None,
        # A GPUDirect pool's nodes get one NIC per extra subnet, in order (gcloud's
        # --additional-node-network network=...,subnetwork=... in GKE's GPUDirect guides).
        network_config=(
            gcp.container.NodePoolNetworkConfigArgs(
                additional_node_network_configs=[
                    gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(network=vpc, subnetwork=subnet)
                    for vpc, subnet in fabric.nics
                ]
            )
            if fabric
            else None
        ),
        node_config=gcp.container.NodePoolNodeConfigArgs(
            machine_type=p.machine_type,
            guest_accelerators=[accelerator],
            spot=p.spot,
            flex_start=p.flex_start or None,
            # gVNIC carries the GPU NICs of GPUDirect nodes (GKE's guides: --enable-gvnic).
            gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True) if fabric else None,
            image_type="COS_CONTAINERD",
            service_account=node_account.email,
            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
            labels=p.labels,
            # GKE adds this taint itself only while a non-GPU pool exists; declare it so it
            # holds regardless, and so GKE's copy never shows as drift.
            taints=[gcp.container.NodePoolNodeConfigTaintArgs(key=p.taint_key, value=p.taint_value, effect=p.taint_effect)],
            reservation_affinity=reservation,
            resource_labels={"gpu-platform-pool": pool.name},
        ),
        # The autoscaler owns the node count; initialNodeCount also forces replacement. Adding or
        # changing a pool's network_config (its GPU NICs) replaces the node pool (the provider's
        # schema marks network_config.additional_node_network_configs ForceNew: terraform-provider-
        # google resource_container_node_pool.go, the same schema in GoogleCloudPlatform/
        # terraform-google-conversion v7; gVNIC likewise as the GPUDirect review read it), and a
        # pool keeps its fixed GKE name, so Pulumi's
        # create-before-delete would fail with "already exists": a GPUDirect pool, which scales
        # to zero, is deleted first (docs/gcp.md, "Adding GPUDirect to an existing pool").
        opts=wing.child(ignore_changes=["nodeCount", "initialNodeCount"], delete_before_replace=bool(fabric)),
    )

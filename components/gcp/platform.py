"""The GCP wing: a GKE Standard cluster with GPU node pools, registry, bucket and trainer identity.

Reads top to bottom like the platform: network, cluster, pools, registry, bucket, identity,
then the Kubernetes provider the GPU layer builds on. Every decision comes from
components.gcp.plan; this module only declares resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components import naming, tenancy
from components.gcp import plan
from components.pools import Pool
from components.spec import GKE_SYSTEM_POOL, GcpSpec, NodePoolSpec, PlatformSpec
from components.trainer_image import RegistryLogin

# Full API scope on nodes: IAM roles, not scopes, decide what a node may do (GKE hardening guide).
_CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# Minimal project role for a custom node service account: logs, metrics, and the images GKE pulls
# (GKE docs: use least privilege IAM service accounts).
_NODE_ROLE = "roles/container.defaultNodeServiceAccount"
# Read, write and delete objects, no bucket administration (Cloud Storage IAM roles).
_TRAINER_BUCKET_ROLE = "roles/storage.objectUser"
_WORKLOAD_IDENTITY_ROLE = "roles/iam.workloadIdentityUser"
# Read objects, nothing else: teams' access to the shared datasets (Cloud Storage IAM roles).
_DATASETS_ROLE = "roles/storage.objectViewer"
_CLUSTER_VIEWER_ROLE = "roles/container.clusterViewer"
# Overwritten checkpoints stay recoverable this long before the bucket deletes them.
_NONCURRENT_VERSION_DAYS = 30
# Abandoned multipart uploads (a killed checkpoint write) are cleaned up after this long.
_INCOMPLETE_UPLOAD_DAYS = 7
# Untagged images (replaced tags of trainer builds, which run to gigabytes) are deleted after this.
_UNTAGGED_IMAGE_SECONDS = 14 * 24 * 3600


@dataclass(frozen=True)
class _Network:
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    pods_range: str
    services_range: str
    # The NAT private nodes reach the internet through (None on an existing network).
    nat: gcp.compute.RouterNat | None


class GcpPlatform(pulumi.ComponentResource):
    """GKE for the spec's GPU pools; `.provider` reaches the cluster, `.outputs` are the exports."""

    provider: k8s.Provider
    outputs: dict[str, Any]
    # What the trainer's Kubernetes service account carries so Workload Identity maps it to
    # the trainer's Google service account.
    trainer_annotations: dict[str, dict[str, pulumi.Output[str]]]

    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        pools: list[Pool],
        project: str,
        region: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-platform:gcp:GcpPlatform", name, None, opts)
        assert spec.gcp is not None, "parse_spec requires the gcp section on cloud: gcp"
        self._name = name
        self._spec = spec
        self._gcp: GcpSpec = spec.gcp
        self._project = project
        self._region = region
        self._prod = spec.environment == "prod"

        network = self._network()
        node_account = self._service_account("nodes", "GKE nodes: logs, metrics, image pulls")
        gcp.projects.IAMMember(
            f"{name}-nodes-role",
            project=project,
            role=_NODE_ROLE,
            member=node_account.member,
            opts=self._child(),
        )
        cluster = self._cluster(network, node_account)
        system_pool = self._system_pool(cluster, node_account)
        spec_pools = {spec_pool.name: spec_pool for spec_pool in spec.node_pools}
        node_pools = {pool.name: self._gpu_pool(cluster, node_account, spec_pools[pool.name], pool) for pool in pools}
        repository = self._registry(node_account)
        bucket = self._bucket()
        trainers = self._trainer_identities(cluster, bucket)
        self._member_access()

        kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(
                cluster.location, cluster.name, cluster.endpoint, cluster.master_auth.cluster_ca_certificate
            ).apply(lambda a: plan.kubeconfig(plan.kubeconfig_context(project, a[0], a[1]), a[2], a[3]))
        )
        # Kubernetes resources wait for nodes to run on and, on a new network, a way out to
        # chart and image registries.
        ready: list[pulumi.Resource] = [system_pool]
        if network.nat is not None:
            ready.append(network.nat)
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=kubeconfig,
            enable_server_side_apply=True,
            opts=self._child(depends_on=ready),
        )
        self.ready: list[pulumi.Resource] = [*ready, *node_pools.values()]
        # Artifact Registry takes the deployer's OAuth token (Artifact Registry docs: "Configure
        # authentication to Artifact Registry for Docker", access token method).
        self.registry = RegistryLogin(
            repository_url=pulumi.Output.concat(repository.registry_uri, "/trainer"),
            address=f"{region}-docker.pkg.dev",
            username="oauth2accesstoken",
            password=pulumi.Output.secret(gcp.organizations.get_client_config_output().access_token),
        )
        self.trainer_annotations = {
            namespace: {plan.WORKLOAD_IDENTITY_ANNOTATION: account.email} for namespace, account in trainers.items()
        }
        self.outputs = {
            "kubeconfig": kubeconfig,
            "clusterName": cluster.name,
            "clusterLocation": cluster.location,
            "registryUrl": repository.registry_uri,
            "bucketName": bucket.name,
            "nodePools": {pool: node_pool.name for pool, node_pool in node_pools.items()},
            "trainerServiceAccounts": {namespace: account.email for namespace, account in trainers.items()},
        }
        if not spec.scheduling.teams:
            # The one account of a stack without teams, under the output name it always had.
            self.outputs["trainerServiceAccount"] = trainers[naming.team_namespace(naming.DEFAULT_TEAM)].email
        self.register_outputs(self.outputs)

    def _child(self, **options: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, **options)

    def _cloud_name(self, *parts: str) -> str:
        return naming.resource_name(self._spec, *parts)

    # --- network ----------------------------------------------------------------------------

    def _network(self) -> _Network:
        existing = self._gcp.network.existing
        if existing is not None:
            return _Network(existing.network, existing.subnetwork, existing.pods_range, existing.services_range, None)
        cidrs = self._gcp.network.cidrs
        pods_range, services_range = self._cloud_name("pods"), self._cloud_name("services")
        vpc = gcp.compute.Network(
            f"{self._name}-vpc",
            name=self._cloud_name("vpc"),
            auto_create_subnetworks=False,
            routing_mode="REGIONAL",
            opts=self._child(),
        )
        subnet = gcp.compute.Subnetwork(
            f"{self._name}-subnet",
            name=self._cloud_name("subnet"),
            region=self._region,
            network=vpc.id,
            ip_cidr_range=cidrs.nodes,
            # Private nodes reach Google APIs (Artifact Registry, Cloud Storage) without NAT.
            private_ip_google_access=True,
            secondary_ip_ranges=[
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=pods_range, ip_cidr_range=cidrs.pods),
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=services_range, ip_cidr_range=cidrs.services),
            ],
            opts=self._child(),
        )
        router = gcp.compute.Router(
            f"{self._name}-router",
            name=self._cloud_name("router"),
            region=self._region,
            network=vpc.id,
            opts=self._child(),
        )
        nat = gcp.compute.RouterNat(
            f"{self._name}-nat",
            name=self._cloud_name("nat"),
            router=router.name,
            region=self._region,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[
                gcp.compute.RouterNatSubnetworkArgs(name=subnet.id, source_ip_ranges_to_nats=["ALL_IP_RANGES"])
            ],
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=self._child(),
        )
        return _Network(vpc.id, subnet.id, pods_range, services_range, nat)

    # --- cluster ----------------------------------------------------------------------------

    def _cluster(self, network: _Network, node_account: gcp.serviceaccount.Account) -> gcp.container.Cluster:
        spec, settings = self._spec, self._gcp
        authorized = [
            gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block=n.cidr, display_name=n.name)
            for n in settings.authorized_networks
        ]
        return gcp.container.Cluster(
            self._name,
            name=spec.cluster.name,
            location=plan.cluster_location(settings, self._region),
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
            # Dataplane V2 (eBPF): network policy enforcement built in.
            datapath_provider="ADVANCED_DATAPATH",
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
                workload_pool=plan.workload_pool(self._project)
            ),
            cluster_autoscaling=self._cluster_autoscaling(node_account),
            # Training pods mount the stack's bucket through the GCS FUSE CSI driver
            # (components.jobs.renderer), so checkpoints land in GCS without a copy step.
            addons_config=gcp.container.ClusterAddonsConfigArgs(
                gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True),
            ),
            monitoring_config=(
                gcp.container.ClusterMonitoringConfigArgs(
                    enable_components=["SYSTEM_COMPONENTS", "DCGM"],
                    managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True),
                )
                if spec.monitoring.dcgm
                else None
            ),
            resource_labels={"gpu-platform-environment": spec.environment},
            opts=self._child(protect=self._prod),
        )

    def _cluster_autoscaling(self, node_account: gcp.serviceaccount.Account) -> gcp.container.ClusterClusterAutoscalingArgs:
        nap = self._gcp.node_auto_provisioning
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
            auto_provisioning_locations=list(self._gcp.zones),
            auto_provisioning_defaults=gcp.container.ClusterClusterAutoscalingAutoProvisioningDefaultsArgs(
                service_account=node_account.email,
                oauth_scopes=[_CLOUD_PLATFORM_SCOPE],
                management=gcp.container.ClusterClusterAutoscalingAutoProvisioningDefaultsManagementArgs(
                    auto_repair=True, auto_upgrade=True
                ),
            ),
        )

    # --- node pools -------------------------------------------------------------------------

    def _system_pool(self, cluster: gcp.container.Cluster, node_account: gcp.serviceaccount.Account) -> gcp.container.NodePool:
        system = self._gcp.system_nodes
        return gcp.container.NodePool(
            f"{self._name}-{GKE_SYSTEM_POOL}",
            name=GKE_SYSTEM_POOL,
            cluster=cluster.name,
            location=cluster.location,
            initial_node_count=plan.system_pool_initial_node_count(self._gcp),
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
                oauth_scopes=[_CLOUD_PLATFORM_SCOPE],
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
                resource_labels={"gpu-platform-pool": GKE_SYSTEM_POOL},
            ),
            opts=self._child(ignore_changes=["nodeCount", "initialNodeCount"]),
        )

    def _gpu_pool(
        self,
        cluster: gcp.container.Cluster,
        node_account: gcp.serviceaccount.Account,
        spec_pool: NodePoolSpec,
        pool: Pool,
    ) -> gcp.container.NodePool:
        p = plan.gpu_pool_plan(self._spec, self._gcp, spec_pool, pool)
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
            f"{self._name}-{pool.name}",
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
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=p.machine_type,
                guest_accelerators=[accelerator],
                spot=p.spot,
                flex_start=p.flex_start or None,
                image_type="COS_CONTAINERD",
                service_account=node_account.email,
                oauth_scopes=[_CLOUD_PLATFORM_SCOPE],
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
                labels=p.labels,
                # GKE adds this taint itself only while a non-GPU pool exists; declare it so it
                # holds regardless, and so GKE's copy never shows as drift.
                taints=[gcp.container.NodePoolNodeConfigTaintArgs(key=p.taint_key, value=p.taint_value, effect=p.taint_effect)],
                reservation_affinity=reservation,
                resource_labels={"gpu-platform-pool": pool.name},
            ),
            # The autoscaler owns the node count; initialNodeCount also forces replacement.
            opts=self._child(ignore_changes=["nodeCount", "initialNodeCount"]),
        )

    # --- registry, bucket, identity ---------------------------------------------------------

    def _service_account(self, role: str, purpose: str) -> gcp.serviceaccount.Account:
        account_id = plan.service_account_id(self._spec, role)
        return gcp.serviceaccount.Account(
            account_id,
            account_id=account_id,
            display_name=f"{self._spec.cluster.name} {purpose}",
            opts=self._child(),
        )

    def _registry(self, node_account: gcp.serviceaccount.Account) -> gcp.artifactregistry.Repository:
        repository_id = self._cloud_name("images")
        repository = gcp.artifactregistry.Repository(
            repository_id,
            repository_id=repository_id,
            location=self._region,
            format="DOCKER",
            description=f"Training images for {self._spec.cluster.name}",
            cleanup_policy_dry_run=False,
            cleanup_policies=[
                gcp.artifactregistry.RepositoryCleanupPolicyArgs(
                    id="delete-untagged",
                    action="DELETE",
                    condition=gcp.artifactregistry.RepositoryCleanupPolicyConditionArgs(
                        tag_state="UNTAGGED", older_than=f"{_UNTAGGED_IMAGE_SECONDS}s"
                    ),
                )
            ],
            opts=self._child(),
        )
        gcp.artifactregistry.RepositoryIamMember(
            f"{self._name}-nodes-pull",
            repository=repository.name,
            location=repository.location,
            role="roles/artifactregistry.reader",
            member=node_account.member,
            opts=self._child(),
        )
        return repository

    def _bucket(self) -> gcp.storage.Bucket:
        name = naming.bucket_name(self._spec)
        return gcp.storage.Bucket(
            name,
            name=name,
            # Cloud Storage reports locations in upper case; match it so there is no diff.
            location=self._region.upper(),
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            versioning=gcp.storage.BucketVersioningArgs(enabled=True),
            lifecycle_rules=[
                gcp.storage.BucketLifecycleRuleArgs(
                    action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                    condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                        days_since_noncurrent_time=_NONCURRENT_VERSION_DAYS, with_state="ARCHIVED"
                    ),
                ),
                gcp.storage.BucketLifecycleRuleArgs(
                    action=gcp.storage.BucketLifecycleRuleActionArgs(type="AbortIncompleteMultipartUpload"),
                    condition=gcp.storage.BucketLifecycleRuleConditionArgs(age=_INCOMPLETE_UPLOAD_DAYS),
                ),
            ],
            force_destroy=False,
            labels={"gpu-platform-environment": self._spec.environment},
            opts=self._child(protect=self._prod),
        )

    def _trainer_identities(
        self, cluster: gcp.container.Cluster, bucket: gcp.storage.Bucket
    ) -> dict[str, gcp.serviceaccount.Account]:
        """Per team namespace, the Google identity its `trainer` account acts as: a team's reaches
        its managed folder `teams/<team>/` (read-write) and `datasets/` (read-only) and nothing
        else (Cloud Storage docs, "Managed folders": IAM on a folder of a bucket with uniform
        bucket-level access). A stack without teams keeps one account for the whole bucket."""
        if not self._spec.scheduling.teams:
            trainer = self._service_account("trainer", "trainer: datasets and checkpoints")
            gcp.storage.BucketIAMMember(
                f"{self._name}-trainer-objects",
                bucket=bucket.name,
                role=_TRAINER_BUCKET_ROLE,
                member=trainer.member,
                opts=self._child(),
            )
            namespace = naming.team_namespace(naming.DEFAULT_TEAM)
            self._workload_identity(cluster, trainer, f"{self._name}-trainer-{namespace}", namespace)
            return {namespace: trainer}
        datasets = self._managed_folder(bucket, "datasets", tenancy.DATASETS_PREFIX)
        accounts: dict[str, gcp.serviceaccount.Account] = {}
        for team in self._spec.scheduling.teams:
            namespace = naming.team_namespace(team.name)
            account_id = plan.team_service_account_id(self._spec, team.name)
            account = gcp.serviceaccount.Account(
                account_id,
                account_id=account_id,
                display_name=f"{self._spec.cluster.name} trainer of team {team.name}",
                opts=self._child(),
            )
            folder = self._managed_folder(bucket, f"team-{team.name}", tenancy.team_prefix(team.name))
            for suffix, managed_folder, role in (("objects", folder, _TRAINER_BUCKET_ROLE), ("datasets", datasets, _DATASETS_ROLE)):
                gcp.storage.ManagedFolderIamMember(
                    f"{self._name}-trainer-{team.name}-{suffix}",
                    bucket=bucket.name,
                    managed_folder=managed_folder.name,
                    role=role,
                    member=account.member,
                    opts=self._child(),
                )
            self._workload_identity(cluster, account, f"{self._name}-trainer-{namespace}", namespace)
            accounts[namespace] = account
        return accounts

    def _managed_folder(self, bucket: gcp.storage.Bucket, resource: str, prefix: str) -> gcp.storage.ManagedFolder:
        return gcp.storage.ManagedFolder(
            f"{self._name}-{resource}",
            bucket=bucket.name,
            # Managed folder names end with a slash (Cloud Storage JSON API, managedFolders).
            name=prefix,
            # The objects in it are datasets and checkpoints: deleting the folder keeps them.
            force_destroy=False,
            opts=self._child(),
        )

    def _workload_identity(
        self, cluster: gcp.container.Cluster, account: gcp.serviceaccount.Account, resource: str, namespace: str
    ) -> None:
        gcp.serviceaccount.IAMMember(
            resource,
            service_account_id=account.name,
            role=_WORKLOAD_IDENTITY_ROLE,
            member=plan.workload_identity_member(self._project, namespace),
            # The workload identity pool exists once the first cluster that uses it does.
            opts=self._child(depends_on=[cluster]),
        )

    def _member_access(self) -> None:
        """Team members and admins may fetch the cluster's credentials (`gcloud container clusters
        get-credentials` needs container.clusters.get: roles/container.clusterViewer, GKE docs
        "Access control"); what they may do inside is RBAC's (components.tenancy)."""
        principals = [member for team in self._spec.scheduling.teams for member in team.members]
        for principal in dict.fromkeys([*principals, *self._spec.admins]):
            gcp.projects.IAMMember(
                f"{self._name}-viewer-{principal.replace(':', '-').replace('@', '-at-')}",
                project=self._project,
                role=_CLUSTER_VIEWER_ROLE,
                member=principal,
                opts=self._child(),
            )

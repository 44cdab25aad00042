"""The GCP wing: a GKE Standard cluster with GPU node pools, registry, bucket and trainer identity.

Reads top to bottom like the platform: network, cluster, pools, registry, bucket, identity,
then the Kubernetes provider the GPU layer builds on. Every decision comes from
components.gcp.plan; the builders (network, cluster, storage) only declare resources, all of
them children of this component.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components import naming
from components.gcp import dashboards
from components.gcp import gpudirect as gpudirect_objects
from components.gcp import plan
from components.gcp.cluster import gke_cluster, gpu_pool, system_pool
from components.gcp.network import cluster_network, fabric_networks
from components.gcp.storage import member_access, registry, service_account, trainer_identities, training_bucket
from components.gcp.wing import Wing
from components.pools import Pool, fabric_pools
from components.spec import PlatformSpec
from components.trainer_image import RegistryLogin

# Minimal project role for a custom node service account: logs, metrics, and the images GKE pulls
# (GKE docs: use least privilege IAM service accounts).
_NODE_ROLE = "roles/container.defaultNodeServiceAccount"


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
        wing = Wing(name, spec, spec.gcp, project, region, self)

        network = cluster_network(wing)
        # GPUDirect pools (components.pools): their GPU NICs' VPCs, multi-networking on the
        # cluster, the NICs on the pools' nodes, and the Network objects and plugin installer below.
        fabric = fabric_pools(spec)
        fabric_nics = fabric_networks(wing, fabric)
        node_account = service_account(wing, "nodes", "GKE nodes: logs, metrics, image pulls")
        gcp.projects.IAMMember(
            f"{name}-nodes-role",
            project=project,
            role=_NODE_ROLE,
            member=node_account.member,
            opts=wing.child(),
        )
        cluster = gke_cluster(wing, network, node_account, multi_networking=bool(fabric))
        system = system_pool(wing, cluster, node_account)
        spec_pools = {spec_pool.name: spec_pool for spec_pool in spec.node_pools}
        node_pools = {
            pool.name: gpu_pool(wing, cluster, node_account, spec_pools[pool.name], pool, fabric_nics.get(pool.name))
            for pool in pools
        }
        repository = registry(wing, node_account)
        bucket = training_bucket(wing)
        trainers = trainer_identities(wing, cluster, bucket)
        member_access(wing)
        dashboards.declare(wing)

        kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(
                cluster.location, cluster.name, cluster.endpoint, cluster.master_auth.cluster_ca_certificate
            ).apply(lambda a: plan.kubeconfig(plan.kubeconfig_context(project, a[0], a[1]), a[2], a[3]))
        )
        # Kubernetes resources wait for nodes to run on and, on a new network, a way out to
        # chart and image registries.
        ready: list[pulumi.Resource] = [system]
        if network.nat is not None:
            ready.append(network.nat)
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=kubeconfig,
            enable_server_side_apply=True,
            opts=wing.child(depends_on=ready),
        )
        fabric_objects = gpudirect_objects.declare(wing, self.provider, fabric, fabric_nics, [system])
        self.ready: list[pulumi.Resource] = [*ready, *node_pools.values(), *fabric_objects]
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

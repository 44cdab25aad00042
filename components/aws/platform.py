"""The AWS wing: network, EKS, GPU node groups, autoscaler, registry and bucket, from the spec."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import naming
from components.aws import karpenter_plan, plan
from components.aws.autoscaler import ClusterAutoscaler
from components.aws.cluster import Account, EksCluster
from components.aws.efs import TrainingFileSystem
from components.aws.karpenter import Karpenter
from components.aws.metrics_workspace import MetricsWorkspace
from components.aws.network import Network
from components.aws.nodes import GpuNodeGroup, asg_name
from components.aws.storage import TrainingStorage
from components.facts import aws as aws_facts
from components.facts import charts
from components.kubernetes import DataVolume
from components.naming import resource_name
from components.observability.objects import RemoteWrite
from components.pools import Pool
from components.spec import DeployTimeProblems, PlatformSpec
from components.spec.karpenter_rules import karpenter_provisions
from components.spec.problems import ROOT


class AwsPlatform(pulumi.ComponentResource):
    """Everything a platform team needs on AWS; hands the Kubernetes GPU layer `provider`.

    `ready` lists what the layer's workloads must wait for: the system nodes and core add-ons
    (its controllers schedule there) and the GPU node groups (its device plugin targets them).
    """

    provider: k8s.Provider
    node_groups: dict[str, aws.eks.NodeGroup]
    ready: list[pulumi.Resource]
    # Per team namespace, the annotations that bind its `trainer` service account to its role.
    trainer_annotations: dict[str, dict[str, pulumi.Output[str]]]
    # Jobs' /data: the EFS file system, one access point per team.
    data_volume: DataVolume
    # Where the chart's Prometheus remote writes (observability.prometheus: amp); else None.
    remote_write: RemoteWrite | None
    outputs: dict[str, Any]

    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        pools: list[Pool],
        region: str,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-platform:aws:AwsPlatform", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        account = Account(
            partition=aws.get_partition().partition,
            region=region,
            id=aws.get_caller_identity().account_id,
        )
        cluster_name = spec.cluster.name
        network = Network(resource_name(spec, "network"), spec, region, child)
        cluster = EksCluster(name, spec, account, list(network.private_subnets.values()), child)
        self.provider = cluster.provider

        offered = instance_type_zones(sorted({p.instance_type for p in spec.node_pools if p.instance_type}))
        problems = [
            problem
            for i, spec_pool in enumerate(spec.node_pools)
            for problem in plan.zone_problems(
                spec_pool, f"{ROOT}.nodePools[{i}]", network.zones, offered[spec_pool.instance_type or ""]
            )
        ]
        if problems:
            raise DeployTimeProblems(problems)
        spec_pools = {p.name: p for p in spec.node_pools}
        # Pools Karpenter provisions get a NodePool; the others a node group the autoscaler sizes.
        launched = [p for p in pools if karpenter_provisions(spec, spec_pools[p.name])]
        grouped = [p for p in pools if p not in launched]
        groups: dict[str, GpuNodeGroup] = {}
        for pool in grouped:
            spec_pool = spec_pools[pool.name]
            zones = plan.pool_zones(spec_pool, network.zones, offered[spec_pool.instance_type or ""])
            groups[pool.name] = GpuNodeGroup(
                resource_name(spec, pool.name),
                cluster_name=cluster_name,
                cluster=cluster.name,
                pool=pool,
                spec_pool=spec_pool,
                node_role_arn=cluster.node_role_arn,
                subnet_ids=[network.private_subnets[zone] for zone in zones],
                security_group_id=cluster.security_group_id,
                after=[*cluster.addons, *cluster.node_role_policies],
                opts=child,
            )
        self.node_groups = {pool: group.node_group for pool, group in groups.items()}

        if grouped:
            ClusterAutoscaler(
                resource_name(spec, "cluster-autoscaler"),
                cluster_name=cluster_name,
                kubernetes_version=spec.cluster.kubernetes_version,
                cluster=cluster,
                account=account,
                pools=grouped,
                asg_names={pool: group.asg_name for pool, group in groups.items()},
                system_asg_name=asg_name(cluster.system_nodes),
                opts=child,
            )
        node_pools: list[pulumi.Resource] = []
        if karpenter_plan.uses_karpenter(spec):
            karpenter = Karpenter(
                resource_name(spec, "karpenter"),
                cluster_name=cluster_name,
                cluster=cluster,
                account=account,
                pools=[(pool, spec_pools[pool.name]) for pool in launched],
                # A new VPC's subnets carry the discovery tag already (Network).
                tag_subnets=list(network.private_subnets.values()) if spec.aws_settings.network.vpc_id else [],
                ami_alias=spec.aws_settings.karpenter.ami_alias,
                opts=child,
            )
            node_pools = [karpenter.release, *karpenter.node_pools]
        if any(p.efa for p in spec.node_pools):
            chart = charts.EFA_DEVICE_PLUGIN
            k8s.helm.v3.Release(
                resource_name(spec, "efa-device-plugin"),
                name="aws-efa-k8s-device-plugin",
                chart=chart.name,
                version=chart.version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
                namespace=chart.namespace,
                values=plan.efa_device_plugin_values(pools, spec),
                opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider),
            )
        storage = TrainingStorage(resource_name(spec, "storage"), spec, cluster, child)
        # IRSA (EKS docs: "Assign IAM roles to Kubernetes service accounts"): each team's
        # `trainer` account names its team's role.
        self.trainer_annotations = {
            namespace: {"eks.amazonaws.com/role-arn": arn} for namespace, arn in storage.trainer_role_arns.items()
        }
        self.registry = storage.registry
        file_system = TrainingFileSystem(
            resource_name(spec, "training-data"),
            spec,
            vpc_id=network.vpc_id,
            subnets=network.private_subnets,
            node_security_group_id=cluster.security_group_id,
            kms_key_arn=storage.data_key_arn,
            mount_role_arn=cluster.addon_role_arns["aws-efs-csi-driver"],
            opts=child,
        )
        self.data_volume = file_system.data_volume
        self.ready = [cluster.system_nodes, *cluster.addons, *self.node_groups.values(), *node_pools]

        self.outputs = {
            "kubeconfig": cluster.kubeconfig,
            "clusterName": cluster.name,
            "oidcIssuer": cluster.oidc_issuer,
            "registryUrl": storage.repository_url,
            "bucketName": storage.bucket_name,
            "trainerRoleArns": storage.trainer_role_arns,
            "dataFileSystemId": file_system.file_system_id,
            "nodeGroups": {pool: group.node_group_name for pool, group in self.node_groups.items()},
        }
        if launched:
            self.outputs["nodePools"] = [pool.name for pool in launched]
        self.remote_write = None
        if spec.observability.backend(spec.cloud) == "amp":
            workspace = MetricsWorkspace(
                resource_name(spec, "metrics"), f"{cluster_name}-metrics", cluster, account, child
            )
            self.remote_write = workspace.remote_write
            self.outputs["prometheusWorkspaceEndpoint"] = workspace.endpoint
        if not spec.scheduling.teams:
            # The one role of a stack without teams, under the output name it always had.
            self.outputs["trainerRoleArn"] = storage.trainer_role_arns[naming.team_namespace(naming.DEFAULT_TEAM)]
        self.register_outputs(self.outputs)


def instance_type_zones(instance_types: list[str]) -> dict[str, set[str]]:
    """The availability zones of the stack's region where EC2 offers each instance type, looked
    up at deploy time: zone names map to different physical zones in each account, so no table
    in the repository can say (aws.ec2.get_instance_type_offerings, location type
    availability-zone; the offline synth answers from infra.mock_outputs)."""
    return {
        instance_type: set(
            aws.ec2.get_instance_type_offerings(
                location_type="availability-zone",
                filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=[instance_type])],
            ).locations
        )
        for instance_type in instance_types
    }

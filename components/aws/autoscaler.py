"""The cluster autoscaler: the only thing that sizes GPU node groups."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws import iam, plan
from components.aws.cluster import Account, EksCluster
from components.facts import aws as aws_facts
from components.facts import charts
from components.pools import Pool


class ClusterAutoscaler(pulumi.ComponentResource):
    """Cluster-autoscaler (Helm, pinned) with an IRSA role that may resize only this cluster's
    groups, auto-discovery by tag, and a priority expander table derived from the pools."""

    release: k8s.helm.v3.Release

    def __init__(
        self,
        name: str,
        *,
        cluster_name: str,
        kubernetes_version: str,
        cluster: EksCluster,
        account: Account,
        pools: list[Pool],
        asg_names: dict[str, pulumi.Output[str]],
        system_asg_name: pulumi.Output[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-platform:aws:ClusterAutoscaler", name, None, opts)
        subject = f"system:serviceaccount:{plan.AUTOSCALER_NAMESPACE}:{plan.AUTOSCALER_SERVICE_ACCOUNT}"
        role = cluster.irsa_role(name, [subject], pulumi.ResourceOptions(parent=self))
        aws.iam.RolePolicy(
            name,
            role=role.id,
            policy=json.dumps(
                iam.cluster_autoscaler_policy(cluster_name, account.partition, account.region, account.id)
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        names = list(asg_names)
        priorities = pulumi.Output.all(system_asg_name, *asg_names.values()).apply(
            lambda resolved: plan.expander_priorities(pools, dict(zip(names, resolved[1:])), resolved[0])
        )
        chart = charts.CLUSTER_AUTOSCALER
        self.release = k8s.helm.v3.Release(
            name,
            name="cluster-autoscaler",
            chart=chart.name,
            version=chart.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
            namespace=plan.AUTOSCALER_NAMESPACE,
            values=plan.autoscaler_values(
                cluster_name, account.region, kubernetes_version, role.arn, priorities, pools
            ),
            opts=pulumi.ResourceOptions(parent=self, provider=cluster.provider),
        )
        self.register_outputs({"roleArn": role.arn})

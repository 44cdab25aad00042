"""Karpenter: the controller, its IAM role and interruption queue, the role of the nodes it
launches, and an EC2NodeClass and NodePool per pool it provisions (karpenter_plan)."""

from __future__ import annotations

import json
from typing import Sequence

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws import iam, karpenter_iam, karpenter_plan
from components.aws.cluster import Account, EksCluster
from components.facts import aws as aws_facts
from components.facts import charts
from components.facts import karpenter as facts
from components.pools import Pool
from components.spec import NodePoolSpec


class Karpenter(pulumi.ComponentResource):
    """The controller (Helm, pinned, on the system nodes; its CRDs the karpenter-crd release's,
    so that upgrades reach them) with an IRSA role holding the policy
    Karpenter documents; the SQS queue its EventBridge rules fill with interruption notices; a node
    role with an EC2_LINUX access entry (Karpenter's nodes join through it); discovery tags on the
    cluster security group and, for an existing VPC, the private subnets (a new VPC's carry it
    from the start, components/aws/network.py)."""

    release: k8s.helm.v3.Release
    node_pools: list[k8s.apiextensions.CustomResource]

    def __init__(
        self,
        name: str,
        *,
        cluster_name: str,
        cluster: EksCluster,
        account: Account,
        pools: Sequence[tuple[Pool, NodePoolSpec]],
        tag_subnets: Sequence[pulumi.Output[str]],
        ami_alias: str | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-platform:aws:Karpenter", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        node_role = aws.iam.Role(
            f"{name}-node",
            assume_role_policy=json.dumps(iam.service_trust_policy("ec2.amazonaws.com")),
            opts=child,
        )
        for policy in (*aws_facts.NODE_ROLE_POLICIES, *facts.NODE_ROLE_EXTRA_POLICIES):
            aws.iam.RolePolicyAttachment(
                f"{name}-node-{policy.rsplit('/', 1)[-1]}",
                role=node_role.name,
                policy_arn=iam.managed_policy_arn(account.partition, policy),
                opts=child,
            )
        # Nodes of managed node groups get their entry from EKS; Karpenter's nodes need one of
        # type EC2_LINUX (EKS "Create access entries": EC2_LINUX for self-managed and Karpenter nodes).
        access = aws.eks.AccessEntry(
            f"{name}-node", cluster_name=cluster.name, principal_arn=node_role.arn, type="EC2_LINUX", opts=child
        )

        queue = aws.sqs.Queue(
            f"{name}-interruption",
            name=f"{cluster_name}-karpenter",
            message_retention_seconds=facts.QUEUE_RETENTION_SECONDS,
            sqs_managed_sse_enabled=True,
            opts=child,
        )
        queue_policy = aws.sqs.QueuePolicy(
            f"{name}-interruption",
            queue_url=queue.id,
            policy=queue.arn.apply(lambda arn: json.dumps(karpenter_iam.interruption_queue_policy(arn))),
            opts=child,
        )
        for rule_name, pattern in sorted(facts.INTERRUPTION_RULES.items()):
            rule = aws.cloudwatch.EventRule(f"{name}-{rule_name}", event_pattern=json.dumps(pattern), opts=child)
            aws.cloudwatch.EventTarget(
                f"{name}-{rule_name}", rule=rule.name, arn=queue.arn, target_id="KarpenterInterruptionQueueTarget", opts=child
            )

        tags = [
            aws.ec2.Tag(
                f"{name}-discovery-security-group",
                resource_id=cluster.security_group_id,
                key=facts.DISCOVERY_TAG,
                value=cluster_name,
                opts=child,
            )
        ]
        for i, subnet in enumerate(tag_subnets):
            tags.append(
                aws.ec2.Tag(f"{name}-discovery-subnet-{i}", resource_id=subnet, key=facts.DISCOVERY_TAG, value=cluster_name, opts=child)
            )

        subject = f"system:serviceaccount:{karpenter_plan.NAMESPACE}:{karpenter_plan.SERVICE_ACCOUNT}"
        role = cluster.irsa_role(name, [subject], child)
        controller_policy = aws.iam.RolePolicy(
            name,
            role=role.id,
            policy=pulumi.Output.all(node_role.arn, queue.arn).apply(
                lambda arns: json.dumps(
                    karpenter_iam.controller_policy(cluster_name, account.partition, account.region, account.id, arns[0], arns[1])
                )
            ),
            opts=child,
        )
        on_cluster = pulumi.ResourceOptions(parent=self, provider=cluster.provider)
        crds = k8s.helm.v3.Release(
            f"{name}-crd",
            name=charts.KARPENTER_CRD.name,
            chart=charts.KARPENTER_CRD.reference,
            version=charts.KARPENTER_CRD.version,
            namespace=charts.KARPENTER_CRD.namespace,
            opts=on_cluster,
        )
        chart = charts.KARPENTER
        self.release = k8s.helm.v3.Release(
            name,
            name=chart.name,
            chart=chart.reference,
            version=chart.version,
            namespace=chart.namespace,
            values=karpenter_plan.controller_values(cluster_name, queue.name, role.arn),
            # The CRDs are the karpenter-crd release's, which upgrades them (charts.KARPENTER_CRD).
            skip_crds=True,
            # Deleted before what the controller acts with, so that on `pulumi destroy` it still
            # drains and terminates its nodes (rule karpenter-permissions-outlive-nodes).
            opts=pulumi.ResourceOptions.merge(
                on_cluster,
                pulumi.ResourceOptions(depends_on=[crds, access, cluster.system_nodes, controller_policy, queue_policy, *tags]),
            ),
        )

        # Sent once the CRDs exist and the controller runs; deleted while it still does (their finalizers).
        after_release = pulumi.ResourceOptions.merge(on_cluster, pulumi.ResourceOptions(depends_on=[crds, self.release]))
        self.node_pools = []
        for pool, spec_pool in pools:
            node_class = k8s.apiextensions.CustomResource(
                f"{name}-{pool.name}-nodeclass",
                api_version=facts.NODE_CLASS_API,
                kind="EC2NodeClass",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=pool.name),
                spec=karpenter_plan.node_class(spec_pool, pool, cluster_name, node_role.name, ami_alias),
                opts=after_release,
            )
            self.node_pools.append(
                k8s.apiextensions.CustomResource(
                    f"{name}-{pool.name}-nodepool",
                    api_version=facts.NODE_POOL_API,
                    kind="NodePool",
                    metadata=k8s.meta.v1.ObjectMetaArgs(name=pool.name),
                    spec=karpenter_plan.node_pool(spec_pool, pool, pool.name),
                    opts=pulumi.ResourceOptions.merge(after_release, pulumi.ResourceOptions(depends_on=[node_class])),
                )
            )
        self.register_outputs({"roleArn": role.arn, "nodeRoleArn": node_role.arn, "interruptionQueue": queue.name})

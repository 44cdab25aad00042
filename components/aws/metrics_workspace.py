"""Amazon Managed Service for Prometheus (`observability.prometheus: amp`): a workspace the
in-cluster Prometheus remote writes to, and the IRSA role that lets only its service account write.

AMP docs, "Set up ingestion from a new Prometheus server using Helm"
(https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-onboard-ingest-metrics-new-Prometheus.html):
a workspace, a role for the Prometheus server's service account with remote write rights, and
the server's remote write to `<workspace endpoint>api/v1/remote_write` signed with sigv4.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from components.aws import iam
from components.aws.cluster import Account, EksCluster
from components.facts import charts
from components.observability.objects import PROMETHEUS_SERVICE_ACCOUNT, RemoteWrite

# Appended to the workspace's prometheus_endpoint, which ends in "/" (pulumi-aws amp.Workspace;
# AMP API reference, "Remote write": POST /workspaces/<id>/api/v1/remote_write).
REMOTE_WRITE_PATH = "api/v1/remote_write"
PROMETHEUS_SUBJECT = f"system:serviceaccount:{charts.KUBE_PROMETHEUS_STACK.namespace}:{PROMETHEUS_SERVICE_ACCOUNT}"


class MetricsWorkspace(pulumi.ComponentResource):
    """`endpoint`: the workspace's Prometheus-compatible endpoint (query and write), a stack
    output; `remote_write`: what the chart's values need (components.observability.objects)."""

    endpoint: pulumi.Output[str]
    remote_write: RemoteWrite

    def __init__(
        self, name: str, alias: str, cluster: EksCluster, account: Account, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:aws:MetricsWorkspace", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        workspace = aws.amp.Workspace(name, alias=alias, opts=child)
        role = cluster.irsa_role(f"{name}-remote-write", [PROMETHEUS_SUBJECT], child)
        policy = aws.iam.RolePolicy(
            f"{name}-remote-write",
            role=role.id,
            policy=workspace.arn.apply(lambda arn: json.dumps(iam.prometheus_remote_write_policy(arn))),
            opts=child,
        )
        self.endpoint = workspace.prometheus_endpoint
        self.remote_write = RemoteWrite(
            url=workspace.prometheus_endpoint.apply(lambda endpoint: f"{endpoint}{REMOTE_WRITE_PATH}"),
            region=account.region,
            role_arn=role.arn,
            grants=(policy,),
        )
        self.register_outputs({"endpoint": self.endpoint})

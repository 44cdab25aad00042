"""Cloud Monitoring dashboards on GKE's managed backend, where no Grafana runs
(components.observability.cloud_dashboards builds their JSON from the Grafana boards)."""

from __future__ import annotations

import json

import pulumi_gcp as gcp

from components.gcp.wing import Wing
from components.observability import cloud_dashboards


def declare(wing: Wing) -> list[gcp.monitoring.Dashboard]:
    """One dashboard per board with series on GKE, in the stack's project; none unless the stack
    stores its metrics in Google Cloud Managed Service for Prometheus."""
    if wing.spec.observability.backend(wing.spec.cloud) != "managed":
        return []
    return [
        gcp.monitoring.Dashboard(
            f"{wing.name}-dashboard-{uid}",
            project=wing.project,
            dashboard_json=json.dumps(doc, sort_keys=True),
            opts=wing.child(),
        )
        for uid, doc in cloud_dashboards.dashboards(wing.spec.cluster.name).items()
    ]

"""The metrics stack as Pulumi resources, declared by the GPU layer on its cluster's provider.

kube-prometheus-stack first (it brings the monitoring.coreos.com CRDs), then the scrape and rule
objects the operator reads; with GKE's managed collection the cluster already has GMP's CRDs.
"""

from __future__ import annotations

from typing import Any, Mapping

import pulumi
import pulumi_kubernetes as k8s

from components.facts import charts
from components.observability import dashboards, gmp_https, objects
from components.observability.rules import global_rule_groups, rule_groups
from components.pools import Pool
from components.spec import PlatformSpec, PriorityTierSpec


def _custom(resource_name: str, obj: Mapping[str, Any], opts: pulumi.ResourceOptions) -> k8s.apiextensions.CustomResource:
    meta = obj["metadata"]
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        metadata=k8s.meta.v1.ObjectMetaArgs(name=meta["name"], namespace=meta.get("namespace"), labels=meta["labels"]),
        spec=dict(obj["spec"]),
        opts=opts,
    )


def declare(
    name: str,
    spec: PlatformSpec,
    pools: list[Pool],
    tiers: tuple[PriorityTierSpec, ...],
    opts: pulumi.ResourceOptions,
    after: list[pulumi.Resource],
    remote_write: objects.RemoteWrite | None = None,
) -> None:
    """`after`: what the scrape targets' controllers need first (Kueue's webhook gate);
    `remote_write`: the AMP workspace (prometheus: amp), which the AWS wing declares."""
    backend = spec.observability.backend(spec.cloud)
    if backend == "none":
        return
    rules = objects.rule_object(spec, rule_groups(spec, pools, tiers))
    if backend == "managed":
        global_groups = global_rule_groups(spec)
        global_rules = [objects.global_rule_object(global_groups)] if global_groups else []
        for obj in [*objects.gmp_scrape_objects(), rules, *global_rules]:
            _custom(f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}", obj, opts)
        # Kueue's and JobSet's metrics, in their namespaces: after their charts (Kueue's
        # webhook gate, which follows Kueue, which follows JobSet).
        after_charts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=after))
        for target in gmp_https.TARGETS:
            gmp_https.declare_access(name, target, after_charts)
            _custom(f"{name}-podmonitoring-{target.name}", gmp_https.pod_monitoring(target), after_charts)
        return
    chart = charts.KUBE_PROMETHEUS_STACK
    # Node exporter reads the host (hostNetwork, hostPID, host paths), which Pod Security's
    # baseline and restricted levels refuse, as for the GPU node agents.
    namespace = k8s.core.v1.Namespace(
        f"{name}-{chart.namespace}",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=chart.namespace, labels={"pod-security.kubernetes.io/enforce": "privileged"}
        ),
        opts=opts,
    )
    release = k8s.helm.v3.Release(
        f"{name}-{chart.name}",
        name=chart.name,
        chart=chart.reference,
        version=chart.version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
        namespace=chart.namespace,
        create_namespace=False,
        values=objects.kube_prometheus_stack_values(spec, remote_write),
        opts=pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(depends_on=[namespace, *(remote_write.grants if remote_write else ())])
        ),
    )
    after_crds = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[release, *after]))
    # Kueue and JobSet authorize /metrics by a SubjectAccessReview for GET on the non-resource URL
    # /metrics (controller-runtime's filters.WithAuthenticationAndAuthorization), which the chart
    # already grants Prometheus's account: kube-prometheus-stack-88.5.3
    # templates/prometheus/clusterrole.yaml (nonResourceURLs "/metrics", verb get) and
    # clusterrolebinding.yaml (to prometheus.serviceAccount.name), both on by default
    # (prometheus.enabled, global.rbac.create). No binding of the charts' reader roles is needed.
    scraped = objects.operator_scrape_objects()
    if spec.monitoring.service_monitor or not spec.monitoring.dcgm:
        # The exporter's chart declares its own ServiceMonitor, or there is no exporter.
        scraped = [obj for obj in scraped if obj["metadata"]["name"] != "dcgm-exporter"]
    for obj in [*scraped, rules]:
        _custom(f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}", obj, after_crds)
    if spec.observability.grafana_on(spec.cloud):
        for board in dashboards.config_maps():
            meta = board["metadata"]
            k8s.core.v1.ConfigMap(
                f"{name}-dashboard-{meta['name']}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=meta["name"], namespace=meta["namespace"], labels=meta["labels"]),
                data=board["data"],
                opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[namespace])),
            )

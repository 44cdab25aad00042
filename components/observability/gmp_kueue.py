"""GKE managed collection of Kueue's metrics, which the queue alerts and cost records read.

Kueue serves /metrics over https on its manager's `metrics` port (8443) and lets a caller in
only after a TokenReview and a SubjectAccessReview for GET /metrics, which the chart's
`kueue-metrics-reader` ClusterRole grants (kubernetes-sigs/kueue@v0.19.2 cmd/kueue/main.go,
controller-runtime's metrics filters; charts/kueue/templates/rbac/metrics_reader_role.yaml).
GMP's collector has no such role and sends no token of its own, so a PodMonitoring's
endpoint carries one: a ServiceAccount bound to that role, its token in a Secret the token
controller fills (Kubernetes docs, "Manually create a long-lived API token for a
ServiceAccount"), named by `authorization.credentials.secret`, which must live in the
PodMonitoring's namespace (GoogleCloudPlatform/prometheus-engine@v0.17.5
pkg/operator/apis/monitoring/v1/http_types.go, toPrometheusSecretRef). The collector fetches
that Secret with its own account, by GET and by a watch on its name
(GoogleCloudPlatform/prometheus google/secrets/watch.go), which its ClusterRole does not cover
(manifests/operator.yaml, gmp-system:collector): a Role grants exactly that Secret.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.facts import charts
from components.observability.objects import GMP_API, KUEUE_METRICS_READER

NAMESPACE = charts.KUEUE.namespace
SCRAPER = "gpu-platform-kueue-scraper"
TOKEN_SECRET = f"{SCRAPER}-token"
# The key the token controller writes the ServiceAccount's token under.
TOKEN_KEY = "token"
# GMP's collector DaemonSet runs as gmp-system/collector (prometheus-engine v0.17 manifests).
GMP_COLLECTOR_NAMESPACE = "gmp-system"
GMP_COLLECTOR_ACCOUNT = "collector"
# The Kueue manager pod's labels for release `kueue` and its metrics port's name (chart 0.19.2
# templates/_helpers.tpl kueue.selectorLabels, templates/manager/manager.yaml ports).
KUEUE_POD: dict[str, str] = {
    "app.kubernetes.io/name": "kueue",
    "app.kubernetes.io/instance": charts.KUEUE.name,
    "control-plane": "controller-manager",
}
KUEUE_METRICS_PORT = "metrics"
_LABELS = {"app.kubernetes.io/part-of": "gpu-platform"}


def pod_monitoring() -> dict[str, Any]:
    """Kueue's manager, over https with the scraper's token. The serving certificate is
    self-signed (controller-runtime's, or cert-manager's without a CA we distribute), so it is
    not verified, as the chart's own ServiceMonitor does."""
    return {
        "apiVersion": GMP_API,
        "kind": "PodMonitoring",
        "metadata": {"name": "kueue", "namespace": NAMESPACE, "labels": dict(_LABELS)},
        "spec": {
            "selector": {"matchLabels": dict(KUEUE_POD)},
            "endpoints": [
                {
                    "port": KUEUE_METRICS_PORT,
                    "scheme": "https",
                    "path": "/metrics",
                    "interval": "30s",
                    "tls": {"insecureSkipVerify": True},
                    "authorization": {
                        "type": "Bearer",
                        "credentials": {"secret": {"name": TOKEN_SECRET, "key": TOKEN_KEY}},
                    },
                }
            ],
        },
    }


def declare_access(name: str, opts: pulumi.ResourceOptions) -> None:
    """The scraper's account, its token, its metrics role, and the collector's read of the token."""
    meta = lambda resource: k8s.meta.v1.ObjectMetaArgs(name=resource, namespace=NAMESPACE, labels=_LABELS)  # noqa: E731
    account = k8s.core.v1.ServiceAccount(f"{name}-kueue-scraper", metadata=meta(SCRAPER), opts=opts)
    k8s.core.v1.Secret(
        f"{name}-kueue-scraper-token",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=TOKEN_SECRET,
            namespace=NAMESPACE,
            labels=_LABELS,
            annotations={"kubernetes.io/service-account.name": SCRAPER},
        ),
        type="kubernetes.io/service-account-token",
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[account])),
    )
    k8s.rbac.v1.ClusterRoleBinding(
        f"{name}-kueue-scraper-metrics",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{SCRAPER}-metrics", labels=_LABELS),
        role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=KUEUE_METRICS_READER),
        subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=SCRAPER, namespace=NAMESPACE)],
        opts=opts,
    )
    role = k8s.rbac.v1.Role(
        f"{name}-kueue-scraper-token-reader",
        metadata=meta(f"{SCRAPER}-token-reader"),
        rules=[
            k8s.rbac.v1.PolicyRuleArgs(
                api_groups=[""], resources=["secrets"], resource_names=[TOKEN_SECRET], verbs=["get", "list", "watch"]
            )
        ],
        opts=opts,
    )
    k8s.rbac.v1.RoleBinding(
        f"{name}-kueue-scraper-token-reader",
        metadata=meta(f"{SCRAPER}-token-reader"),
        role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name=f"{SCRAPER}-token-reader"),
        subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=GMP_COLLECTOR_ACCOUNT, namespace=GMP_COLLECTOR_NAMESPACE)],
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[role])),
    )

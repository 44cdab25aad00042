"""GKE managed collection of the controllers that serve /metrics over https behind
controller-runtime's authentication filter: Kueue (the queue alerts and cost records read it)
and JobSet.

Both managers serve /metrics over https on their pod's `metrics` port (8443) and let a caller in
only after a TokenReview and a SubjectAccessReview for GET /metrics (controller-runtime's
`filters.WithAuthenticationAndAuthorization`), which each chart's metrics-reader ClusterRole
grants: kubernetes-sigs/kueue@v0.19.2 cmd/kueue/main.go and
charts/kueue/templates/rbac/metrics_reader_role.yaml (`kueue-metrics-reader`);
kubernetes-sigs/jobset@v0.12.0 main.go (metricsserver.Options SecureServing, FilterProvider) and
charts/jobset/templates/rbac/auth_proxy_client_clusterrole.yaml (`<fullname>-metrics-reader`,
bound there only to JobSet's own account). GMP's collector has no such role and sends no token
of its own, so a PodMonitoring's endpoint carries one: a ServiceAccount bound to that role, its
token in a Secret the token controller fills (Kubernetes docs, "Manually create a long-lived API
token for a ServiceAccount"), named by `authorization.credentials.secret`, which must live in the
PodMonitoring's namespace (GoogleCloudPlatform/prometheus-engine@v0.17.5
pkg/operator/apis/monitoring/v1/http_types.go, toPrometheusSecretRef). The collector fetches
that Secret with its own account, by GET and by a watch on its name
(GoogleCloudPlatform/prometheus google/secrets/watch.go), which its ClusterRole does not cover
(manifests/operator.yaml, gmp-system:collector): a Role grants exactly that Secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.facts import charts
from components.observability.objects import GMP_API, JOBSET_METRICS_READER, KUEUE_METRICS_READER

# The key the token controller writes the ServiceAccount's token under.
TOKEN_KEY = "token"
# GMP's collector DaemonSet runs as gmp-system/collector (prometheus-engine v0.17 manifests).
GMP_COLLECTOR_NAMESPACE = "gmp-system"
GMP_COLLECTOR_ACCOUNT = "collector"
METRICS_PORT = "metrics"
_LABELS = {"app.kubernetes.io/part-of": "gpu-platform"}


@dataclass(frozen=True)
class Target:
    """A controller's manager pod, by its chart's labels, and the ClusterRole that may read it."""

    name: str
    namespace: str
    pod: dict[str, str]
    metrics_reader: str

    @property
    def scraper(self) -> str:
        return f"gpu-platform-{self.name}-scraper"

    @property
    def token_secret(self) -> str:
        return f"{self.scraper}-token"


# The Kueue manager pod's labels for release `kueue` and its metrics port's name (chart 0.19.2
# templates/_helpers.tpl kueue.selectorLabels, templates/manager/manager.yaml ports).
KUEUE = Target(
    "kueue",
    charts.KUEUE.namespace,
    {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/instance": charts.KUEUE.name, "control-plane": "controller-manager"},
    KUEUE_METRICS_READER,
)
# The JobSet controller pod's labels for release `jobset` (chart 0.12.0 templates/_helpers.tpl
# jobset.selectorLabels, templates/controller/_helpers.tpl jobset.controller.selectorLabels) and
# its port `metrics`, 8443 (templates/controller/deployment.yaml).
JOBSET = Target(
    "jobset",
    charts.JOBSET.namespace,
    {"app.kubernetes.io/name": "jobset", "app.kubernetes.io/instance": charts.JOBSET.name, "app.kubernetes.io/component": "controller"},
    JOBSET_METRICS_READER,
)
TARGETS: tuple[Target, ...] = (KUEUE, JOBSET)


def pod_monitoring(target: Target) -> dict[str, Any]:
    """The manager, over https with the scraper's token. The serving certificate is
    self-signed (controller-runtime's, or cert-manager's without a CA we distribute), so it is
    not verified, as each chart's own ServiceMonitor does."""
    return {
        "apiVersion": GMP_API,
        "kind": "PodMonitoring",
        "metadata": {"name": target.name, "namespace": target.namespace, "labels": dict(_LABELS)},
        "spec": {
            "selector": {"matchLabels": dict(target.pod)},
            "endpoints": [
                {
                    "port": METRICS_PORT,
                    "scheme": "https",
                    "path": "/metrics",
                    "interval": "30s",
                    "tls": {"insecureSkipVerify": True},
                    "authorization": {
                        "type": "Bearer",
                        "credentials": {"secret": {"name": target.token_secret, "key": TOKEN_KEY}},
                    },
                }
            ],
        },
    }


def declare_access(name: str, target: Target, opts: pulumi.ResourceOptions) -> None:
    """The scraper's account, its token, its metrics role, and the collector's read of the token."""
    scraper, secret, namespace = target.scraper, target.token_secret, target.namespace
    prefix = f"{name}-{target.name}-scraper"
    meta = lambda resource: k8s.meta.v1.ObjectMetaArgs(name=resource, namespace=namespace, labels=_LABELS)  # noqa: E731
    account = k8s.core.v1.ServiceAccount(prefix, metadata=meta(scraper), opts=opts)
    k8s.core.v1.Secret(
        f"{prefix}-token",
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=secret,
            namespace=namespace,
            labels=_LABELS,
            annotations={"kubernetes.io/service-account.name": scraper},
        ),
        type="kubernetes.io/service-account-token",
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[account])),
    )
    k8s.rbac.v1.ClusterRoleBinding(
        f"{prefix}-metrics",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=f"{scraper}-metrics", labels=_LABELS),
        role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=target.metrics_reader),
        subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=scraper, namespace=namespace)],
        opts=opts,
    )
    role = k8s.rbac.v1.Role(
        f"{prefix}-token-reader",
        metadata=meta(f"{scraper}-token-reader"),
        rules=[
            k8s.rbac.v1.PolicyRuleArgs(
                api_groups=[""], resources=["secrets"], resource_names=[secret], verbs=["get", "list", "watch"]
            )
        ],
        opts=opts,
    )
    k8s.rbac.v1.RoleBinding(
        f"{prefix}-token-reader",
        metadata=meta(f"{scraper}-token-reader"),
        role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name=f"{scraper}-token-reader"),
        subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=GMP_COLLECTOR_ACCOUNT, namespace=GMP_COLLECTOR_NAMESPACE)],
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[role])),
    )

"""The metrics stack's objects as plain data: chart values, scrape objects, rule objects.

Two backends read them. kube-prometheus-stack's operator reads ServiceMonitor, PodMonitor and
PrometheusRule (monitoring.coreos.com/v1, schemas in tests/data/schemas from the chart's crds
subchart at 88.5.3); GKE's managed collection reads PodMonitoring, ClusterPodMonitoring and
ClusterRules (monitoring.googleapis.com/v1, GoogleCloudPlatform/prometheus-engine@v0.17.2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pulumi

from components.facts import charts
from components.facts.metrics import DCGM_ADDED, DCGM_DEFAULT
from components.pools import POOL_LABEL
from components.spec import PlatformSpec

OPERATOR_API = "monitoring.coreos.com/v1"
GMP_API = "monitoring.googleapis.com/v1"
NAMESPACE = charts.KUBE_PROMETHEUS_STACK.namespace
# Prometheus's account, named explicitly so it does not follow the release name (the chart's
# default is <fullname>-prometheus; kube-prometheus-stack-88.5.3 templates/_helpers.tpl); the
# chart's own ClusterRoleBinding gives it GET /metrics (see stack.declare).
PROMETHEUS_SERVICE_ACCOUNT = "prometheus"
# The port rank 0 serves on (trainer.metrics_server reads TRAINER_METRICS_PORT) and its name.
TRAINER_METRICS_PORT = 9400 + 8
TRAINER_PORT_NAME = "metrics"
# Set by JobSet on every pod of a JobSet (kubernetes-sigs/jobset@v0.12.0 api: JobSetNameKey).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# Every pod of every JobSet is scraped, not one chosen by index: global rank 0 (the one process
# that serves, trainer.metrics_server) runs on whichever node torchrun's c10d rendezvous numbers
# 0, and c10d numbers nodes by its sorted participant list, not by JobSet job index or Indexed Job
# completion index (torch 2.13 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:833,
# `enumerate(sorted(state.participants))`, participants keyed by address; docs/scheduling.md). The other pods declare the port but serve
# nothing, so their targets read up=0; no rule or dashboard reads `up` for trainers (tests/observability checks it).
TRAINER_PODS: dict[str, Any] = {"matchExpressions": [{"key": JOBSET_NAME_LABEL, "operator": "Exists"}]}
# The grafana subchart's dashboard sidecar loads ConfigMaps with this label (its default,
# kube-prometheus-stack values grafana.sidecar.dashboards.label).
DASHBOARD_LABEL = "grafana_dashboard"
# The Kueue chart's ClusterRole that may GET /metrics (kubernetes-sigs/kueue@v0.19.2
# charts/kueue/templates/rbac/metrics_reader_role.yaml, release `kueue`); the metrics endpoint
# authorizes scrapers by it.
KUEUE_METRICS_READER = "kueue-metrics-reader"
# The JobSet chart's ClusterRole that may GET /metrics, `<fullname>-metrics-reader`, fullname
# `jobset` for release `jobset` (kubernetes-sigs/jobset@v0.12.0
# charts/jobset/templates/rbac/auth_proxy_client_clusterrole.yaml, templates/_helpers.tpl
# jobset.fullname); the chart binds it only to JobSet's own account.
JOBSET_METRICS_READER = f"{charts.JOBSET.name}-metrics-reader"
# The ConfigMap the dcgm-exporter chart makes of `customMetrics` (4.8.2 templates/metrics-configmap.yaml).
DCGM_COUNTERS_CONFIG_MAP = "exporter-metrics-config-map"


# Control-plane parts the chart scrapes, and alerts on when they are absent, by default
# (kube-prometheus-stack 88.5.3 values kubeControllerManager/kubeScheduler/kubeEtcd/kubeProxy
# `enabled: true`; templates/prometheus/rules-1.14/kubernetes-system-*.yaml, etcd.yaml), with
# their default rule groups (values defaultRules.rules.*). EKS runs the control plane out of the
# cluster's reach, and its kube-proxy serves metrics on 127.0.0.1 only, so on EKS these targets
# are always down and KubeControllerManagerDown, KubeSchedulerDown, etcd and KubeProxyDown fire
# for ever.
EKS_UNREACHABLE: dict[str, tuple[str, ...]] = {
    "kubeControllerManager": ("kubeControllerManager",),
    "kubeScheduler": ("kubeSchedulerAlerting", "kubeSchedulerRecording"),
    "kubeEtcd": ("etcd",),
    "kubeProxy": ("kubeProxy",),
}


# kube-state-metrics publishes a node's labels on kube_node_labels only where they are allowed
# (--metric-labels-allowlist, "nodes=[<key>,...]"; kubernetes/kube-state-metrics@v2.20.0
# docs/developer/cli-arguments.md), which the kube-state-metrics subchart (8.4.0, pinned by
# kube-prometheus-stack 88.5.3) builds from its value `metricLabelsAllowlist`, joined with ","
# (prometheus-community/helm-charts charts/kube-state-metrics/templates/deployment.yaml). The
# key becomes label_<key> with every character outside [a-zA-Z0-9_] made "_" (v2.20.0
# internal/store/utils.go, sanitizeLabelName): the pool is `label_gpu_platform_io_pool`, which
# the fleet dashboard joins DCGM's series with by node.
KSM_METRIC_LABELS_ALLOWLIST: tuple[str, ...] = (f"nodes=[{POOL_LABEL}]",)
KSM_POOL_LABEL = "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", POOL_LABEL)


# The remote write queue AMP's guide sets for a Prometheus server ("Set up ingestion from a new
# Prometheus server using Helm", https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-onboard-ingest-metrics-new-Prometheus.html:
# max_samples_per_send 1000, max_shards 200, capacity 2500), in the operator's spelling
# (prometheus-operator v0.93.1 pkg/apis/monitoring/v1 QueueConfig).
AMP_QUEUE: dict[str, int] = {"maxSamplesPerSend": 1000, "maxShards": 200, "capacity": 2500}
# IRSA: the annotation EKS's pod identity webhook reads on a service account (EKS docs, "Assign
# IAM roles to Kubernetes service accounts").
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"


@dataclass(frozen=True)
class RemoteWrite:
    """An Amazon Managed Service for Prometheus workspace the chart's Prometheus writes to:
    its remote write URL, its region (sigv4 signs for it) and the IRSA role allowed to write.
    `grants`: what gives that role its rights (the role's policy); the release waits for them,
    since the role's ARN alone orders it after the role but not after its policy, and a
    Prometheus started before the policy exists is refused (403) until it does."""

    url: pulumi.Input[str]
    region: str
    role_arn: pulumi.Input[str]
    grants: tuple[pulumi.Resource, ...] = ()


def kube_prometheus_stack_values(spec: PlatformSpec, remote_write: RemoteWrite | None = None) -> dict[str, Any]:
    """Prometheus selects every ServiceMonitor, PodMonitor and PrometheusRule in the cluster
    (the chart's default selects only its own release's), keeps `retention`, and Grafana is
    on where the spec asks. On EKS the control-plane parts it cannot reach are off. With
    `remote_write` (prometheus: amp) it also sends every sample to the workspace, signed with
    sigv4 by the credentials of its service account's IRSA role."""
    obs = spec.observability
    prometheus_spec: dict[str, Any] = {
        "retention": obs.retention,
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelectorNilUsesHelmValues": False,
        "ruleSelectorNilUsesHelmValues": False,
    }
    service_account: dict[str, Any] = {"name": PROMETHEUS_SERVICE_ACCOUNT}
    if remote_write is not None:
        # Passed whole to the Prometheus object's spec.remoteWrite (kube-prometheus-stack
        # 88.5.3 templates/prometheus/prometheus.yaml); the operator's RemoteWriteSpec: `url`,
        # `sigv4.region` (prometheus-operator v0.93.1 pkg/apis/monitoring/v1/types.go). sigv4
        # with no keys takes the default credential chain, which reads the IRSA web identity.
        prometheus_spec["remoteWrite"] = [
            {"url": remote_write.url, "sigv4": {"region": remote_write.region}, "queueConfig": dict(AMP_QUEUE)}
        ]
        service_account["annotations"] = {IRSA_ANNOTATION: remote_write.role_arn}
    values: dict[str, Any] = {
        "prometheus": {"serviceAccount": service_account, "prometheusSpec": prometheus_spec},
        "grafana": {"enabled": obs.grafana_on(spec.cloud)},
        "kube-state-metrics": {"metricLabelsAllowlist": list(KSM_METRIC_LABELS_ALLOWLIST)},
    }
    if spec.cloud == "aws":
        values.update({component: {"enabled": False} for component in EKS_UNREACHABLE})
        values["defaultRules"] = {
            "rules": {rule: False for rules in EKS_UNREACHABLE.values() for rule in rules}
        }
    return values


def dcgm_counters_csv() -> str:
    """The exporter's counters: its default list plus the ECC and violation counters the alerts
    read (the chart's `customMetrics` replaces the whole file; NVIDIA/dcgm-exporter@4.5.3-4.8.2
    deployment/templates/metrics-configmap.yaml)."""
    kinds = {"DCGM_FI_DRIVER_VERSION": "label", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": "counter"}
    counters = {
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    }
    rows = [(name, kinds.get(name, "counter" if name in counters else "gauge")) for name in sorted(DCGM_DEFAULT)]
    rows += list(DCGM_ADDED)
    return "".join(f"{name}, {kind}, {name.lower()}\n" for name, kind in rows)


def _metadata(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/part-of": "gpu-platform"}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _https_token_endpoint() -> dict[str, Any]:
    """A ServiceMonitor endpoint for a controller serving /metrics on port `https` behind
    controller-runtime's authentication filter with a self-signed certificate: Prometheus's own
    account token, no verification (as the Kueue and JobSet charts' own monitors scrape)."""
    return {
        "port": "https",
        "scheme": "https",
        "path": "/metrics",
        "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "tlsConfig": {"insecureSkipVerify": True},
    }


def operator_scrape_objects() -> list[dict[str, Any]]:
    """DCGM exporter, Kueue and JobSet by their Services, the trainers by their pods. kube-state-metrics
    and node exporter are scraped by the chart's own ServiceMonitors."""
    dcgm = {
        "apiVersion": OPERATOR_API,
        "kind": "ServiceMonitor",
        "metadata": _metadata("dcgm-exporter", charts.DCGM_EXPORTER.namespace),
        "spec": {
            # dcgm-exporter 4.8.2 chart templates/service.yaml: port `metrics`, selector labels.
            "selector": {"matchLabels": {"app.kubernetes.io/name": "dcgm-exporter"}},
            # The exporter's own namespace/pod labels name the pod holding each GPU.
            "endpoints": [{"port": "metrics", "interval": "15s", "honorLabels": True}],
        },
    }
    kueue = {
        "apiVersion": OPERATOR_API,
        "kind": "ServiceMonitor",
        "metadata": _metadata("kueue", charts.KUEUE.namespace),
        "spec": {
            # kueue 0.19.2 chart: controller-manager-metrics-service, port `https` (8443), served
            # with a self-signed certificate; the chart's own monitor skips verification too.
            "selector": {
                "matchLabels": {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/component": "metrics-service"}
            },
            "endpoints": [_https_token_endpoint()],
        },
    }
    jobset = {
        "apiVersion": OPERATOR_API,
        "kind": "ServiceMonitor",
        "metadata": _metadata("jobset", charts.JOBSET.namespace),
        "spec": {
            # jobset 0.12.0 chart: the metrics Service `jobset-metrics-service`, labelled with the
            # controller's selector labels, port `https` (8443; templates/prometheus/
            # manager_metrics_service.yaml), always rendered. The controller serves it with
            # controller-runtime's authentication filter and a self-signed certificate (main.go:
            # SecureServing, filters.WithAuthenticationAndAuthorization; internalCertManagement),
            # as the chart's own ServiceMonitor (templates/prometheus/monitor.yaml, only with
            # prometheus.enable) scrapes it: the Prometheus account's token, no verification.
            # The webhook Service carries the webhook's labels and port `webhook`, not these.
            "selector": {
                "matchLabels": {
                    "app.kubernetes.io/name": "jobset",
                    "app.kubernetes.io/instance": charts.JOBSET.name,
                    "app.kubernetes.io/component": "controller",
                }
            },
            # The counters' own `namespace` (the JobSet's) over the target's (jobset-system).
            "endpoints": [{**_https_token_endpoint(), "honorLabels": True}],
        },
    }
    trainer = {
        "apiVersion": OPERATOR_API,
        "kind": "PodMonitor",
        "metadata": _metadata("trainer", NAMESPACE),
        "spec": {
            "namespaceSelector": {"any": True},
            "selector": TRAINER_PODS,
            "podMetricsEndpoints": [
                {
                    "port": TRAINER_PORT_NAME,
                    "interval": "15s",
                    "relabelings": [
                        {
                            "sourceLabels": ["__meta_kubernetes_pod_label_jobset_sigs_k8s_io_jobset_name"],
                            "targetLabel": "jobset",
                        }
                    ],
                }
            ],
        },
    }
    return [dcgm, kueue, trainer, jobset]


def gmp_scrape_objects() -> list[dict[str, Any]]:
    """GKE: the trainers through ClusterPodMonitoring; DCGM, kube-state-metrics and node
    metrics come from GKE's managed packages (components.gcp.cluster enables them), Kueue and
    JobSet through PodMonitorings with a token (components.observability.gmp_https)."""
    return [
        {
            "apiVersion": GMP_API,
            "kind": "ClusterPodMonitoring",
            "metadata": _metadata("trainer"),
            "spec": {
                "selector": TRAINER_PODS,
                "endpoints": [{"port": TRAINER_PORT_NAME, "interval": "15s"}],
                "targetLabels": {"fromPod": [{"from": JOBSET_NAME_LABEL, "to": "jobset"}]},
            },
        }
    ]


def rule_object(spec: PlatformSpec, groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The rule groups as the backend's rule object: PrometheusRule, or GMP's ClusterRules."""
    if spec.observability.backend(spec.cloud) == "managed":
        return {"apiVersion": GMP_API, "kind": "ClusterRules", "metadata": _metadata("gpu-platform"), "spec": {"groups": groups}}
    return {
        "apiVersion": OPERATOR_API,
        "kind": "PrometheusRule",
        "metadata": _metadata("gpu-platform", NAMESPACE),
        "spec": {"groups": groups},
    }


def global_rule_object(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """GMP's GlobalRules (cluster-scoped, spec.groups as ClusterRules; prometheus-engine@v0.17.2
    pkg/operator/apis/monitoring/v1/rules_types.go): the rules on Cloud Monitoring metrics."""
    return {"apiVersion": GMP_API, "kind": "GlobalRules", "metadata": _metadata("gpu-platform"), "spec": {"groups": groups}}


def managed_components(spec: PlatformSpec) -> list[str]:
    """GKE's metric packages for managed collection (pulumi-gcp ClusterMonitoringConfig
    enable_components), with the managed backend only: DCGM where the spec wants GPU metrics, the
    kube state packages (pods, workloads, JobSets) and the kubelet's. With the chart on GKE,
    NVIDIA's exporter collects the GPUs (two collectors on one GPU conflict) and the chart's
    kube-state-metrics the objects, so no package is enabled. Empty: leave collection off."""
    if spec.observability.backend(spec.cloud) != "managed":
        return []
    components = ["SYSTEM_COMPONENTS"]
    if spec.monitoring.dcgm:
        components.append("DCGM")
    return [*components, "POD", "DAEMONSET", "DEPLOYMENT", "STATEFULSET", "JOBSET", "KUBELET", "CADVISOR"]

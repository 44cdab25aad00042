"""Helm chart pins: one row per chart the platform installs, and the check that keeps values honest.

Helm ignores values keys a chart does not read, so a misspelt key (`mixedStrategy` for
`migStrategy`) changes nothing and says nothing. `unknown_values_keys` compares the values we
set with the keys a pinned chart's templates read (shared/charts/<chart>-<version>.keys.json,
extracted from the chart at its tag); the test suite runs it on every release we declare.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Chart:
    """A pinned chart and the namespace its release lives in.

    `repo` is an HTTP chart repository, or an OCI registry path (`oci://...`) under which the
    chart is published as `<repo>/<name>`.
    """

    name: str
    repo: str
    version: str
    namespace: str

    @property
    def is_oci(self) -> bool:
        return self.repo.startswith("oci://")

    @property
    def reference(self) -> str:
        """What Helm is given as the chart: the OCI reference, or the name within `repo`."""
        return f"{self.repo}/{self.name}" if self.is_oci else self.name


# Repositories and versions from each project's release notes and install docs; the values files
# and key lists in shared/charts are taken from the same tags.
# NVIDIA/k8s-device-plugin v0.20.0, deployments/helm/nvidia-device-plugin.
NVIDIA_DEVICE_PLUGIN = Chart(
    "nvidia-device-plugin", "https://nvidia.github.io/k8s-device-plugin", "0.20.0", "nvidia-device-plugin"
)
# kubernetes-sigs/kueue v0.19.2, charts/kueue; published without the tag's leading `v`.
KUEUE = Chart("kueue", "oci://registry.k8s.io/kueue/charts", "0.19.2", "kueue-system")
# kubernetes-sigs/jobset v0.12.0, charts/jobset; published without the tag's leading `v`.
JOBSET = Chart("jobset", "oci://registry.k8s.io/jobset/charts", "0.12.0", "jobset-system")
# NVIDIA/dcgm-exporter chart 4.8.2 (exporter 4.5.3-4.8.2), deployment/.
DCGM_EXPORTER = Chart(
    "dcgm-exporter", "https://nvidia.github.io/dcgm-exporter/helm-charts", "4.8.2", "dcgm-exporter"
)
# kubernetes/autoscaler cluster-autoscaler-chart-9.59.0 (app 1.35.0); runs beside the other
# kube-system add-ons, as its docs and the EKS guide install it.
CLUSTER_AUTOSCALER = Chart(
    "cluster-autoscaler", "https://kubernetes.github.io/autoscaler", "9.59.0", "kube-system"
)
# prometheus-community/helm-charts kube-prometheus-stack-88.5.3 (operator v0.93.1; subcharts
# kube-state-metrics 8.4.0, prometheus-node-exporter 4.56.1, grafana 12.11.1), its Chart.yaml.
KUBE_PROMETHEUS_STACK = Chart(
    "kube-prometheus-stack", "https://prometheus-community.github.io/helm-charts", "88.5.3", "monitoring"
)

# aws/karpenter-provider-aws v1.14.1, charts/karpenter (the newest release whose sources are
# read here; supports Kubernetes 1.30-1.36, website/content/en/v1.14/upgrading/compatibility.md);
# published without the tag's leading `v`. kube-system, as its getting-started guide installs it.
# karpenter.sh lists v1.15 (October 2026) as latest: move the pin, with its tests/data files,
# once that release's chart and CRDs are read.
KARPENTER = Chart("karpenter", "oci://public.ecr.aws/karpenter", "1.14.1", "kube-system")
# Karpenter's CRDs as a chart of their own, released with the controller at the same version: Helm
# installs a chart's crds/ folder once and never upgrades it, so the CRDs come from this chart's
# templates instead and the karpenter release skips its crds/ (website/content/en/v1.14/upgrading/
# upgrade-guide.md "CRD Upgrades"; aws/karpenter-provider-aws@v1.14.1 charts/karpenter-crd).
KARPENTER_CRD = Chart("karpenter-crd", "oci://public.ecr.aws/karpenter", KARPENTER.version, KARPENTER.namespace)

CHARTS: tuple[Chart, ...] = (
    NVIDIA_DEVICE_PLUGIN, KUEUE, JOBSET, DCGM_EXPORTER, CLUSTER_AUTOSCALER, KARPENTER, KARPENTER_CRD, KUBE_PROMETHEUS_STACK
)
# aws/eks-charts, stable/aws-efa-k8s-device-plugin/Chart.yaml (version v0.5.20, app v0.5.13):
# advertises `vpc.amazonaws.com/efa` so pods can claim the EFA devices of a node. Not in CHARTS:
# no keys file of its templates is carried yet, so its values keys are not checked.
EFA_DEVICE_PLUGIN = Chart("aws-efa-k8s-device-plugin", "https://aws.github.io/eks-charts", "v0.5.20", "kube-system")


def values_paths(values: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Every leaf key path of a values tree (`config.map.none`); lists and empty maps are leaves."""
    paths: list[str] = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            paths += values_paths(value, f"{path}.")
        else:
            paths.append(path)
    return paths


def unknown_values_keys(values: Mapping[str, Any], chart_keys: Mapping[str, Any]) -> list[str]:
    """The paths of `values` the chart never reads, given its keys document.

    A path is known when the templates read it, when it lies under a map the templates pass
    through whole (`config.map.<name>`, `tolerations`), or when it belongs to a subchart.
    """
    referenced = set(chart_keys["referenced"])
    passthrough = tuple(chart_keys["passthrough"])
    subcharts = set(chart_keys["subcharts"])

    def known(path: str) -> bool:
        return (
            path in referenced
            or any(path == p or path.startswith(f"{p}.") for p in passthrough)
            or path.split(".", 1)[0] in subcharts
        )

    return [path for path in values_paths(values) if not known(path)]

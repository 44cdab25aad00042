"""Values of the Helm releases the layer installs, as plain data (checked against each chart's keys).

Node agents (device plugin, DCGM exporter) must run on every GPU node and nowhere else: they
tolerate the pools' GPU taint, and the exporter selects the pools' nodes by their selectors.
"""

from __future__ import annotations

from typing import Any

import yaml

from components import naming
from components.facts import charts
from components.kubernetes.device_plugin import DEFAULT_CONFIG, config_map
from components.kubernetes.queues import NAMESPACE_NAME_LABEL
from components.observability.objects import DCGM_COUNTERS_CONFIG_MAP, dcgm_counters_csv
from components.pools import Pool
from components.spec import PlatformSpec


def gpu_tolerations(pools: list[Pool]) -> list[dict[str, str]]:
    """Tolerations for the taints GPU pools carry."""
    taints = sorted({(pool.taint.key, pool.taint.effect) for pool in pools})
    return [{"key": key, "operator": "Exists", "effect": effect} for key, effect in taints]


def gpu_node_affinity(pools: list[Pool]) -> dict[str, Any]:
    """Node affinity for the nodes of any pool (one selector term per distinct pool selector)."""
    selectors = sorted({tuple(sorted(pool.selector.items())) for pool in pools})
    terms = [
        {"matchExpressions": [{"key": key, "operator": "In", "values": [value]} for key, value in selector]}
        for selector in selectors
    ]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}


def device_plugin_values(pools: list[Pool]) -> dict[str, Any]:
    """Values of the nvidia-device-plugin chart.

    GPU feature discovery labels nodes with the GPU model and the sharing in use; with it, the
    chart deploys node-feature-discovery, whose PCI label is what the plugin's default affinity
    finds GPU nodes by (including nodes of an existing cluster that carry no label of ours).
    """
    return {
        "config": {"map": config_map(pools), "default": DEFAULT_CONFIG},
        "gfd": {"enabled": True},
        "tolerations": gpu_tolerations(pools),
    }


# Where the exporter's pod finds the counters file (a directory of our own, so the image's
# /etc/dcgm-exporter/default-counters.csv stays as shipped).
DCGM_COUNTERS_VOLUME = "gpu-platform-counters"
DCGM_COUNTERS_DIR = "/etc/dcgm-exporter/gpu-platform"
DCGM_COUNTERS_FILE = "counters.csv"


# GKE installs the NVIDIA driver on the host under /home/kubernetes/bin/nvidia and has no NVIDIA
# container runtime to inject it, so an exporter on GKE mounts it at /usr/local/nvidia, finds its
# libraries by LD_LIBRARY_PATH and runs privileged to see the GPU devices, as GMP's DCGM example
# does (GoogleCloudPlatform/prometheus-engine examples/nvidia-dcgm/exporter.yaml). The chart's
# `extraHostVolumes` (name, hostPath), `extraVolumeMounts` and `extraEnv` carry them
# (NVIDIA/dcgm-exporter deployment/templates/daemonset.yaml; dcgm-exporter-4.8.2 values.yaml).
GKE_DRIVER_HOST_DIR = "/home/kubernetes/bin/nvidia"
GKE_DRIVER_DIR = "/usr/local/nvidia"
GKE_DRIVER_VOLUME = "nvidia-install-dir-host"


def dcgm_exporter_values(spec: PlatformSpec, pools: list[Pool]) -> dict[str, Any]:
    """Values of the dcgm-exporter chart: GPU nodes only, a ServiceMonitor only where asked.

    The chart creates a ServiceMonitor by default, which fails on clusters without the
    Prometheus Operator's CRDs, so it is always set explicitly. On GKE (the chart's backend
    there; managed collection uses GKE's own package) it also reads the host's driver.
    """
    values = _dcgm_exporter_base_values(spec, pools)
    if spec.cloud == "gcp":
        values["extraHostVolumes"] = [{"name": GKE_DRIVER_VOLUME, "hostPath": GKE_DRIVER_HOST_DIR}]
        values["extraVolumeMounts"] = [
            *values["extraVolumeMounts"],
            {"name": GKE_DRIVER_VOLUME, "mountPath": GKE_DRIVER_DIR, "readOnly": True},
        ]
        values["extraEnv"] = [{"name": "LD_LIBRARY_PATH", "value": f"{GKE_DRIVER_DIR}/lib64"}]
        values["securityContext"] = {"privileged": True, "runAsNonRoot": False, "runAsUser": 0}
    return values


def _dcgm_exporter_base_values(spec: PlatformSpec, pools: list[Pool]) -> dict[str, Any]:
    return {
        "affinity": gpu_node_affinity(pools),
        "tolerations": gpu_tolerations(pools),
        "serviceMonitor": {"enabled": spec.monitoring.service_monitor},
        # The default counters plus the ECC, throttling and XID-count ones the alerts read, in
        # the ConfigMap the chart makes of `customMetrics` (key `metrics`, 4.8.2
        # templates/metrics-configmap.yaml), mounted as a file and read with `-f`. Not `-m
        # namespace:name`: that reads the ConfigMap through the API, but the chart mounts no
        # service account token unless pod labels/UIDs or DRA are on (templates/daemonset.yaml
        # automountServiceAccountToken), and without one the exporter silently falls back to
        # its built-in list (internal/pkg/counters/counter_config.go).
        "customMetrics": dcgm_counters_csv(),
        "extraConfigMapVolumes": [
            {
                "name": DCGM_COUNTERS_VOLUME,
                "configMap": {
                    "name": DCGM_COUNTERS_CONFIG_MAP,
                    "items": [{"key": "metrics", "path": DCGM_COUNTERS_FILE}],
                },
            }
        ],
        "extraVolumeMounts": [{"name": DCGM_COUNTERS_VOLUME, "mountPath": DCGM_COUNTERS_DIR, "readOnly": True}],
        "arguments": ["-f", f"{DCGM_COUNTERS_DIR}/{DCGM_COUNTERS_FILE}"],
    }


# The controller configuration the kueue chart ships at 0.19.2 (values
# `managerConfig.controllerManagerConfigYaml`). Setting that value replaces the whole file, so
# it is restated here; a test keeps it equal to the chart's default apart from `resources`.
_CHART_CONFIGURATION: dict[str, Any] = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "health": {"healthProbeBindAddress": ":8081"},
    "metrics": {"bindAddress": ":8443"},
    "webhook": {"port": 9443},
    "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
    "controller": {
        "groupKindConcurrency": {
            "Job.batch": 5,
            "Pod": 5,
            "Workload.kueue.x-k8s.io": 10,
            "LocalQueue.kueue.x-k8s.io": 5,
            "ClusterQueue.kueue.x-k8s.io": 5,
            "ResourceFlavor.kueue.x-k8s.io": 1,
        }
    },
    "clientConnection": {"qps": 300, "burst": 500},
    "integrations": {
        "frameworks": [
            "batch/job",
            "kubeflow.org/mpijob",
            "ray.io/rayjob",
            "ray.io/rayservice",
            "ray.io/raycluster",
            "jobset.x-k8s.io/jobset",
            "workload.codeflare.dev/appwrapper",
            "trainer.kubeflow.org/trainjob",
            "pod",
            "deployment",
            "statefulset",
            "leaderworkerset.x-k8s.io/leaderworkerset",
        ]
    },
}

# Kueue 0.19 Configuration `resources.quotaCheckStrategy` (KEP-7513, beta and on by default
# since v0.19.0): check only the resources a ClusterQueue covers.
_RESOURCES: dict[str, Any] = {"quotaCheckStrategy": "IgnoreUndeclared"}
# Configuration `fairSharing` (apis/config/v1beta2/configuration_types.go, FairSharing): fair
# sharing is on when the section is present (cmd/kueue/main.go); these are the documented
# strategies in their default order.
_FAIR_SHARING: dict[str, Any] = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}


# Configuration `metrics.enableClusterQueueResources` (apis/config/v1beta2 ControllerMetrics):
# without it Kueue reports no kueue_cluster_queue_resource_usage, reservation or nominal quota
# gauges (kubernetes-sigs/kueue@v0.19.2 cmd/kueue/main.go, pkg/controller/core/core.go), which
# the cost records read (components.observability.rules.cost_records).
_METRICS: dict[str, Any] = {**_CHART_CONFIGURATION["metrics"], "enableClusterQueueResources": True}


def kueue_configuration(spec: PlatformSpec) -> dict[str, Any]:
    """The chart's configuration, plus: Kueue manages every job in the team namespaces, whether or
    not it names a queue (`manageJobsWithoutQueueName` with `managedJobsNamespaceSelector`,
    Kueue docs "Enforce Kueue management of workloads"); other namespaces, kube-system and the
    platform's own among them, stay outside. Jobs without a queue label go to the namespace's
    `default` LocalQueue (components.kubernetes.queues.DEFAULT_LOCAL_QUEUE). ClusterQueue
    resource metrics are on, for the cost records."""
    configuration: dict[str, Any] = {
        **_CHART_CONFIGURATION,
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {
            "matchExpressions": [
                {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": naming.team_namespaces(spec)}
            ]
        },
        "resources": _RESOURCES,
        "metrics": _METRICS,
    }
    if spec.scheduling.fair_sharing.enabled:
        configuration["fairSharing"] = _FAIR_SHARING
    return configuration


def _release_image(repository: str, chart: charts.Chart) -> dict[str, str]:
    """The release's own image: the charts' defaults in their source point at staging builds.

    Kueue and JobSet tag images `v<chart version>` (registry.k8s.io, release notes).
    """
    return {"repository": repository, "tag": f"v{chart.version}", "pullPolicy": "IfNotPresent"}


def kueue_values(spec: PlatformSpec) -> dict[str, Any]:
    configuration = kueue_configuration(spec)
    return {
        "controllerManager": {"manager": {"image": _release_image("registry.k8s.io/kueue/kueue", charts.KUEUE)}},
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(configuration, sort_keys=False)},
    }


def jobset_values() -> dict[str, Any]:
    return {"image": _release_image("registry.k8s.io/jobset/jobset", charts.JOBSET)}


# The kinds a fleet manager dispatches (components.fleet): batch Jobs and JobSets, the two the
# worker role (components.facts.multikueue.WORKER_RULES) lets it create.
MANAGER_FRAMEWORKS = ["batch/job", "jobset.x-k8s.io/jobset"]


def manager_kueue_values(namespaces: list[str], dispatcher: str, step_size: int) -> dict[str, Any]:
    """Kueue on a fleet manager: the chart's configuration with only the dispatched kinds, every job
    of the team namespaces managed, and MultiKueue's `dispatcherName` with the Incremental
    dispatcher's `incrementalDispatcherConfig.stepSize` (Configuration `multiKueue`,
    apis/config/v1beta2/configuration_types.go; MultiKueue itself is a beta feature gate, on by
    default in 0.19.2, pkg/features/kube_features.go)."""
    configuration: dict[str, Any] = {
        **_CHART_CONFIGURATION,
        "integrations": {"frameworks": list(MANAGER_FRAMEWORKS)},
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {
            "matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": list(namespaces)}]
        },
        "resources": _RESOURCES,
        "multiKueue": {"dispatcherName": dispatcher, "incrementalDispatcherConfig": {"stepSize": step_size}},
    }
    return {
        "controllerManager": {"manager": {"image": _release_image("registry.k8s.io/kueue/kueue", charts.KUEUE)}},
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(configuration, sort_keys=False)},
    }

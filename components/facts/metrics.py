"""Metric names the exporters publish at the pinned versions: what rules and dashboards may name.

A PromQL expression naming a metric nobody exports evaluates to nothing and alerts never fire,
silently; tests check every expression we ship against these lists.
"""

from __future__ import annotations

from components.facts.cluster_metrics import KUBE_STATE_METRICS_BY_COLLECTOR, NODE_EXPORTER_SERIES

# NVIDIA/dcgm-exporter@4.5.3-4.8.2:etc/default-counters.csv, the lines not commented out (the
# exporter's default collectors, which the chart runs).
DCGM_DEFAULT: frozenset[str] = frozenset(
    {
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_ENC_UTIL",
        "DCGM_FI_DEV_DEC_UTIL",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DRIVER_VERSION",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
    }
)
# Same file, commented out there: the counters the platform turns on too (the chart's
# `customMetrics` replaces the list, so it is the default list plus these). Double-bit ECC,
# thermal violation time and the windowed XID count are what the GPU alerts read.
DCGM_ADDED: tuple[tuple[str, str], ...] = (
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter"),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter"),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter"),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter"),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge"),
    # XIDs per GPU and XID in the last window (csv: "reported XIDs during last window"): what the
    # XID alerts read, since DCGM_FI_DEV_XID_ERRORS keeps the last XID forever.
    ("DCGM_EXP_XID_ERRORS_COUNT", "counter"),
)
DCGM: frozenset[str] = DCGM_DEFAULT | {name for name, _ in DCGM_ADDED}

# kubernetes-sigs/kueue@v0.19.2:pkg/metrics/metrics.go (subsystem `kueue`); histograms also
# publish _bucket, _sum and _count series.
KUEUE: frozenset[str] = frozenset(
    f"kueue_{name}"
    for name in (
        "admission_attempts_total",
        "admission_attempt_duration_seconds",
        "admission_cycle_preemption_skips",
        "build_info",
        "pending_workloads",
        "local_queue_pending_workloads",
        "finished_workloads",
        "quota_reserved_workloads_total",
        "finished_workloads_total",
        "quota_reserved_wait_time_seconds",
        "admitted_workloads_total",
        "local_queue_admitted_workloads_total",
        "admission_wait_time_seconds",
        "ready_wait_time_seconds",
        "admitted_until_ready_wait_time_seconds",
        "local_queue_admission_wait_time_seconds",
        "admission_checks_wait_time_seconds",
        "evicted_workloads_total",
        "local_queue_evicted_workloads_total",
        "preempted_workloads_total",
        "reserving_active_workloads",
        "admitted_active_workloads",
        "local_queue_admitted_active_workloads",
        "cluster_queue_status",
        "unadmitted_workloads",
        "cluster_queue_resource_reservation",
        "cluster_queue_resource_pending",
        "cluster_queue_resource_usage",
        "local_queue_resource_usage",
        "cluster_queue_nominal_quota",
        "cluster_queue_borrowing_limit",
        "cluster_queue_lending_limit",
        "cluster_queue_weighted_share",
        "cohort_weighted_share",
    )
)
KUEUE_HISTOGRAMS: frozenset[str] = frozenset(
    f"kueue_{name}"
    for name in (
        "admission_attempt_duration_seconds",
        "quota_reserved_wait_time_seconds",
        "admission_wait_time_seconds",
        "ready_wait_time_seconds",
        "admitted_until_ready_wait_time_seconds",
        "local_queue_admission_wait_time_seconds",
        "admission_checks_wait_time_seconds",
    )
)

# The chart's kube-state-metrics and node exporter: every series of the collectors the platform
# could read, at the pinned versions (components.facts.cluster_metrics, read from upstream).
KUBE_STATE_METRICS: frozenset[str] = frozenset(
    name for names in KUBE_STATE_METRICS_BY_COLLECTOR.values() for name in names
)
NODE_EXPORTER: frozenset[str] = frozenset(NODE_EXPORTER_SERIES)

# GKE's managed packages (observability.prometheus: managed) export a subset, not the open-source
# exporters' lists. DCGM package: the table of GKE's "Collect and view DCGM metrics"
# (https://cloud.google.com/kubernetes-engine/docs/how-to/dcgm-metrics); no XID, ECC or
# violation counter is among them. The stored copy of this page was read only in part (its
# table was cut off): re-check this list against the page when it is next read whole.
GKE_DCGM: frozenset[str] = frozenset(
    {
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_TOTAL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_SM_ACTIVE",
    }
)
# Kube state packages: the PromQL names of the tables of GKE's "Collect and view kube state
# metrics" (https://docs.cloud.google.com/kubernetes-engine/docs/how-to/kube-state-metrics, read
# whole, last updated 2026-04-10), for the packages the platform enables
# (components.observability.objects.managed_components): POD, DEPLOYMENT, STATEFULSET, DAEMONSET
# and JOBSET (HPA and STORAGE are not enabled). There is no node package, so kube_node_* is not
# exported on GKE, nor are pod creation and ready timestamps, requests, limits or restarts.
GKE_KUBE_STATE_BY_PACKAGE: dict[str, tuple[str, ...]] = {
    "POD": (
        "kube_pod_container_status_ready",
        "kube_pod_container_status_waiting_reason",
        "kube_pod_status_phase",
        "kube_pod_status_unschedulable",
    ),
    "DEPLOYMENT": (
        "kube_deployment_spec_replicas",
        "kube_deployment_status_replicas_available",
        "kube_deployment_status_replicas_updated",
    ),
    "STATEFULSET": (
        "kube_statefulset_replicas",
        "kube_statefulset_status_replicas_ready",
        "kube_statefulset_status_replicas_updated",
    ),
    "DAEMONSET": (
        "kube_daemonset_status_desired_number_scheduled",
        "kube_daemonset_status_number_misscheduled",
        "kube_daemonset_status_number_ready",
        "kube_daemonset_status_updated_number_scheduled",
    ),
    # GKE 1.32.1-gke.1357001 or later; kube_jobset_restarts from 1.32.4-gke.1767000 / 1.33.0-gke.1868000.
    "JOBSET": (
        "kube_jobset_specified_replicas",
        "kube_jobset_ready_replicas",
        "kube_jobset_succeeded_replicas",
        "kube_jobset_failed_replicas",
        "kube_jobset_active_replicas",
        "kube_jobset_suspended_replicas",
        "kube_jobset_status_condition",
        "kube_jobset_restarts",
    ),
}
GKE_KUBE_STATE: frozenset[str] = frozenset(name for names in GKE_KUBE_STATE_BY_PACKAGE.values() for name in names)

# GKE's system metrics the managed backend's GlobalRules read (Cloud Monitoring names, queried in
# PromQL by `__name__`): the node condition metric, GKE 1.32.1-gke.1357001 or later (GKE's GPU
# monitoring page, "Node health metrics"; GoogleCloudPlatform/monitoring-dashboard-samples
# dashboards/google-kubernetes-engine/gke-jobset-interruption-playbook.json queries it).
GKE_SYSTEM: frozenset[str] = frozenset({"kubernetes.io/node/status_condition"})

# JobSet's controller metrics (kubernetes-sigs/jobset@v0.12.0 pkg/metrics/metrics.go: subsystem
# "jobset", pkg/constants; counters labelled jobset_name and namespace), scraped on every backend
# (components.observability: a ServiceMonitor with the chart, a PodMonitoring on GKE).
JOBSET: frozenset[str] = frozenset({"jobset_failed_total", "jobset_completed_total"})

# Series Prometheus writes itself for every target.
PROMETHEUS: frozenset[str] = frozenset({"up", "scrape_duration_seconds"})

# The trainer's own series (training_images/src/trainer/metrics_server.py METRIC_NAMES, restated:
# the platform may not import the trainer, which needs torch; a trainer test keeps them equal).
TRAINER: frozenset[str] = frozenset(
    {
        "trainer_step",
        "trainer_max_steps",
        "trainer_loss",
        "trainer_eval_loss",
        "trainer_tokens_per_second",
        "trainer_mfu",
        "trainer_step_seconds",
        "trainer_data_wait_seconds",
        "trainer_last_step_timestamp_seconds",
        "trainer_checkpoint_save_seconds",
        "trainer_restarts",
        "trainer_wall_seconds_total",
        "trainer_committed_seconds_total",
        "trainer_badput_seconds_total",
        "trainer_goodput_ratio",
        "trainer_job_start_timestamp_seconds",
        "trainer_fabric_bus_bandwidth_bytes_per_second",
        "trainer_fabric_probe_size_bytes",
        "trainer_fabric_floor_bytes_per_second",
        "trainer_fabric_check_passed",
    }
)
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def published(backend: str = "kube-prometheus-stack") -> frozenset[str]:
    """Every series the backend's exporters and the trainer publish, histogram series included.
    `managed` (GKE): GKE's DCGM and kube state packages and its system metrics instead of the
    chart's exporters, no node exporter; Kueue, JobSet and the trainers are scraped by the platform's own objects on every
    backend. Any other backend runs the chart (kube-prometheus-stack, amp)."""
    histograms = {f"{h}{suffix}" for h in KUEUE_HISTOGRAMS for suffix in HISTOGRAM_SUFFIXES}
    common = KUEUE | frozenset(histograms) | JOBSET | PROMETHEUS | TRAINER
    if backend == "managed":
        return common | GKE_DCGM | GKE_KUBE_STATE | GKE_SYSTEM
    return common | DCGM | KUBE_STATE_METRICS | NODE_EXPORTER

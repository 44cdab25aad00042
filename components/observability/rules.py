"""Alert and recording rules, as Prometheus rule groups (the rule-file format PrometheusRule and
GMP's ClusterRules carry in `spec.groups`).

Each alert says what it means in `annotations.summary` and what to do in docs/observability.md
(`runbook` names the section). Thresholds come from the spec's `observability` section.
"""

from __future__ import annotations

from typing import Any

from components.facts import charts
from components.pools import GPU_RESOURCE, Pool
from components.spec import PlatformSpec, PriorityTierSpec

# XID 79: "GPU has fallen off the bus" (NVIDIA XID catalog). The alerts read
# DCGM_EXP_XID_ERRORS_COUNT{xid}, the XIDs each GPU reported in the exporter's last window (5
# minutes by default, --xid-count-window-size; NVIDIA/dcgm-exporter@4.5.3-4.8.2
# internal/pkg/collector/xid_collector.go, on because the counters file lists it), so they
# resolve once a window passes without one. DCGM_FI_DEV_XID_ERRORS holds the last XID ever
# reported and never returns to 0, so an alert on it would never resolve.
XID_FELL_OFF_BUS = 79
# DCGM_FI_DEV_THERMAL_VIOLATION counts nanoseconds of thermal throttling (the dcgm-exporter
# 4.8.2 chart's counters list, templates/metrics-configmap.yaml): its rate over 1e9 is the
# share of time throttled.
THERMAL_SHARE = 0.1
# Below this tensor-pipe activity (0-1) a GPU counts as doing no training.
IDLE_TENSOR_ACTIVE = 0.01
# A job is stalled after this many of its recent step times without a sync step, and never
# sooner than the floor (a sync step comes every --log-every steps).
STALL_STEPS = 20
STALL_FLOOR_SECONDS = 600
DCGM_NAMESPACE = charts.DCGM_EXPORTER.namespace
# GKE's managed DCGM exporter runs in GKE's own namespace, gke-managed-system (DaemonSet pods
# labelled app.kubernetes.io/name=gke-managed-dcgm-exporter, as public GKE walkthroughs show
# them; GKE's "Collect and view DCGM metrics" page, as stored here, does not name it). On the
# managed backend both namespaces are excluded: which labels GMP's collector leaves on the
# package's series is still to be checked on a live cluster (docs/observability.md).
GKE_DCGM_NAMESPACE = "gke-managed-system"
DOCS = "docs/observability.md"
# Rules GKE's managed packages cannot feed (components.facts.metrics GKE_DCGM, GKE_KUBE_STATE),
# left out of the managed backend's ClusterRules rather than shipped to never fire; why, per rule
# (docs/observability.md, "Per backend").
NOT_ON_GKE: dict[str, str] = {
    "GpuXidError": "GKE's DCGM package has no XID series; GKE reports XIDs in the node's logs",
    "GpuFellOffTheBus": "GKE's DCGM package has no XID series; GKE's node auto-repair replaces the node",
    "GpuDoubleBitEccError": "GKE's DCGM package has no ECC counters",
    "GpuThermalThrottling": "GKE's DCGM package has no violation counters",
    "job:pod_startup_seconds:max": "GKE's POD package has no pod created or ready timestamps",
}


# GKE's own system metric for node conditions (labels `condition`, `status` True/False/Unknown, on
# the k8s_node resource, whose labels include cluster_name and node_name), as GoogleCloudPlatform/
# monitoring-dashboard-samples dashboards/google-kubernetes-engine/gke-jobset-interruption-playbook.json
# queries it in PromQL; GKE 1.32.1-gke.1357001 or later. A system metric carries `cluster_name`,
# not the `cluster` label GMP's ClusterRules add to every selector (prometheus-engine@v0.17.2
# pkg/operator/apis/monitoring/v1/rules_config.go scope()), so rules on Cloud Monitoring metrics
# go in GlobalRules, which add no scope ("Managed rule evaluation and alerting",
# https://cloud.google.com/stackdriver/docs/managed-prometheus/rules-managed): each selector
# names the cluster itself.
GKE_NODE_CONDITION = "kubernetes.io/node/status_condition"
# Rules the managed backend evaluates from GKE's system metrics, in GlobalRules instead of ClusterRules.
GKE_SYSTEM_RULES: frozenset[str] = frozenset({"NodeNotReady"})


def _alert(name: str, expr: str, for_: str, severity: str, summary: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "runbook": f"{DOCS}#{name.lower()}"},
    }


def exporter_namespaces(spec: PlatformSpec) -> str:
    """The label matcher that drops the exporter's own target labels: the namespaces the
    backend's DCGM exporter runs in."""
    if spec.observability.backend(spec.cloud) == "managed":
        return f'namespace!~"{DCGM_NAMESPACE}|{GKE_DCGM_NAMESPACE}"'
    return f'namespace!="{DCGM_NAMESPACE}"'


def gpu_alerts(spec: PlatformSpec) -> list[dict[str, Any]]:
    idle = spec.observability.idle_gpu_minutes
    return [
        _alert(
            "GpuXidError",
            f'DCGM_EXP_XID_ERRORS_COUNT{{xid!="{XID_FELL_OFF_BUS}"}} > 0',
            "0m",
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} reported XID {{ $labels.xid }}",
        ),
        _alert(
            "GpuFellOffTheBus",
            f'DCGM_EXP_XID_ERRORS_COUNT{{xid="{XID_FELL_OFF_BUS}"}} > 0',
            "0m",
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} fell off the bus (XID 79): drain the node",
        ),
        _alert(
            "GpuDoubleBitEccError",
            "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0",
            "0m",
            "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} had uncorrectable (double-bit) ECC errors",
        ),
        _alert(
            "GpuThermalThrottling",
            f"rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m]) / 1e9 > {THERMAL_SHARE}",
            "10m",
            "warning",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is thermally throttled",
        ),
        # The exporter labels a GPU's series with the pod holding it, and only GPUs a pod holds
        # (NVIDIA/dcgm-exporter@4.5.3-4.8.2 internal/pkg/transformation/kubernetes.go). The
        # ServiceMonitor honours those labels, so an unallocated GPU's series keeps the scrape
        # target's own pod and namespace, the exporter's: those are not allocated GPUs.
        _alert(
            "GpuAllocatedButIdle",
            "max by (namespace, pod) "
            f'(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{pod!="", {exporter_namespaces(spec)}}}) < {IDLE_TENSOR_ACTIVE}',
            f"{idle}m",
            "warning",
            f"pod {{{{ $labels.namespace }}}}/{{{{ $labels.pod }}}} holds GPUs with no tensor activity for {idle}m",
        ),
    ]


def node_alerts() -> list[dict[str, Any]]:
    return [
        _alert(
            "NodeNotReady",
            'kube_node_status_condition{condition="Ready", status="true"} == 0',
            "5m",
            "warning",
            "node {{ $labels.node }} has not been Ready for 5m",
        ),
    ]


def gke_node_alerts(cluster: str) -> list[dict[str, Any]]:
    """NodeNotReady from GKE's node condition metric, for this cluster's nodes only (GlobalRules
    query every cluster of the project)."""
    selector = (
        f'{{__name__="{GKE_NODE_CONDITION}", monitored_resource="k8s_node", cluster_name="{cluster}", '
        'condition="Ready", status=~"False|Unknown"}'
    )
    return [
        _alert(
            "NodeNotReady",
            f"max by (cluster_name, node_name) ({selector}) > 0",
            "5m",
            "warning",
            "node {{ $labels.node_name }} has not been Ready for 5m",
        ),
    ]


def job_alerts(spec: PlatformSpec) -> list[dict[str, Any]]:
    threshold = spec.observability.goodput_threshold
    return [
        _alert(
            "TrainingJobStalled",
            "(time() - trainer_last_step_timestamp_seconds)"
            f" > clamp_min({STALL_STEPS} * trainer_step_seconds, {STALL_FLOOR_SECONDS})"
            " and trainer_step < trainer_max_steps",
            "0m",
            "warning",
            "job {{ $labels.namespace }}/{{ $labels.jobset }} made no step for "
            f"{STALL_STEPS} step times",
        ),
        # The fabric gate (trainer.fabric) under --fabric-check warn trains on a network it
        # found slow or on NCCL's socket fallback; under enforce the job stops before the
        # endpoint starts, so a 0 is always a run someone chose to let train.
        _alert(
            "TrainingOnFailedFabricCheck",
            "max by (namespace, jobset, check, transport) (trainer_fabric_check_passed) == 0",
            "0m",
            "warning",
            "job {{ $labels.namespace }}/{{ $labels.jobset }} trains on a fabric its gate failed "
            "(NCCL network {{ $labels.transport }}, --fabric-check {{ $labels.check }})",
        ),
        _alert(
            "LowGoodput",
            f"job:trainer_goodput:ratio1h < {threshold}",
            "30m",
            "warning",
            "job {{ $labels.namespace }}/{{ $labels.jobset }} kept {{ $value | humanizePercentage }} "
            "of its time in committed steps over the last hour",
        ),
    ]


def queue_alerts(spec: PlatformSpec, tiers: tuple[PriorityTierSpec, ...]) -> list[dict[str, Any]]:
    """Pending per queue (Kueue's gauge has no tier), and admission wait per tier (its
    histogram is labelled by priority class)."""
    obs = spec.observability
    alerts = [
        _alert(
            "WorkloadsPendingTooLong",
            'kueue_pending_workloads{status="active"} > 0',
            f"{obs.pending_minutes}m",
            "warning",
            "ClusterQueue {{ $labels.cluster_queue }} has had workloads pending for "
            f"{obs.pending_minutes}m",
        )
    ]
    for tier in tiers:
        minutes = obs.pending_minutes_per_tier.get(tier.name, obs.pending_minutes)
        alerts.append(
            _alert(
                f"AdmissionWaitOverThreshold{''.join(part.title() for part in tier.name.split('-'))}",
                "histogram_quantile(0.95, sum by (le, cluster_queue) "
                f'(rate(kueue_admission_wait_time_seconds_bucket{{priority_class="{tier.name}"}}[1h])))'
                f" > {minutes * 60}",
                "15m",
                "warning",
                f"{tier.name} workloads of {{{{ $labels.cluster_queue }}}} waited over {minutes}m for "
                "admission (p95, last hour)",
            )
        )
    return alerts


def goodput_records() -> list[dict[str, Any]]:
    """The trainer's goodput over an hour, per job: committed step time of every attempt over
    the job's elapsed time in that hour (since its first start, trainer.job_clock, at most the
    hour), so time with no trainer process alive (between attempts, requeued) is badput. The
    start is taken over the hour, so the ratio stays defined while no attempt is running."""
    by = "namespace, jobset"
    return [
        {
            "record": "job:trainer_goodput:ratio1h",
            "expr": f"sum by ({by}) (increase(trainer_committed_seconds_total[1h]))"
            f" / clamp_max(time() - max by ({by}) (max_over_time(trainer_job_start_timestamp_seconds[1h])), 3600)",
        },
        {
            "record": "job:trainer_badput_seconds:increase1h",
            "expr": f"sum by ({by}, cause) (increase(trainer_badput_seconds_total[1h]))",
        },
        # The platform's part: time from pod creation to Ready (image pull, start), per job.
        {
            "record": "job:pod_startup_seconds:max",
            "expr": "max by (namespace, pod) (kube_pod_status_ready_time - kube_pod_created)",
        },
    ]


def cost_records(pools: list[Pool]) -> list[dict[str, Any]]:
    """GPU slots in use and $/hour per team and pool, from Kueue's usage of each flavor (a
    pool) times the catalog's reference price of one slot of that pool."""
    records: list[dict[str, Any]] = [
        {
            "record": "team_pool:gpu_slots:usage",
            "expr": "sum by (cluster_queue, flavor) "
            f'(kueue_cluster_queue_resource_usage{{resource="{GPU_RESOURCE}"}})',
        }
    ]
    for pool in pools:
        price = pool.usd_per_node_hour
        if price is None:
            continue
        per_slot = round(price / pool.slots_per_node, 6)
        records.append(
            {
                "record": "team_pool:gpu_usd_per_hour:usage",
                "expr": f'team_pool:gpu_slots:usage{{flavor="{pool.name}"}} * {per_slot}',
            }
        )
    return records


def rule_groups(spec: PlatformSpec, pools: list[Pool], tiers: tuple[PriorityTierSpec, ...]) -> list[dict[str, Any]]:
    """The groups the stack's backend can evaluate: on GKE's managed collection, without the
    rules whose series its packages do not export (NOT_ON_GKE) or that read GKE's system metrics
    (GKE_SYSTEM_RULES, in global_rule_groups), and without groups left empty."""
    groups: list[dict[str, Any]] = [
        {"name": "gpu-platform-gpus", "rules": gpu_alerts(spec)},
        {"name": "gpu-platform-nodes", "rules": node_alerts()},
        {"name": "gpu-platform-jobs", "rules": goodput_records() + job_alerts(spec)},
        {"name": "gpu-platform-queues", "rules": queue_alerts(spec, tiers)},
        {"name": "gpu-platform-cost", "interval": "1m", "rules": cost_records(pools)},
    ]
    if spec.observability.backend(spec.cloud) != "managed":
        return groups
    dropped = set(NOT_ON_GKE) | GKE_SYSTEM_RULES
    kept = [
        {**group, "rules": [r for r in group["rules"] if r.get("alert", r.get("record")) not in dropped]}
        for group in groups
    ]
    return [group for group in kept if group["rules"]]


def global_rule_groups(spec: PlatformSpec) -> list[dict[str, Any]]:
    """The groups on GKE's system metrics (GKE_SYSTEM_RULES), for GMP's GlobalRules: managed
    backend only; the chart's Prometheus reads kube-state-metrics instead."""
    if spec.observability.backend(spec.cloud) != "managed":
        return []
    return [{"name": "gpu-platform-gke-nodes", "rules": gke_node_alerts(spec.cluster.name)}]

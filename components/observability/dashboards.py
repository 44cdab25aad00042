"""Grafana dashboards as code (grafana-foundation-sdk, Grafana's own generated builders), shipped
as ConfigMaps the grafana subchart's sidecar loads (label grafana_dashboard).

Each panel is a title, a unit and its PromQL queries; tests parse every query and check every
metric name against the exporters' lists (components.facts.metrics). Variables select a team,
a pool or a job; the loopback test evaluates the job view's queries against a real trainer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import dashboard, prometheus, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

from components.observability.objects import DASHBOARD_LABEL, KSM_POOL_LABEL, NAMESPACE, _metadata
from components.pools import GPU_RESOURCE

# kube-prometheus-stack 88.5.3 provisions its Prometheus datasource with this uid
# (values grafana.sidecar.datasources.uid).
DATASOURCE_UID = "prometheus"
JOB = '{namespace=~"$namespace", jobset=~"$jobset"}'


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    # (PromQL, legend)
    queries: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Board:
    uid: str
    title: str
    variables: tuple[tuple[str, str], ...]  # (name, label_values query)
    panels: tuple[Panel, ...]


# The pool of each node, keyed by DCGM's node label: kube-state-metrics' kube_node_labels carries
# the node's pool label where the chart allows it (objects.KSM_METRIC_LABELS_ALLOWLIST) and the
# node's name as `node`; dcgm-exporter's `Hostname` is the node's name too (NVIDIA/dcgm-exporter
# internal/pkg/hostname/hostname.go: NODE_NAME, which its chart sets from spec.nodeName, else the
# host name). `max by` keeps one series per node if kube-state-metrics is scraped twice.
POOL = KSM_POOL_LABEL
NODE_POOL = (
    f'label_replace(max by (node, {POOL}) (kube_node_labels{{{POOL}=~"$pool"}}), "Hostname", "$1", "node", "(.*)")'
)


def _per_pool(aggregation: str, series: str) -> str:
    """`series` (one per GPU, labelled Hostname) aggregated per pool of the selected pools."""
    return f"{aggregation} by ({POOL}) ({series} * on (Hostname) group_left({POOL}) {NODE_POOL})"


FLEET = Board(
    "gpu-platform-fleet",
    "GPU fleet",
    (
        ("pool", f"label_values(kube_node_labels, {POOL})"),
        # The nodes of the selected pools, so the per-node panels follow the pool too.
        ("node", f'label_values(kube_node_labels{{{POOL}=~"$pool"}}, node)'),
    ),
    (
        Panel("GPU utilization per pool", "percent", ((_per_pool("avg", "DCGM_FI_DEV_GPU_UTIL"), f"{{{{{POOL}}}}}"),)),
        Panel("Tensor core activity per pool", "percentunit", ((_per_pool("avg", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), f"{{{{{POOL}}}}}"),)),
        Panel("Framebuffer used per pool", "decmbytes", ((_per_pool("sum", "DCGM_FI_DEV_FB_USED"), f"{{{{{POOL}}}}}"),)),
        Panel("Power per pool", "watt", ((_per_pool("sum", "DCGM_FI_DEV_POWER_USAGE"), f"{{{{{POOL}}}}}"),)),
        Panel("GPU temperature per pool (hottest GPU)", "celsius", ((_per_pool("max", "DCGM_FI_DEV_GPU_TEMP"), f"{{{{{POOL}}}}}"),)),
        Panel("GPUs whose last XID is set, per pool", "none", ((_per_pool("count", "(DCGM_FI_DEV_XID_ERRORS != 0)"), f"{{{{{POOL}}}}}"),)),
        Panel("Double-bit ECC errors per pool", "none", ((_per_pool("sum", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[1h])"), f"{{{{{POOL}}}}}"),)),
        Panel("GPU utilization", "percent", (('avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL{Hostname=~"$node"})', "{{Hostname}}"),)),
        Panel("Tensor core activity", "percentunit", (('avg by (Hostname) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{Hostname=~"$node"})', "{{Hostname}}"),)),
        Panel("Framebuffer used", "decmbytes", (('sum by (Hostname) (DCGM_FI_DEV_FB_USED{Hostname=~"$node"})', "{{Hostname}}"),)),
        Panel("Power", "watt", (('sum by (Hostname) (DCGM_FI_DEV_POWER_USAGE{Hostname=~"$node"})', "{{Hostname}}"),)),
        Panel("GPU temperature", "celsius", (('max by (Hostname) (DCGM_FI_DEV_GPU_TEMP{Hostname=~"$node"})', "{{Hostname}}"),)),
        Panel("XID errors (last XID per GPU)", "none", (('DCGM_FI_DEV_XID_ERRORS{Hostname=~"$node"} != 0', "{{Hostname}} gpu {{gpu}}"),)),
        Panel("Double-bit ECC errors", "none", (('increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{Hostname=~"$node"}[1h])', "{{Hostname}} gpu {{gpu}}"),)),
    ),
)

def _new_in_last_hour(counter: str) -> str:
    """How many series of `counter` appeared in the last hour. JobSet's counters are one series
    per JobSet, incremented once (kubernetes-sigs/jobset@v0.12.0 pkg/metrics/metrics.go:
    WithLabelValues(name, namespace).Inc()), so each first appears at 1 and increase() never
    sees it rise (prometheus/prometheus#1673); GMP's exporter even writes it as 0, the first
    sample only setting the reset point (GoogleCloudPlatform/prometheus google/export/
    series_cache.go getResetAdjusted). A series is counted by its presence instead. A restart of
    the controller forgets its counters, so the JobSets it reports again read as new once."""
    return f"count({counter} unless {counter} offset 1h) or vector(0)"


QUEUES = Board(
    "gpu-platform-queues",
    "Queues",
    (("team", "label_values(kueue_pending_workloads, cluster_queue)"),),
    (
        Panel("Pending workloads", "none", (('sum by (cluster_queue, status) (kueue_pending_workloads{cluster_queue=~"$team"})', "{{cluster_queue}} {{status}}"),)),
        Panel("Admitted workloads", "none", (('sum by (cluster_queue) (kueue_admitted_active_workloads{cluster_queue=~"$team"})', "{{cluster_queue}}"),)),
        Panel(
            "Admission wait p95 by tier",
            "s",
            (
                (
                    "histogram_quantile(0.95, sum by (le, cluster_queue, priority_class) "
                    '(rate(kueue_admission_wait_time_seconds_bucket{cluster_queue=~"$team"}[1h])))',
                    "{{cluster_queue}} {{priority_class}}",
                ),
            ),
        ),
        Panel(
            "GPU quota used vs nominal",
            "none",
            (
                (f'sum by (cluster_queue, flavor) (kueue_cluster_queue_resource_usage{{resource="{GPU_RESOURCE}", cluster_queue=~"$team"}})', "used {{cluster_queue}} {{flavor}}"),
                (f'sum by (cluster_queue, flavor) (kueue_cluster_queue_nominal_quota{{resource="{GPU_RESOURCE}", cluster_queue=~"$team"}})', "nominal {{cluster_queue}} {{flavor}}"),
            ),
        ),
        Panel(
            "Borrowing (used over nominal)",
            "none",
            (
                (
                    f'clamp_min(sum by (cluster_queue, flavor) (kueue_cluster_queue_resource_usage{{resource="{GPU_RESOURCE}"}})'
                    f' - sum by (cluster_queue, flavor) (kueue_cluster_queue_nominal_quota{{resource="{GPU_RESOURCE}"}}), 0)',
                    "{{cluster_queue}} {{flavor}}",
                ),
            ),
        ),
        Panel(
            "Preemptions and evictions",
            "none",
            (
                ('sum by (preempting_cluster_queue, reason) (increase(kueue_preempted_workloads_total[1h]))', "preempted by {{preempting_cluster_queue}} {{reason}}"),
                ('sum by (cluster_queue, reason) (increase(kueue_evicted_workloads_total[1h]))', "evicted {{cluster_queue}} {{reason}}"),
            ),
        ),
        # JobSet's controller counts each JobSet once as it completes or fails (facts.metrics.JOBSET),
        # labelled with the JobSet's namespace, which a scrape's own `namespace` target label
        # (the controller's) would rename to exported_namespace where labels are not honoured
        # (GMP): the panel counts over namespaces, the same on both backends.
        Panel(
            "JobSets completed and failed (last hour)",
            "none",
            ((_new_in_last_hour("jobset_completed_total"), "completed"), (_new_in_last_hour("jobset_failed_total"), "failed")),
        ),
    ),
)

JOB_VIEW = Board(
    "gpu-platform-job",
    "Training job",
    (("namespace", "label_values(trainer_step, namespace)"), ("jobset", "label_values(trainer_step{namespace=~\"$namespace\"}, jobset)")),
    (
        Panel("Step", "none", ((f"trainer_step{JOB}", "{{jobset}}"), (f"trainer_max_steps{JOB}", "max {{jobset}}"))),
        Panel("Tokens per second", "short", ((f"trainer_tokens_per_second{JOB}", "{{jobset}}"),)),
        Panel("MFU", "percentunit", ((f"trainer_mfu{JOB}", "{{jobset}}"),)),
        Panel("Loss", "none", ((f"trainer_loss{JOB}", "train {{jobset}}"), (f"trainer_eval_loss{JOB}", "eval {{jobset}}"))),
        Panel(
            "Step time and data wait",
            "s",
            ((f"trainer_step_seconds{JOB}", "step {{jobset}}"), (f"trainer_data_wait_seconds{JOB}", "data wait {{jobset}}")),
        ),
        Panel("Checkpoint save time", "s", ((f"trainer_checkpoint_save_seconds{JOB}", "{{jobset}}"),)),
        Panel(
            "Goodput",
            "percentunit",
            ((f"trainer_goodput_ratio{JOB}", "this process {{jobset}}"), (f"job:trainer_goodput:ratio1h{JOB}", "last hour {{jobset}}")),
        ),
        Panel("Badput by cause", "s", ((f"sum by (cause) (trainer_badput_seconds_total{JOB})", "{{cause}}"),)),
        Panel("Restarts", "none", ((f"trainer_restarts{JOB}", "{{jobset}}"),)),
        # The fabric gate's probe, before step 1 of multi-node runs (trainer.fabric); "Bps" is
        # Grafana's bytes/sec unit (grafana/grafana packages/grafana-data valueFormats/categories.ts).
        Panel(
            "Fabric probe bus bandwidth",
            "Bps",
            (
                (f"trainer_fabric_bus_bandwidth_bytes_per_second{JOB}", "{{jobset}} {{transport}} ({{check}})"),
                (f"trainer_fabric_floor_bytes_per_second{JOB}", "floor {{jobset}}"),
            ),
        ),
        Panel("Fabric check passed", "bool", ((f"trainer_fabric_check_passed{JOB}", "{{jobset}} {{transport}} ({{check}})"),)),
    ),
)

COST = Board(
    "gpu-platform-cost",
    "GPU cost",
    (("team", "label_values(team_pool:gpu_slots:usage, cluster_queue)"),),
    (
        Panel("GPUs in use per team and pool", "none", (('team_pool:gpu_slots:usage{cluster_queue=~"$team"}', "{{cluster_queue}} {{flavor}}"),)),
        Panel("GPU-hours per day", "h", (('sum by (cluster_queue, flavor) (sum_over_time(team_pool:gpu_slots:usage{cluster_queue=~"$team"}[1d:1m])) / 60', "{{cluster_queue}} {{flavor}}"),)),
        Panel("$ per hour (reference prices)", "currencyUSD", (('sum by (cluster_queue, flavor) (team_pool:gpu_usd_per_hour:usage{cluster_queue=~"$team"})', "{{cluster_queue}} {{flavor}}"),)),
        Panel("$ per day (reference prices)", "currencyUSD", (('sum by (cluster_queue) (sum_over_time(team_pool:gpu_usd_per_hour:usage{cluster_queue=~"$team"}[1d:1m])) / 60', "{{cluster_queue}}"),)),
    ),
)

BOARDS: tuple[Board, ...] = (FLEET, QUEUES, JOB_VIEW, COST)


def build(board: Board) -> dict[str, Any]:
    """The dashboard model Grafana imports (schemaVersion as the SDK writes it)."""
    source = DataSourceRef(type_val="prometheus", uid=DATASOURCE_UID)
    builder = dashboard.Dashboard(board.title).uid(board.uid).tags(["gpu-platform"]).refresh("30s")
    for name, query in board.variables:
        builder = builder.with_variable(
            dashboard.QueryVariable(name).query(query).datasource(source).include_all(True).all_value(".*")
        )
    for panel in board.panels:
        built = timeseries.Panel().title(panel.title).unit(panel.unit).datasource(source)
        for index, (expr, legend) in enumerate(panel.queries):
            built = built.with_target(prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(chr(ord("A") + index)))
        builder = builder.with_panel(built)
    return json.loads(JSONEncoder(sort_keys=True).encode(builder.build()))


def config_maps() -> list[dict[str, Any]]:
    """One ConfigMap per dashboard in the monitoring namespace, where the sidecar looks."""
    maps = []
    for board in BOARDS:
        meta = _metadata(board.uid, NAMESPACE)
        meta["labels"][DASHBOARD_LABEL] = "1"
        maps.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {f"{board.uid}.json": json.dumps(build(board), sort_keys=True)}})
    return maps


def queries(board: Board) -> list[str]:
    return [expr for panel in board.panels for expr, _ in panel.queries]

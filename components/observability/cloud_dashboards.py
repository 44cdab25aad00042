"""The dashboards as Cloud Monitoring dashboards, for GKE's managed backend (no Grafana there).

Derived from the Grafana boards (components.observability.dashboards): the same panels, titles
and PromQL, so the queries have one source. A Cloud Monitoring dashboard charts PromQL with
`xyChart.dataSets[].timeSeriesQuery.prometheusQuery` (Cloud Monitoring API v1, projects.dashboards:
Dashboard, MosaicLayout, Tile, Widget, XyChart, DataSet, TimeSeriesQuery;
https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards, and "Example
dashboards and layouts", https://cloud.google.com/monitoring/dashboards/api-examples, "Using MQL
or PromQL with the API"). Only the queries whose series GKE's managed collection has are kept:
a query naming a series only the chart's exporters publish (kube_node_labels, the XID and ECC
counters, node exporter) or a record GKE's ClusterRules leave out (rules.NOT_ON_GKE) would chart
nothing, so it is left out, and a panel left without queries with it.

Grafana's variables have no counterpart here: each `$variable` matches everything (`.*`), and
every team, job or pool is a series of its own (the legend tells them apart). The dashboard pins
the filter `cluster` to the stack's cluster (DashboardFilter, filterType RESOURCE_LABEL: GMP
writes the cluster as the `cluster` label of the prometheus_target resource); Cloud Monitoring
applies a pinned filter only to widgets whose data carries that label ("Create and manage
variables and pinned filters", https://cloud.google.com/monitoring/dashboards/filter-permanent),
so a chart that aggregates the label away would sum over every cluster writing to the project:
every selector of every query carries `cluster="<name>"` as well (in_cluster).
"""

from __future__ import annotations

import json
import re
from typing import Any

import promql_parser

from components.facts.metrics import published
from components.observability.dashboards import BOARDS, Board
from components.observability.rules import NOT_ON_GKE

# MosaicLayout: a grid of at most 48 columns; two charts side by side.
COLUMNS = 48
TILE_WIDTH = 24
TILE_HEIGHT = 16
# Series that exist with the chart but not on GKE's managed collection, as tokens of a query.
ABSENT_ON_GKE: frozenset[str] = (published("kube-prometheus-stack") - published("managed")) | frozenset(NOT_ON_GKE)
# Grafana's unit of a panel (grafana/grafana packages/grafana-data valueFormats/categories.ts) as
# TimeSeriesQuery.unitOverride, which takes a MetricDescriptor unit: the subset of UCUM that
# google/api/metric.proto (googleapis-common-protos 1.75.0) lists, `%` for 0..100, `10^2.%` for a
# 0..1 ratio shown as a percentage, `1` dimensionless. DCGM reports the framebuffer in MiB. Watts,
# degrees Celsius and dollars are no unit of that list, so those charts keep the data's own.
CLOUD_UNITS: dict[str, str] = {
    "percent": "%",
    "percentunit": "10^2.%",
    "decmbytes": "MiBy",
    "Bps": "By/s",
    "s": "s",
    "h": "h",
    "none": "1",
    "short": "1",
    "bool": "1",
}
WITHOUT_CLOUD_UNIT: frozenset[str] = frozenset({"watt", "celsius", "currencyUSD"})
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# Grafana's legend `{{label}}`; a PromQL DataSet's legendTemplate interpolates a series' label as
# `${labels.<key>}` (GoogleCloudPlatform/monitoring-dashboard-samples
# dashboards/kuberay/ray-overview.json: "CPU Usage: ${labels.instance}").
_LEGEND = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


def on_gke(expr: str) -> bool:
    """Whether every series `expr` reads exists on GKE's managed backend. A label or function
    name never equals a metric name of the chart's exporters, so tokens are enough here; the
    tests parse the kept and the dropped queries as PromQL and check both ways."""
    return not set(_NAME.findall(expr)) & ABSENT_ON_GKE


def _concrete(expr: str, board: Board, cluster: str) -> str:
    """`expr` with each of the board's variables matching everything, and scoped to `cluster`."""
    for name, _ in board.variables:
        expr = re.sub(rf"\${name}\b", ".*", expr)
    return in_cluster(expr, cluster)


def in_cluster(expr: str, cluster: str) -> str:
    """`expr` with `cluster="<cluster>"` on every series selector, written back by promql-parser
    (so spacing is the parser's). The pinned filter cannot do this for a chart that aggregates
    `cluster` away ("Create and manage variables and pinned filters",
    https://cloud.google.com/monitoring/dashboards/filter-permanent); GMP keeps the cluster as the
    `cluster` label of every series it writes, queryable in PromQL (GoogleCloudPlatform/
    monitoring-dashboard-samples dashboards/kuberay/ray-overview.json: `cluster=~"${Cluster.value}"`)."""
    matcher = f"cluster={json.dumps(cluster)},"

    def scoped(node: object) -> promql_parser.Expr | None:
        if not isinstance(node, promql_parser.VectorSelector):
            return None
        # A selector prints as `name{matchers}` and then any offset or @ (promql-parser's Display).
        text, brace = str(node), len(node.name or "") + 1
        return promql_parser.parse(text[:brace] + matcher + text[brace:])

    scoped_expr = promql_parser.transform(promql_parser.parse(expr), post_visit=scoped)
    unscoped: list[str] = []

    def check(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector) and not any(
            m.name == "cluster" and m.op == promql_parser.MatchOp.Equal and m.value == cluster for m in node.matchers.matchers
        ):
            unscoped.append(str(node))

    promql_parser.walk(scoped_expr, check)
    if unscoped:
        raise ValueError(f"selectors left without cluster={cluster!r}: {unscoped} in {expr}")
    return str(scoped_expr)


def _query(expr: str, unit: str) -> dict[str, str]:
    """Raises KeyError for a Grafana unit neither table names, so a new unit is decided here."""
    if unit in WITHOUT_CLOUD_UNIT:
        return {"prometheusQuery": expr}
    return {"prometheusQuery": expr, "unitOverride": CLOUD_UNITS[unit]}


def widgets(board: Board, cluster: str) -> list[dict[str, Any]]:
    """One xyChart per panel that keeps a query on GKE."""
    charts = []
    for panel in board.panels:
        data_sets = [
            {
                "timeSeriesQuery": _query(_concrete(expr, board, cluster), panel.unit),
                "plotType": "LINE",
                "targetAxis": "Y1",
                "legendTemplate": _LEGEND.sub(r"${labels.\1}", legend),
            }
            for expr, legend in panel.queries
            if on_gke(expr)
        ]
        if data_sets:
            charts.append({"title": panel.title, "xyChart": {"dataSets": data_sets, "yAxis": {"scale": "LINEAR"}}})
    return charts


def dashboard(board: Board, cluster: str) -> dict[str, Any] | None:
    """The Dashboard resource's JSON; None when no panel of the board has its series on GKE."""
    charts = widgets(board, cluster)
    if not charts:
        return None
    return {
        "displayName": f"{board.title} ({cluster})",
        "dashboardFilters": [_pinned("cluster", cluster)],
        "mosaicLayout": {"columns": COLUMNS, "tiles": [_tile(i, widget) for i, widget in enumerate(charts)]},
    }


# The API stores a dashboard normalized: a zero position is left out and a filter gets its
# valueType, so a document that writes either differently reads back changed and every preview
# shows a diff (hashicorp/terraform-provider-google#16173). The samples Google publishes leave
# out zero positions (GoogleCloudPlatform/monitoring-dashboard-samples
# dashboards/kuberay/ray-overview.json), and a single-value pinned filter reads back with
# "valueType": "STRING" (same repository, pull request #969; DashboardFilter.valueType,
# STRING or STRING_ARRAY). Not yet checked against a real apply: a first `pulumi up` followed by
# `pulumi preview` on a managed GKE stack should show no change to the dashboards.
def _tile(index: int, widget: dict[str, Any]) -> dict[str, Any]:
    """The `index`th chart's tile, two to a row."""
    per_row = COLUMNS // TILE_WIDTH
    position = {"xPos": (index % per_row) * TILE_WIDTH, "yPos": (index // per_row) * TILE_HEIGHT}
    return {**{k: v for k, v in position.items() if v}, "width": TILE_WIDTH, "height": TILE_HEIGHT, "widget": widget}


def _pinned(label: str, value: str) -> dict[str, Any]:
    return {"labelKey": label, "filterType": "RESOURCE_LABEL", "stringValue": value, "valueType": "STRING"}


def dashboards(cluster: str) -> dict[str, dict[str, Any]]:
    """The boards GKE can show, by the Grafana board's uid."""
    built = {board.uid: dashboard(board, cluster) for board in BOARDS}
    return {uid: doc for uid, doc in built.items() if doc is not None}

"""GKE's managed backend: the boards as Cloud Monitoring dashboards, in the shape the Cloud
Monitoring API's Dashboard resource takes (projects.dashboards, v1: displayName, a mosaicLayout
of tiles within its columns, widgets charting PromQL through xyChart dataSets), from the Grafana
boards' own queries, and only those GKE has the series for."""

from __future__ import annotations

import json
import re
from typing import Any

import promql_parser
import pytest
from promql_names import metric_names, unknown_metrics
from test_backend_metrics import _gcp_platform, _groups, _recorded
from test_observability_stacks import _gke_with_the_chart, _stack

from components.observability import cloud_dashboards, dashboards
from components.observability.dashboards import BOARDS, Board

DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
# API enums (projects.dashboards: XyChart.DataSet.PlotType, TargetAxis; Axis.Scale;
# DashboardFilter.FilterType).
PLOT_TYPES = {"LINE", "STACKED_AREA", "STACKED_BAR", "HEATMAP"}
TARGET_AXES = {"Y1", "Y2"}
SCALES = {"LINEAR", "LOG10"}
FILTER_TYPES = {"RESOURCE_LABEL", "METRIC_LABEL", "USER_METADATA_LABEL", "SYSTEM_METADATA_LABEL", "GROUP"}
TILE_FIELDS = {"width", "height", "widget"}
POSITIONS = {"xPos", "yPos"}


def _gke_recorded() -> list[str]:
    """What dev-gcp's ClusterRules record (its pools are priced, so the $ records are there)."""
    return _recorded(_groups(_gcp_platform()))


def _shape_problems(doc: dict[str, Any]) -> list[str]:
    problems = []
    if not isinstance(doc.get("displayName"), str) or not doc["displayName"]:
        problems.append("displayName")
    layout = doc.get("mosaicLayout", {})
    if not 1 <= layout.get("columns", 0) <= 48:
        problems.append("mosaicLayout.columns")
    cells: set[tuple[int, int]] = set()
    for i, tile in enumerate(layout.get("tiles", [])):
        if not TILE_FIELDS <= set(tile) <= TILE_FIELDS | POSITIONS:
            problems.append(f"tile {i} fields {sorted(tile)}")
            continue
        x0, y0 = tile.get("xPos", 0), tile.get("yPos", 0)
        if x0 + tile["width"] > layout["columns"]:
            problems.append(f"tile {i} past the columns")
        mine = {(x, y) for x in range(x0, x0 + tile["width"]) for y in range(y0, y0 + tile["height"])}
        if mine & cells:
            problems.append(f"tile {i} overlaps another")
        cells |= mine
        chart = tile["widget"].get("xyChart", {})
        if not tile["widget"].get("title") or not chart.get("dataSets"):
            problems.append(f"tile {i} has no title or data sets")
        if chart.get("yAxis", {}).get("scale", "LINEAR") not in SCALES:
            problems.append(f"tile {i} yAxis.scale")
        for data_set in chart.get("dataSets", []):
            query = data_set.get("timeSeriesQuery", {})
            if not {"prometheusQuery"} <= set(query) <= {"prometheusQuery", "unitOverride"} or not query["prometheusQuery"]:
                problems.append(f"tile {i} timeSeriesQuery {query}")
            if data_set.get("plotType") not in PLOT_TYPES or data_set.get("targetAxis") not in TARGET_AXES:
                problems.append(f"tile {i} plotType/targetAxis")
    for f in doc.get("dashboardFilters", []):
        if not f.get("labelKey") or f.get("filterType") not in FILTER_TYPES:
            problems.append(f"dashboardFilter {f}")
    return problems


def _queries(doc: dict[str, Any]) -> list[str]:
    return [d["timeSeriesQuery"]["prometheusQuery"] for t in doc["mosaicLayout"]["tiles"] for d in t["widget"]["xyChart"]["dataSets"]]


@pytest.mark.parametrize("stack", ["dev-gcp", "prod-gcp"])
def test_the_managed_gcp_stacks_declare_a_dashboard_per_board_in_the_api_s_shape(stack: str) -> None:
    declared = _stack(stack).by_type(DASHBOARD)
    assert len(declared) == len(BOARDS)
    for resource in declared:
        doc = json.loads(resource["inputs"]["dashboardJson"])
        assert _shape_problems(doc) == [], resource["name"]


def test_a_dashboard_with_a_tile_past_its_columns_is_caught() -> None:
    doc = cloud_dashboards.dashboard(dashboards.JOB_VIEW, "c")
    assert doc is not None
    doc["mosaicLayout"]["tiles"][0]["xPos"] = 40
    assert "tile 0 past the columns" in _shape_problems(doc)


def test_gke_with_the_chart_ships_grafana_s_config_maps_and_no_cloud_dashboard() -> None:
    assert _gke_with_the_chart().by_type(DASHBOARD) == []


@pytest.mark.parametrize("board", BOARDS, ids=lambda b: b.uid)
def test_every_kept_query_names_only_series_gke_exports(board: Board) -> None:
    doc = cloud_dashboards.dashboard(board, "c")
    assert doc is not None
    assert unknown_metrics(_queries(doc), _gke_recorded(), backend="managed") == []


@pytest.mark.parametrize("board", BOARDS, ids=lambda b: b.uid)
def test_every_left_out_query_names_a_series_gke_lacks(board: Board) -> None:
    left_out = [q for q in dashboards.queries(board) if not cloud_dashboards.on_gke(q)]
    assert all(unknown_metrics([q], _gke_recorded(), backend="managed") for q in left_out), left_out


def test_the_per_pool_and_xid_panels_are_left_out_on_gke() -> None:
    doc = cloud_dashboards.dashboard(dashboards.FLEET, "c")
    assert doc is not None
    titles = {t["widget"]["title"] for t in doc["mosaicLayout"]["tiles"]}
    assert "GPU utilization" in titles
    assert not {t for t in titles if "per pool" in t or "XID" in t or "ECC" in t}


@pytest.mark.parametrize("board", BOARDS, ids=lambda b: b.uid)
def test_the_queries_are_the_grafana_board_s_with_its_variables_matching_everything(board: Board) -> None:
    doc = cloud_dashboards.dashboard(board, "c")
    assert doc is not None
    expected = [q for q in dashboards.queries(board) if cloud_dashboards.on_gke(q)]
    variables = [name for name, _ in board.variables]
    for query in expected:
        metric_names(query)
    concrete = [re.sub(r"\$(" + "|".join(variables) + r")\b", ".*", q) for q in expected]
    unscoped = [q.replace('cluster="c",', "").replace('cluster="c"', "") for q in _queries(doc)]
    assert [str(promql_parser.parse(q)) for q in unscoped] == [str(promql_parser.parse(q)) for q in concrete]
    assert not any(f"${name}" in q for q in _queries(doc) for name in variables)


def _selectors(expr: str) -> list[promql_parser.VectorSelector]:
    found: list[promql_parser.VectorSelector] = []
    promql_parser.walk(promql_parser.parse(expr), lambda n: found.append(n) if isinstance(n, promql_parser.VectorSelector) else None)
    return found


def _has_cluster(selector: promql_parser.VectorSelector, cluster: str) -> bool:
    return any(m.name == "cluster" and m.op == promql_parser.MatchOp.Equal and m.value == cluster
               for m in selector.matchers.matchers)


@pytest.mark.parametrize("stack", ["dev-gcp", "prod-gcp"])
def test_every_selector_of_every_shipped_query_is_scoped_to_the_stack_s_cluster(stack: str) -> None:
    for resource in _stack(stack).by_type(DASHBOARD):
        doc = json.loads(resource["inputs"]["dashboardJson"])
        cluster = doc["dashboardFilters"][0]["stringValue"]
        selectors = [sel for q in _queries(doc) for sel in _selectors(q)]
        assert selectors and [str(sel) for sel in selectors if not _has_cluster(sel, cluster)] == [], resource["name"]


def test_scoping_reaches_selectors_under_ranges_subqueries_offsets_and_by_name() -> None:
    expr = 'sum(rate(a[5m])) / sum_over_time(b{x="1"}[1d:1m]) + (c unless c offset 1h) + {__name__="d"} or vector(0)'
    selectors = _selectors(cloud_dashboards.in_cluster(expr, "gpu-dev"))
    assert len(selectors) == 5 and all(_has_cluster(sel, "gpu-dev") for sel in selectors)


def test_legends_interpolate_labels_as_cloud_monitoring_does() -> None:
    doc = cloud_dashboards.dashboard(dashboards.JOB_VIEW, "c")
    assert doc is not None
    legends = [d["legendTemplate"] for t in doc["mosaicLayout"]["tiles"] for d in t["widget"]["xyChart"]["dataSets"]]
    assert "train ${labels.jobset}" in legends and not any("{{" in legend for legend in legends)


def test_the_dashboard_is_pinned_to_the_stack_s_cluster() -> None:
    doc = cloud_dashboards.dashboard(dashboards.QUEUES, "gpu-dev")
    assert doc is not None
    assert doc["dashboardFilters"] == [
        {"labelKey": "cluster", "filterType": "RESOURCE_LABEL", "stringValue": "gpu-dev", "valueType": "STRING"}
    ]
    assert doc["displayName"] == "Queues (gpu-dev)"


@pytest.mark.parametrize("board", BOARDS, ids=lambda b: b.uid)
def test_no_tile_writes_a_zero_position_which_the_api_would_drop(board: Board) -> None:
    doc = cloud_dashboards.dashboard(board, "c")
    assert doc is not None
    tiles = doc["mosaicLayout"]["tiles"]
    assert all(tile[k] != 0 for tile in tiles for k in POSITIONS & set(tile))
    assert "xPos" not in tiles[0] and "yPos" not in tiles[0]


def test_every_panel_unit_is_mapped_or_left_to_the_data() -> None:
    units = {panel.unit for board in BOARDS for panel in board.panels}
    assert units <= set(cloud_dashboards.CLOUD_UNITS) | cloud_dashboards.WITHOUT_CLOUD_UNIT


def test_each_chart_carries_its_panel_s_unit_as_a_metric_descriptor_unit() -> None:
    doc = cloud_dashboards.dashboard(dashboards.JOB_VIEW, "c")
    assert doc is not None
    units = {t["widget"]["title"]: {d["timeSeriesQuery"].get("unitOverride") for d in t["widget"]["xyChart"]["dataSets"]}
             for t in doc["mosaicLayout"]["tiles"]}
    assert units["Fabric probe bus bandwidth"] == {"By/s"}
    assert units["MFU"] == {"10^2.%"}
    assert units["Checkpoint save time"] == {"s"}


def test_a_chart_in_watts_keeps_the_data_s_own_unit() -> None:
    doc = cloud_dashboards.dashboard(dashboards.FLEET, "c")
    assert doc is not None
    power = next(t for t in doc["mosaicLayout"]["tiles"] if t["widget"]["title"] == "Power")
    assert all("unitOverride" not in d["timeSeriesQuery"] for d in power["widget"]["xyChart"]["dataSets"])

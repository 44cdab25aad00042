"""Chart pins and the values-key check every release goes through."""

from __future__ import annotations

import pytest
from k8s_support import chart_defaults, chart_keys

from components.facts import charts

DEVICE_PLUGIN_KEYS = {
    "referenced": ["migStrategy", "config.map", "config.default", "gfd.enabled", "tolerations"],
    "passthrough": ["config.map", "tolerations"],
    "subcharts": ["nfd"],
}


def test_values_paths_are_leaf_paths_with_lists_and_empty_maps_as_leaves() -> None:
    values = {"gfd": {"enabled": True}, "tolerations": [{"key": "a"}], "nodeSelector": {}}
    assert charts.values_paths(values) == ["gfd.enabled", "tolerations", "nodeSelector"]


def test_a_key_the_chart_never_reads_is_reported() -> None:
    assert charts.unknown_values_keys({"mixedStrategy": "single"}, DEVICE_PLUGIN_KEYS) == ["mixedStrategy"]


def test_keys_the_templates_read_are_accepted() -> None:
    assert charts.unknown_values_keys({"migStrategy": "single", "gfd": {"enabled": True}}, DEVICE_PLUGIN_KEYS) == []


def test_any_key_under_a_pass_through_map_is_accepted() -> None:
    values = {"config": {"map": {"time-slicing-4": "version: v1\n"}}}
    assert charts.unknown_values_keys(values, DEVICE_PLUGIN_KEYS) == []


def test_a_key_beside_a_pass_through_map_is_still_checked() -> None:
    assert charts.unknown_values_keys({"config": {"mapp": {}}}, DEVICE_PLUGIN_KEYS) == ["config.mapp"]


def test_subchart_keys_are_left_to_the_subchart() -> None:
    assert charts.unknown_values_keys({"nfd": {"worker": {"tolerations": []}}}, DEVICE_PLUGIN_KEYS) == []


@pytest.mark.parametrize("chart", charts.CHARTS, ids=lambda c: c.name)
def test_every_pinned_chart_has_its_reference_data_at_the_pinned_version(chart: charts.Chart) -> None:
    assert chart_defaults(chart.name, chart.version)
    assert chart_keys(chart.name, chart.version)["referenced"]


def test_oci_charts_are_installed_by_their_full_reference() -> None:
    assert charts.KUEUE.reference == "oci://registry.k8s.io/kueue/charts/kueue"


def test_repository_charts_are_installed_by_name() -> None:
    assert charts.NVIDIA_DEVICE_PLUGIN.reference == "nvidia-device-plugin"

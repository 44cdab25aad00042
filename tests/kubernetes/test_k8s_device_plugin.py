"""Device-plugin configs: one named config per sharing profile, replicas as the spec says."""

from __future__ import annotations

from typing import Any

import yaml
from k8s_support import onprem_platform, pools_of, spec_of

from components.kubernetes.device_plugin import config_map, device_plugin_labels
from components.node_resources import installs_device_plugin


def mixed_platform() -> dict[str, Any]:
    """An existing cluster with every sharing profile this plugin serves: none, time-slicing and MPS."""
    platform = onprem_platform()
    platform["scheduling"] = {}
    base = {"gpuModel": "A100-80GB", "gpusPerNode": 8, "minNodes": 1, "maxNodes": 1}
    platform["nodePools"] = [
        {**base, "name": "whole", "nodeSelector": {"lab/pool": "whole"}},
        {**base, "name": "sliced", "nodeSelector": {"lab/pool": "sliced"}, "sharing": {"mode": "time-slicing", "replicas": 4}},
        {**base, "name": "sliced-too", "nodeSelector": {"lab/pool": "sliced-too"}, "sharing": {"mode": "time-slicing", "replicas": 4}},
        {**base, "name": "mps", "nodeSelector": {"lab/pool": "mps"}, "sharing": {"mode": "mps", "replicas": 2}},
    ]
    return platform


def configs() -> dict[str, dict[str, Any]]:
    return {name: yaml.safe_load(text) for name, text in config_map(pools_of(mixed_platform())).items()}


def test_one_named_config_per_sharing_profile_and_the_default() -> None:
    assert sorted(configs()) == ["mps-2", "none", "time-slicing-4"]


def test_every_pool_s_label_names_a_config_in_the_map() -> None:
    platform = mixed_platform()
    labels = device_plugin_labels(spec_of(platform), pools_of(platform))
    assert {label["nvidia.com/device-plugin.config"] for label in labels.values()} <= set(configs())


def test_time_slicing_replicas_equal_the_spec() -> None:
    sharing = configs()["time-slicing-4"]["sharing"]
    assert sharing["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]


def test_mps_replicas_equal_the_spec() -> None:
    sharing = configs()["mps-2"]["sharing"]
    assert sharing["mps"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 2}]


def test_shared_gpus_give_a_pod_one_slot_at_most() -> None:
    assert configs()["time-slicing-4"]["sharing"]["timeSlicing"]["failRequestsGreaterThanOne"] is True


def test_the_default_config_shares_nothing() -> None:
    assert configs()["none"] == {"version": "v1", "flags": {"migStrategy": "none"}}


def test_the_plugin_is_installed_only_for_device_plugin_nvidia() -> None:
    platform = onprem_platform()
    assert installs_device_plugin(spec_of(platform))
    platform["devicePlugin"] = "managed"
    assert not installs_device_plugin(spec_of(platform))


def test_pools_need_no_config_label_where_the_platform_brings_its_own_plugin() -> None:
    platform = onprem_platform()
    platform["devicePlugin"] = "managed"
    assert device_plugin_labels(spec_of(platform), pools_of(platform)) == {"a100-train": {}, "l40s-shared": {}}

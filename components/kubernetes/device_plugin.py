"""The NVIDIA device plugin's configs: one named config per sharing profile the pools use.

The plugin reads its config from a ConfigMap of named configs (`config.map`); each node picks
one with the label `nvidia.com/device-plugin.config=<name>`, which the cloud wings put on every
pool's nodes (`Pool.labels`). Nodes without the label get `config.default`: no sharing.

Config file format (k8s-device-plugin README, v0.20.0): `version: v1`, `flags.migStrategy`
(none | single | mixed) and `sharing.timeSlicing` or `sharing.mps` with `resources[]` of
`{name, replicas}`.
"""

from __future__ import annotations

from typing import Any

import yaml

from components.node_resources import installs_device_plugin
from components.pools import DEVICE_PLUGIN_CONFIG_LABEL, GPU_RESOURCE, Pool
from components.spec import PlatformSpec

# The named config every node falls back to: whole GPUs, no MIG.
DEFAULT_CONFIG = "none"

_SHARING_KEYS = {"time-slicing": "timeSlicing", "mps": "mps"}


def plugin_config(pool: Pool) -> dict[str, Any]:
    """The config file of `pool`'s sharing profile (`pool.device_plugin_config` names it)."""
    # No MIG here: the spec allows MIG pools only on GKE, which partitions GPUs and advertises them
    # with its own plugin; this plugin runs where nothing would create the MIG instances.
    config: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": "none"}}
    sharing = _SHARING_KEYS.get(pool.sharing_mode)
    if sharing is not None:
        config["sharing"] = {
            sharing: {
                "renameByDefault": False,
                # A pod asking for two replicas could get two slices of one GPU, which is no
                # faster than one: allow one slot per pod, as GKE's own sharing does.
                "failRequestsGreaterThanOne": True,
                "resources": [{"name": GPU_RESOURCE, "replicas": pool.slots_per_gpu}],
            }
        }
    return config


def _config_text(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False)


def config_map(pools: list[Pool]) -> dict[str, str]:
    """`config.map`: the default config plus one entry per sharing profile, sorted by name."""
    configs = {DEFAULT_CONFIG: _config_text({"version": "v1", "flags": {"migStrategy": "none"}})}
    for pool in pools:
        configs[pool.device_plugin_config] = _config_text(plugin_config(pool))
    return dict(sorted(configs.items()))


def device_plugin_labels(spec: PlatformSpec, pools: list[Pool]) -> dict[str, dict[str, str]]:
    """The label each pool's nodes must carry to pick their config; none when we install no plugin."""
    if not installs_device_plugin(spec):
        return {pool.name: {} for pool in pools}
    return {pool.name: {DEVICE_PLUGIN_CONFIG_LABEL: pool.device_plugin_config} for pool in pools}

"""The DCGM exporter reads the platform's counters file: the chart's values, merged over the
chart's defaults the way Helm merges them, put the `customMetrics` ConfigMap where `-f` points.

No helm binary here, so the DaemonSet's parts are derived from the pinned chart's templates
(NVIDIA/dcgm-exporter@4.5.3-4.8.2 deployment/templates/daemonset.yaml: `volumes` gets
`extraConfigMapVolumes`, the container's `volumeMounts` gets `extraVolumeMounts`, `args` is
`arguments`; templates/metrics-configmap.yaml: ConfigMap `exporter-metrics-config-map`, key
`metrics` = `customMetrics`).
"""

from __future__ import annotations

import posixpath
from typing import Any

from k8s_support import chart_defaults, onprem_platform, pools_of, spec_of

from components.facts import charts
from components.facts.metrics import DCGM_ADDED
from components.kubernetes.releases import dcgm_exporter_values
from components.observability.objects import DCGM_COUNTERS_CONFIG_MAP


def _helm_merge(defaults: Any, values: Any) -> Any:
    """Helm's coalescing: maps merge key by key, anything else (lists included) is replaced."""
    if isinstance(defaults, dict) and isinstance(values, dict):
        return {key: _helm_merge(defaults.get(key), values[key]) if key in values else defaults[key]
                for key in {**defaults, **values}}
    return values


def _effective(values: dict[str, Any] | None = None) -> dict[str, Any]:
    platform = onprem_platform()
    ours = values if values is not None else dcgm_exporter_values(spec_of(platform), pools_of(platform))
    return _helm_merge(chart_defaults(charts.DCGM_EXPORTER.name, charts.DCGM_EXPORTER.version), ours)


def _counters_file(effective: dict[str, Any]) -> str | None:
    """What the exporter reads with `-f`, as ConfigMap data: the file the args name, found
    through the container's mounts and the pod's ConfigMap volumes; None if it is not one."""
    args = effective["arguments"]
    if "-f" not in args:
        return None
    path = args[args.index("-f") + 1]
    volumes = {v["name"]: v for v in effective["extraConfigMapVolumes"]}
    for mount in effective["extraVolumeMounts"]:
        volume = volumes.get(mount["name"])
        if volume is None:
            continue
        if "subPath" in mount:
            if mount["mountPath"] != path:
                continue
            relative = mount["subPath"]
        elif path.startswith(mount["mountPath"].rstrip("/") + "/"):
            relative = posixpath.relpath(path, mount["mountPath"])
        else:
            continue
        config_map = volume["configMap"]
        items = {item["path"]: item["key"] for item in config_map.get("items", [])}
        if config_map["name"] == DCGM_COUNTERS_CONFIG_MAP and items.get(relative) == "metrics":
            return effective["customMetrics"]
    return None


def _automounts_token(effective: dict[str, Any]) -> bool:
    """templates/daemonset.yaml: automountServiceAccountToken's expression at 4.8.2."""
    k8s = effective["kubernetes"]
    return bool(((k8s["enablePodLabels"] or k8s["enablePodUID"]) and k8s["rbac"]["create"])
                or effective["kubernetesDRA"]["enabled"])


def test_the_counters_file_the_exporter_reads_is_the_platform_s_list() -> None:
    effective = _effective()
    text = _counters_file(effective)
    assert text is not None
    names = {line.split(",")[0].strip() for line in text.splitlines() if line and not line.startswith("#")}
    assert {name for name, _ in DCGM_ADDED} <= names


def test_no_configmap_flag_without_a_service_account_token() -> None:
    effective = _effective()
    assert not _automounts_token(effective)
    assert "-m" not in effective["arguments"]


def test_reading_the_configmap_through_the_api_would_find_no_counters_file() -> None:
    platform = onprem_platform()
    values = dcgm_exporter_values(spec_of(platform), pools_of(platform))
    values["arguments"] = ["-m", f"{charts.DCGM_EXPORTER.namespace}:{DCGM_COUNTERS_CONFIG_MAP}"]
    assert _counters_file(_effective(values)) is None


def test_a_flag_naming_a_file_outside_the_mounts_reads_no_counters_of_ours() -> None:
    platform = onprem_platform()
    values = dcgm_exporter_values(spec_of(platform), pools_of(platform))
    values["arguments"] = ["-f", "/etc/dcgm-exporter/dcp-metrics-included.csv"]
    assert _counters_file(_effective(values)) is None

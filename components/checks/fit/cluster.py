"""The DaemonSets and GPU slots a GPU node gets, read from the synthesized releases, add-ons and
DaemonSets declared as they are (GKE GPUDirect's installers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import yaml

from components.checks.declared import EKS_ADDON, HELM_RELEASE, Resource, get, items, mapping
from components.checks.fit.shapes import (
    Taint,
    affinity_matches,
    int_or_none,
    is_known,
    requests_of,
    str_map,
    untolerated,
)
from components.node_resources import DAEMONSET_REQUESTS, EKS_ADDON_DAEMONSETS, NOTHING, Requests
from components.pools import DEVICE_PLUGIN_CONFIG_LABEL, GPU_RESOURCE

DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
LIMIT_RANGE = "kubernetes:core/v1:LimitRange"
# The product label GPU feature discovery writes on every GPU node (k8s-device-plugin v0.20.0
# internal/lm/resource.go productLabel): a node agent's label, rewritten with the sharing config.
GFD_PRODUCT_LABEL = "nvidia.com/gpu.product"
SHARED_SUFFIX = "-SHARED"


@dataclass(frozen=True)
class _Release:
    chart: str
    values: Mapping[str, Any]

    def requests(self, name: str, path: tuple[str, ...] = ("resources",)) -> Requests:
        """The release's requests for its DaemonSet `name`: its values where they set them,
        the chart default (node_resources.DAEMONSET_REQUESTS) otherwise."""
        resources = get(self.values, *path)
        return requests_of(resources) if get(resources, "requests") is not None else DAEMONSET_REQUESTS[name]


def _chart_name(chart: Any) -> str:
    """`oci://registry/.../jobset` and `jobset` alike."""
    return str(chart).rsplit("/", 1)[-1]


class Cluster:
    """The node agents, add-ons and device plugin configs the declared resources put on nodes."""

    def __init__(self, resources: Sequence[Resource]) -> None:
        self.releases = {
            _chart_name(get(r.props, "chart")): _Release(_chart_name(get(r.props, "chart")), mapping(get(r.props, "values")))
            for r in resources
            if r.type == HELM_RELEASE
        }
        self.addons = [str(get(r.props, "addonName")) for r in resources if r.type == EKS_ADDON]
        self.daemon_sets = [r.props for r in resources if r.type == DAEMON_SET]
        self.default_requests = {
            str(get(r.props, "metadata", "namespace")): default_requests(r.props) for r in resources if r.type == LIMIT_RANGE
        }

    def daemonsets(self, labels: Mapping[str, str], taints: Sequence[Taint], instance_type: str | None) -> dict[str, Requests]:
        """DaemonSet name -> requests, for every DaemonSet that runs on a node like this."""
        running: dict[str, Requests] = {}
        plugin = self.releases.get("nvidia-device-plugin")
        if plugin is not None and not untolerated(_tolerations(plugin.values), taints):
            running["nvidia-device-plugin"] = plugin.requests("nvidia-device-plugin")
            if get(plugin.values, "gfd", "enabled") is True:
                running["gpu-feature-discovery"] = plugin.requests("gpu-feature-discovery")
                # The chart's node-feature-discovery worker tolerates nvidia.com/gpu=present
                # (nvidia-device-plugin 0.20.0 values nfd.worker.tolerations).
                running["node-feature-discovery-worker"] = plugin.requests(
                    "node-feature-discovery-worker", ("nfd", "worker", "resources")
                )
            if self._plugin_config(plugin, labels).get("sharing", {}).get("mps") is not None:
                running["nvidia-mps-control-daemon"] = plugin.requests("nvidia-mps-control-daemon")
        dcgm = self.releases.get("dcgm-exporter")
        if (
            dcgm is not None
            and not untolerated(_tolerations(dcgm.values), taints)
            and affinity_matches(get(dcgm.values, "affinity"), labels)
        ):
            running["dcgm-exporter"] = dcgm.requests("dcgm-exporter")
        efa = self._efa_plugin(labels, taints, instance_type)
        if efa is not None:
            running["aws-efa-k8s-device-plugin"] = efa.requests("aws-efa-k8s-device-plugin")
        for addon in self.addons:
            # EKS add-on DaemonSets tolerate every taint (their manifests: `operator: Exists`).
            if addon in EKS_ADDON_DAEMONSETS:
                running[EKS_ADDON_DAEMONSETS[addon]] = DAEMONSET_REQUESTS[EKS_ADDON_DAEMONSETS[addon]]
        for daemon_set in self.daemon_sets:
            pod = mapping(get(daemon_set, "spec", "template", "spec"))
            tolerations = [t for t in items(get(pod, "tolerations")) if isinstance(t, Mapping)]
            if not untolerated(tolerations, taints) and affinity_matches(get(pod, "affinity"), labels):
                running[str(get(daemon_set, "metadata", "name"))] = pod_requests(pod)
        return running

    def _efa_plugin(self, labels: Mapping[str, str], taints: Sequence[Taint], instance_type: str | None) -> _Release | None:
        efa = self.releases.get("aws-efa-k8s-device-plugin")
        if efa is None or untolerated(_tolerations(efa.values), taints):
            return None
        if any(labels.get(k) != v for k, v in str_map(get(efa.values, "nodeSelector")).items()):
            return None
        supported = [str(v) for v in items(get(efa.values, "supportedInstanceLabels", "values"))]
        if supported and instance_type not in supported:
            return None
        return efa

    def efa_plugin_runs(self, labels: Mapping[str, str], taints: Sequence[Taint], instance_type: str | None) -> bool:
        return self._efa_plugin(labels, taints, instance_type) is not None

    @staticmethod
    def _plugin_config(plugin: _Release, labels: Mapping[str, str]) -> dict[str, Any]:
        """The device plugin config a node's label selects (k8s-device-plugin README, config.map)."""
        name = labels.get(DEVICE_PLUGIN_CONFIG_LABEL) or get(plugin.values, "config", "default")
        text = get(plugin.values, "config", "map", str(name))
        loaded = yaml.safe_load(text) if isinstance(text, str) and is_known(text) else None
        return loaded if isinstance(loaded, dict) else {}

    def gpu_slots(self, labels: Mapping[str, str], taints: Sequence[Taint], physical: int, mig_instances: int) -> int | None:
        """`nvidia.com/gpu` a node advertises when the NVIDIA device plugin this stack installs
        runs there: physical GPUs x sharing replicas, or x MIG instances; None when the stack
        installs no plugin (the node's own advertises)."""
        plugin = self.releases.get("nvidia-device-plugin")
        if plugin is None:
            return None
        if untolerated(_tolerations(plugin.values), taints):
            return 0
        config = self._plugin_config(plugin, labels)
        if get(config, "flags", "migStrategy") == "single":
            return physical * mig_instances
        for strategy in ("timeSlicing", "mps"):
            for resource in items(get(config, "sharing", strategy, "resources")):
                if get(resource, "name") == GPU_RESOURCE:
                    return physical * (int_or_none(get(resource, "replicas")) or 1)
        return physical


    def gfd_product(self, labels: Mapping[str, str], product: str) -> str:
        """The product label GPU feature discovery leaves on a node whose product is `product`:
        `-SHARED` appended when the node's sharing config replicates `nvidia.com/gpu` more than
        once and does not rename it (k8s-device-plugin v0.20.0 internal/lm/resource.go
        getProductName, isShared, isRenamed)."""
        plugin = self.releases.get("nvidia-device-plugin")
        base = product.removesuffix(SHARED_SUFFIX)
        if plugin is None or get(plugin.values, "gfd", "enabled") is not True:
            return product
        sharing = mapping(get(self._plugin_config(plugin, labels), "sharing"))
        # MPS wins over time-slicing whenever it is configured (api/config/v1/sharing.go
        # ReplicatedResources).
        replicated = sharing.get("mps") if sharing.get("mps") is not None else sharing.get("timeSlicing")
        # GFD drops every per-resource `rename` and keeps only the default one renameByDefault
        # sets (cmd/gpu-feature-discovery/main.go -> api/config/v1/config.go
        # DisableResourceNamingInConfig, replicas.go disableResoureRenaming).
        renamed = get(replicated, "renameByDefault") is True
        for resource in items(get(replicated, "resources")):
            if get(resource, "name") == GPU_RESOURCE and (int_or_none(get(resource, "replicas")) or 1) > 1 and not renamed:
                return base + SHARED_SUFFIX
        return base


def default_requests(limit_range: Mapping[str, Any]) -> Requests:
    """The requests a LimitRange's Container items give a container that states none (the
    LimitRanger admission plugin, core/v1 LimitRangeItem defaultRequest)."""
    cpu, memory = 0, 0
    for item in items(get(limit_range, "spec", "limits")):
        if get(item, "type") == "Container":
            asked = requests_of({"requests": get(item, "defaultRequest")})
            cpu, memory = cpu or asked.cpu_m, memory or asked.memory_mib
    return Requests(cpu, memory)


def container_requests(container: Mapping[str, Any], defaults: Requests = NOTHING) -> Requests:
    """A container's requests once admitted, per resource: its request, else its limit (the API
    server's defaulting copies limits to unset requests), else the namespace's LimitRange default."""
    stated = mapping(get(container, "resources", "requests"))
    limits = mapping(get(container, "resources", "limits"))
    own = requests_of({"requests": stated})
    capped = requests_of({"requests": limits})
    cpu = own.cpu_m if "cpu" in stated else capped.cpu_m if "cpu" in limits else defaults.cpu_m
    memory = own.memory_mib if "memory" in stated else capped.memory_mib if "memory" in limits else defaults.memory_mib
    return Requests(cpu, memory)


def pod_requests(pod: Mapping[str, Any], defaults: Requests = NOTHING) -> Requests:
    """What the scheduler reserves for a pod (Kubernetes docs "Sidecar containers", resource
    sharing; KEP-753 and k8s.io/component-helpers resource.PodRequests): the containers' sum plus
    every native sidecar (an init container with restartPolicy Always, which keeps running beside
    them), or, if larger, a regular init container plus the sidecars started before it."""
    containers = [container_requests(c, defaults) for c in items(get(pod, "containers"))]
    total = Requests(sum(r.cpu_m for r in containers), sum(r.memory_mib for r in containers))
    sidecars, peak = NOTHING, NOTHING
    for init in items(get(pod, "initContainers")):
        asked = container_requests(init, defaults)
        if get(init, "restartPolicy") == "Always":
            sidecars = sidecars + asked
            peak = Requests(max(peak.cpu_m, sidecars.cpu_m), max(peak.memory_mib, sidecars.memory_mib))
        else:
            during = sidecars + asked
            peak = Requests(max(peak.cpu_m, during.cpu_m), max(peak.memory_mib, during.memory_mib))
    running = total + sidecars
    return Requests(max(running.cpu_m, peak.cpu_m), max(running.memory_mib, peak.memory_mib))


def _tolerations(values: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in items(get(values, "tolerations")) if isinstance(t, Mapping)]

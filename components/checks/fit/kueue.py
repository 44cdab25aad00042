"""Kueue as the fit proof reads it: queues, flavors, quota and admission checks from the declared objects."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import yaml

from components.checks.declared import KUEUE_TYPE_PREFIX, Resource, get, items, mapping
from components.checks.fit.cluster import Cluster
from components.checks.fit.shapes import PodShape, int_or_none, is_known, str_map
from components.kubernetes.queues import PROVISIONING_REQUEST_CONTROLLER, QUEUE_NAME_LABEL
from components.pools import GPU_RESOURCE

# Kueue 0.19 Configuration resources.quotaCheckStrategy: account only covered resources.
IGNORE_UNDECLARED = "IgnoreUndeclared"


class Kueue:
    """The queues, flavors and quotas as declared, read the way Kueue's scheduler reads them."""

    def __init__(self, resources: Sequence[Resource], cluster: Cluster) -> None:
        def objects(kind: str) -> list[Resource]:
            return [r for r in resources if r.type == f"{KUEUE_TYPE_PREFIX}{kind}"]

        self.flavors = {str(get(r.props, "metadata", "name")): mapping(get(r.props, "spec")) for r in objects("ResourceFlavor")}
        self.cluster_queues = {str(get(r.props, "metadata", "name")): r for r in objects("ClusterQueue")}
        self.cohorts = {str(get(r.props, "metadata", "name")): mapping(get(r.props, "spec")) for r in objects("Cohort")}
        self.local_queues = {
            (str(get(r.props, "metadata", "namespace")), str(get(r.props, "metadata", "name"))): str(get(r.props, "spec", "clusterQueue"))
            for r in objects("LocalQueue")
        }
        self.admission_checks = {str(get(r.props, "metadata", "name")): mapping(get(r.props, "spec")) for r in objects("AdmissionCheck")}
        self.provisioning_configs = {
            str(get(r.props, "metadata", "name")): mapping(get(r.props, "spec")) for r in objects("ProvisioningRequestConfig")
        }
        kueue = cluster.releases.get("kueue")
        configuration = get(kueue.values, "managerConfig", "controllerManagerConfigYaml") if kueue else None
        loaded = yaml.safe_load(configuration) if isinstance(configuration, str) and is_known(configuration) else None
        self.strategy = get(loaded, "resources", "quotaCheckStrategy") if isinstance(loaded, dict) else None

    @staticmethod
    def _quota(spec: Mapping[str, Any], flavor: str, resource: str, key: str) -> int | None:
        for group in items(get(spec, "resourceGroups")):
            for entry in items(get(group, "flavors")):
                if get(entry, "name") != flavor:
                    continue
                for quota in items(get(entry, "resources")):
                    if get(quota, "name") == resource:
                        return int_or_none(get(quota, key))
        return None

    def available(self, cluster_queue: str, flavor: str, resource: str) -> tuple[int, int]:
        """(nominal, borrowable): the queue's own quota, and what the rest of its cohort lends it
        (every lendable quota of the cohort's queues and the cohort's own), up to its borrowingLimit."""
        spec = mapping(get(self.cluster_queues[cluster_queue].props, "spec"))
        nominal = self._quota(spec, flavor, resource, "nominalQuota") or 0
        cohort = get(spec, "cohortName")
        if not isinstance(cohort, str):
            return nominal, 0
        lent = 0
        for name, other in self.cluster_queues.items():
            other_spec = mapping(get(other.props, "spec"))
            if name == cluster_queue or get(other_spec, "cohortName") != cohort:
                continue
            lending = self._quota(other_spec, flavor, resource, "lendingLimit")
            lent += lending if lending is not None else self._quota(other_spec, flavor, resource, "nominalQuota") or 0
        lent += self._quota(self.cohorts.get(cohort, {}), flavor, resource, "nominalQuota") or 0
        limit = self._quota(spec, flavor, resource, "borrowingLimit")
        return nominal, lent if limit is None else min(lent, limit)

    def flavor_total(self, flavor: str, resource: str) -> int:
        """Everything Kueue may admit on `flavor`: the nominal quotas of every queue and cohort."""
        specs = [mapping(get(q.props, "spec")) for q in self.cluster_queues.values()] + list(self.cohorts.values())
        return sum(self._quota(spec, flavor, resource, "nominalQuota") or 0 for spec in specs)

    def provisioning_classes(self, cluster_queue: str, flavor: str) -> set[str]:
        """The ProvisioningRequest classes Kueue asks for before admitting on `flavor` through
        `cluster_queue`: its admission checks for that flavor (an empty onFlavors means every
        flavor; Kueue v1beta2 admissionChecksStrategy), run by the provisioning-request controller."""
        queue = self.cluster_queues.get(cluster_queue)
        rules = items(get(queue.props if queue else {}, "spec", "admissionChecksStrategy", "admissionChecks"))
        classes: set[str] = set()
        for rule in rules:
            on = [str(f) for f in items(get(rule, "onFlavors"))]
            check = self.admission_checks.get(str(get(rule, "name")), {})
            if (on and flavor not in on) or get(check, "controllerName") != PROVISIONING_REQUEST_CONTROLLER:
                continue
            if get(check, "parameters", "kind") == "ProvisioningRequestConfig":
                config = self.provisioning_configs.get(str(get(check, "parameters", "name")), {})
                classes.add(str(get(config, "provisioningClassName")))
        return classes

    def admit(self, pod: PodShape, totals: Mapping[str, int]) -> tuple[list[str], str | None, str | None]:
        """(problems, the flavor Kueue admits the job on, the ClusterQueue's key)."""
        cluster_queue = self.local_queues.get((pod.namespace, pod.queue))
        if cluster_queue is None:
            return [f"no LocalQueue {pod.queue} in namespace {pod.namespace} (label {QUEUE_NAME_LABEL})"], None, None
        queue = self.cluster_queues.get(cluster_queue)
        if queue is None:
            return [f"LocalQueue {pod.namespace}/{pod.queue} points at ClusterQueue {cluster_queue}, which is not declared"], None, None
        groups = items(get(queue.props, "spec", "resourceGroups"))
        covered = {str(r) for g in groups for r in items(get(g, "coveredResources"))}
        accounted = [r for r in totals if r in covered] if self.strategy == IGNORE_UNDECLARED else list(totals)
        problems = [f"ClusterQueue {cluster_queue} does not cover {r}, which the job requests" for r in accounted if r not in covered]
        gpu_group = next((g for g in groups if GPU_RESOURCE in items(get(g, "coveredResources"))), None)
        if problems or gpu_group is None:
            return problems or [f"ClusterQueue {cluster_queue} does not cover {GPU_RESOURCE}"], None, queue.key
        flavor_names = [str(get(f, "name")) for f in items(get(gpu_group, "flavors"))]
        keys = {k for name in flavor_names for k in str_map(get(self.flavors.get(name, {}), "nodeLabels"))}
        selector = {k: v for k, v in pod.node_selector.items() if k in keys}
        matching = [n for n in flavor_names if all(str_map(get(self.flavors.get(n, {}), "nodeLabels")).get(k) == v for k, v in selector.items())]
        if not matching:
            return [f"no flavor of ClusterQueue {cluster_queue} has the node labels {selector or pod.node_selector} the pods select"], None, queue.key
        group_resources = [r for r in accounted if r in items(get(gpu_group, "coveredResources"))]
        shortfalls: list[str] = []
        for name in matching:
            short = []
            for resource in group_resources:
                nominal, borrowable = self.available(cluster_queue, name, resource)
                if totals[resource] > nominal + borrowable:
                    short.append(
                        f"ClusterQueue {cluster_queue} holds {nominal} {resource} on flavor {name} and may borrow "
                        f"{borrowable}, the job requests {totals[resource]}"
                    )
            if not short:
                if name not in self.flavors:
                    return [f"ClusterQueue {cluster_queue} admits on flavor {name}, which is not a declared ResourceFlavor"], None, queue.key
                return [], name, queue.key
            shortfalls += short
        return shortfalls, None, queue.key

"""The fleet manager as Pulumi resources: Kueue with MultiKueue on an existing cluster, and the
objects that dispatch every team's jobs to the workers (components.fleet.plan).

The workers are read through StackReferences. Their `fleetQueues` decide which teams, flavors and
quotas exist, so the team objects are declared once those outputs resolve; stack references are
read in previews too, so `pulumi preview` shows them. The kubeconfig of each worker goes from its
stack's secret output straight into the Secret its MultiKueueCluster names, and stays secret.

JobSet's chart runs on the manager as on the workers: JobSet reconciles only JobSets whose
`spec.managedBy` is its own (JobSet >= 0.6; the MultiKueue JobSet page of Kueue v0.19.2 asks for
it), Kueue's webhook sets `kueue.x-k8s.io/multikueue` there, and JobSet's own webhook defaults and
validates the manager's copy, which is the object MultiKueue sends (docs/fleet.md).
"""

from __future__ import annotations

from typing import Any, Mapping

import pulumi
import pulumi_kubernetes as k8s

from components.facts import charts, multikueue
from components.fleet import order, plan
from components.fleet.worker import KUBECONFIG_OUTPUT, QUEUES_OUTPUT
from components.kubernetes import webhook_gate
from components.kubernetes.layer import helm_release
from components.kubernetes.queues import KUEUE_API
from components.kubernetes.releases import jobset_values, manager_kueue_values
from components.spec.fleet import FleetStackSpec
from components.tenancy import TEAM_LABEL

KUEUE_NAMESPACE = charts.KUEUE.namespace


class _PriorityClass(pulumi.CustomResource):
    """Kueue's WorkloadPriorityClass (top-level `value`), as in components.kubernetes.layer."""

    def __init__(self, name: str, tier: Mapping[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(
            f"kubernetes:{KUEUE_API}:WorkloadPriorityClass",
            name,
            {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": tier["name"]},
             "value": tier["value"], "description": tier.get("description", "")},
            opts,
        )


class FleetManager(pulumi.ComponentResource):
    def __init__(self, name: str, spec: FleetStackSpec, provider: k8s.Provider) -> None:
        super().__init__("gpu-platform:fleet:FleetManager", name)
        self._name = name
        self._opts = pulumi.ResourceOptions(parent=self, provider=provider)
        workers = list(spec.fleet.workers)
        references = {
            w: pulumi.StackReference(f"{name}-{plan.cluster_name(w)}", stack_name=w, opts=pulumi.ResourceOptions(parent=self))
            for w in workers
        }
        descriptions: pulumi.Output[dict[str, Any]] = pulumi.Output.all(
            *[references[w].require_output(QUEUES_OUTPUT) for w in workers]
        ).apply(lambda found: dict(zip(workers, found)))

        namespaces = [
            self._namespace(charts.KUEUE.namespace),
            self._namespace(charts.JOBSET.namespace),
        ]
        jobset = self._release(charts.JOBSET, jobset_values(), namespaces[1])
        kueue = self._release(
            charts.KUEUE,
            descriptions.apply(
                lambda ds: manager_kueue_values(
                    [t.namespace for t in plan.teams(spec, ds)], multikueue.INCREMENTAL_DISPATCHER,
                    multikueue.INCREMENTAL_STEP_SIZE,
                )
            ),
            namespaces[0],
            [jobset],
        )
        # Kueue objects wait on the workers' webhook gate, not on the release alone (the webhook
        # refuses connections for a while after its Deployment is available).
        kueue_ready = self._webhook_gate(kueue)
        clusters: list[pulumi.Resource] = []
        for worker in workers:
            secret = k8s.core.v1.Secret(
                f"{name}-{plan.secret_name(worker)}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=plan.secret_name(worker), namespace=KUEUE_NAMESPACE),
                string_data={multikueue.KUBECONFIG_KEY: references[worker].require_output(KUBECONFIG_OUTPUT)},
                opts=self._child([namespaces[0]]),
            )
            clusters.append(
                self._object(f"{name}-{plan.cluster_name(worker)}", "MultiKueueCluster", plan.cluster_name(worker),
                             plan.multikueue_cluster_spec(worker), [kueue_ready, secret])
            )
        self.order: pulumi.Output[list[str]] = descriptions.apply(lambda ds: order.dispatch_order(spec.fleet.order, ds))
        config = self._object(
            f"{name}-{plan.CONFIG_NAME}", "MultiKueueConfig", plan.CONFIG_NAME,
            self.order.apply(plan.multikueue_config_spec), clusters,
        )
        check = self._object(f"{name}-{plan.ADMISSION_CHECK}", "AdmissionCheck", plan.ADMISSION_CHECK,
                             plan.admission_check_spec(), [config])
        descriptions.apply(lambda ds: self._queues(spec, ds, check, kueue_ready))
        self.per_model: pulumi.Output[dict[str, list[str]]] = descriptions.apply(order.per_model)
        self.register_outputs({"dispatchOrder": self.order})

    def _child(self, depends_on: list[pulumi.Resource]) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions.merge(self._opts, pulumi.ResourceOptions(depends_on=depends_on))

    def _webhook_gate(self, kueue: k8s.helm.v3.Release) -> k8s.batch.v1.Job:
        """The gate a worker's layer declares (components.kubernetes.webhook_gate): the provider
        waits for it to complete, so what depends on it waits for Kueue's webhook."""
        return webhook_gate.gate_job(f"{self._name}-{webhook_gate.GATE_NAME}", KUEUE_NAMESPACE, self._child([kueue]))

    def _namespace(self, name: str, labels: Mapping[str, str] | None = None) -> k8s.core.v1.Namespace:
        return k8s.core.v1.Namespace(
            f"{self._name}-{name}", metadata=k8s.meta.v1.ObjectMetaArgs(name=name, labels=dict(labels or {})), opts=self._opts
        )

    def _release(
        self, chart: charts.Chart, values: pulumi.Input[Mapping[str, Any]], namespace: pulumi.Resource,
        depends_on: list[pulumi.Resource] | None = None,
    ) -> k8s.helm.v3.Release:
        return helm_release(f"{self._name}-{chart.name}", chart, values, self._child([namespace, *(depends_on or [])]))

    def _object(
        self, resource_name: str, kind: str, name: str, spec: pulumi.Input[Mapping[str, Any]],
        depends_on: list[pulumi.Resource], namespace: str | None = None,
    ) -> k8s.apiextensions.CustomResource:
        return k8s.apiextensions.CustomResource(
            resource_name,
            api_version=KUEUE_API,
            kind=kind,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=namespace),
            spec=spec,
            opts=self._child(depends_on),
        )

    def _queues(
        self, spec: FleetStackSpec, descriptions: Mapping[str, plan.Description], check: pulumi.Resource,
        kueue_ready: pulumi.Resource,
    ) -> None:
        """Flavors, cohort, tiers, and per team its namespace, ClusterQueue and LocalQueues."""
        name = self._name
        models = plan.gpu_models(descriptions)
        holders: list[pulumi.Resource] = [
            self._object(f"{name}-{plan.flavor_name(m)}", "ResourceFlavor", plan.flavor_name(m), plan.flavor_spec(m), [kueue_ready])
            for m in models
        ]
        holders.append(self._object(f"{name}-cohort", "Cohort", plan.COHORT, plan.cohort_spec(descriptions), [kueue_ready]))
        try:
            tiers = plan.priority_tiers(descriptions)
        except plan.FleetConflict as exc:
            raise pulumi.RunError(f"platform.fleet.workers: {exc}") from None
        for tier in tiers:
            _PriorityClass(f"{name}-{tier['name']}", tier, self._child([kueue_ready]))
        for team in plan.teams(spec, descriptions):
            namespace = self._namespace(team.namespace, {TEAM_LABEL: team.team})
            queue = self._object(f"{name}-{team.team}", "ClusterQueue", team.cluster_queue,
                                 plan.cluster_queue_spec(team, models), [*holders, check])
            for local in team.local_queues:
                self._object(f"{name}-{team.team}-{local}", "LocalQueue", local, {"clusterQueue": team.cluster_queue},
                             [queue, namespace], namespace=team.namespace)

"""The GPU layer as Pulumi resources: a thin mapping of the pure plans onto one cluster.

It takes a Kubernetes provider and the pools, so it runs the same on a cluster the AWS or GCP
wing just built and on an existing one; which cloud it is on never enters into it.
"""

from __future__ import annotations

from typing import Any, Mapping, cast

import pulumi
import pulumi_kubernetes as k8s

from components import tenancy
from components.facts import charts
from components.kubernetes import egress, gpudirect_admission, pod_security, webhook_gate
from components.kubernetes.data_volume import DataVolume, volume_name
from components.kubernetes.device_plugin import device_plugin_labels
from components.kubernetes.queues import (
    KUEUE_API,
    QUEUED_PROVISIONING,
    QueuePlan,
    TeamQueue,
    admission_check_spec,
    cluster_queue_spec,
    cohort_spec,
    flavor_spec,
    local_queue_names,
    local_queue_spec,
    provisioning_request_config_spec,
    queue_plan,
)
from components.kubernetes.releases import dcgm_exporter_values, device_plugin_values, jobset_values, kueue_values
from components.kubernetes.tiers import priority_tiers
from components.kubernetes.topology import TOPOLOGY_NAME, flavor_topology, needs_topology, topology_spec
from components.observability import stack as observability
from components.observability.objects import RemoteWrite
from components.naming import DATA_CLAIM, TRAINER_SERVICE_ACCOUNT
from components.node_resources import installs_device_plugin
from components.pools import GPU_RESOURCE, Pool
from components.spec import PlatformSpec, PriorityTierSpec, TeamSpec
from components.tenancy import TEAM_LABEL

# Pod Security Admission: the device plugin, GPU feature discovery and the DCGM exporter need
# host access, which the baseline and restricted levels refuse.
_PRIVILEGED = {"pod-security.kubernetes.io/enforce": "privileged"}
# What a container requests when it says nothing, so the scheduler can place it sensibly.
DEFAULT_CONTAINER_REQUESTS = {"cpu": "500m", "memory": "1Gi"}


def helm_release(
    resource_name: str, chart: charts.Chart, values: pulumi.Input[Mapping[str, Any]], opts: pulumi.ResourceOptions
) -> k8s.helm.v3.Release:
    """A pinned chart (components.facts.charts) released under its own name into its namespace,
    which the caller creates first (and names in `opts`): one shape for the layer and the fleet
    manager."""
    return k8s.helm.v3.Release(
        resource_name,
        name=chart.name,
        chart=chart.reference,
        version=chart.version,
        repository_opts=None if chart.is_oci else k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
        namespace=chart.namespace,
        create_namespace=False,
        values=values,
        opts=opts,
    )


def _in_namespace(name: str, namespace: str) -> k8s.meta.v1.ObjectMetaArgs:
    return k8s.meta.v1.ObjectMetaArgs(name=name, namespace=namespace)


def _subject_args(subject: tenancy.Subject) -> k8s.rbac.v1.SubjectArgs:
    return k8s.rbac.v1.SubjectArgs(api_group="rbac.authorization.k8s.io", kind=subject.kind, name=subject.name)


class WorkloadPriorityClass(pulumi.CustomResource):
    """Kueue's WorkloadPriorityClass.

    Its `value` and `description` sit at the top level, beside metadata, which
    `apiextensions.CustomResource` (metadata and spec only) cannot express.
    """

    def __init__(self, resource_name: str, tier: PriorityTierSpec, opts: pulumi.ResourceOptions) -> None:
        super().__init__(
            f"kubernetes:{KUEUE_API}:WorkloadPriorityClass",
            resource_name,
            {
                "apiVersion": KUEUE_API,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": tier.name},
                "value": tier.value,
                "description": tier.description,
            },
            opts,
        )


class GpuLayer(pulumi.ComponentResource):
    """Device plugin, priority tiers, Kueue and JobSet, DCGM exporter and team namespaces."""

    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        pools: list[Pool],
        provider: k8s.Provider,
        trainer_annotations: Mapping[str, Mapping[str, pulumi.Input[str]]] | None = None,
        dcgm_exporter: bool = True,
        data_volume: DataVolume | None = None,
        remote_write: RemoteWrite | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`trainer_annotations`, per team namespace, bind the team's `trainer` account to the
        team's own cloud identity (IRSA role, GKE Workload Identity). `dcgm_exporter` is False where the
        platform collects DCGM metrics itself (GKE): two collectors on one GPU conflict.
        `data_volume`: the wing's shared file system, bound to each team's `training-data` claim;
        None where jobs mount something else (GKE: the bucket) or the operator provides the claim.
        `remote_write`: the managed workspace the chart's Prometheus also writes to (AMP)."""
        super().__init__("gpu-platform:kubernetes:GpuLayer", name, None, opts)
        self._name = name
        self._trainer_annotations = {ns: dict(a) for ns, a in (trainer_annotations or {}).items()}
        self._spec = spec
        self._pod_security = pod_security.team_level(spec, pools)
        self._data_volume = data_volume
        self._opts = pulumi.ResourceOptions(parent=self, provider=provider)
        self._admission = self._gpudirect_admission(spec) if self._pod_security.admission_policy else []
        tiers = priority_tiers(spec)
        plan = queue_plan(spec, pools)

        for tier in tiers:
            self._priority_class(tier)
        if installs_device_plugin(spec):
            self._release(charts.NVIDIA_DEVICE_PLUGIN, device_plugin_values(pools), _PRIVILEGED)
        jobset = self._release(charts.JOBSET, jobset_values())
        # Kueue starts its JobSet integration only where the JobSet CRDs exist.
        kueue = self._release(charts.KUEUE, kueue_values(spec), depends_on=[jobset])
        # Kueue's webhook validates its custom resources: they wait until it answers. Team
        # namespaces wait too, so on destroy they (and the workloads whose finalizers Kueue
        # removes) go before Kueue does.
        self._kueue = self._webhook_gate(kueue)
        for tier in tiers:
            WorkloadPriorityClass(f"{name}-{tier.name}", tier, self._child([self._kueue]))
        self._queues(plan, pools, spec.scheduling.teams)
        self._admins()
        if spec.monitoring.dcgm and dcgm_exporter:
            self._release(charts.DCGM_EXPORTER, dcgm_exporter_values(spec, pools), _PRIVILEGED)
        # Metrics store, scrape objects and rules (docs/observability.md).
        observability.declare(name, spec, pools, tiers, self._opts, after=[self._kueue], remote_write=remote_write)

        self.device_plugin_labels = device_plugin_labels(spec, pools)
        self.queues = {
            team.team: {
                "namespace": team.namespace,
                "localQueue": team.local_queue,
                "clusterQueue": team.cluster_queue,
                "gpuQuota": team.nominal,
            }
            for team in plan.teams
        }
        self.priority_classes = [tier.name for tier in tiers]
        self.register_outputs(self.exports)

    @property
    def exports(self) -> dict[str, Any]:
        """What job authors need: the queue of each team, the tiers and the pool labels."""
        return {
            "devicePluginLabels": self.device_plugin_labels,
            "queues": self.queues,
            "priorityClasses": self.priority_classes,
        }

    def _child(self, depends_on: list[pulumi.Resource] | None = None) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions.merge(self._opts, pulumi.ResourceOptions(depends_on=depends_on or []))

    def _gpudirect_admission(self, spec: PlatformSpec) -> list[pulumi.Resource]:
        """The policy holding team pods to restricted, the GPUDirect daemon excepted, the one
        refusing exec into that daemon, and their bindings to the team namespaces
        (components.kubernetes.gpudirect_admission)."""
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{self._name}-{gpudirect_admission.POLICY_NAME}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=gpudirect_admission.POLICY_NAME),
            spec=cast(Any, gpudirect_admission.policy_spec(spec)),
            opts=self._opts,
        )
        binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{self._name}-{gpudirect_admission.BINDING_NAME}-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=gpudirect_admission.BINDING_NAME),
            spec=cast(Any, gpudirect_admission.binding_spec()),
            opts=self._child([policy]),
        )
        resources: list[pulumi.Resource] = [policy, binding]
        if gpudirect_admission.daemons(spec):
            exec_policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
                f"{self._name}-{gpudirect_admission.EXEC_POLICY_NAME}",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=gpudirect_admission.EXEC_POLICY_NAME),
                spec=cast(Any, gpudirect_admission.exec_policy_spec(spec)),
                opts=self._opts,
            )
            resources += [exec_policy, k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
                f"{self._name}-{gpudirect_admission.EXEC_POLICY_NAME}-binding",
                metadata=k8s.meta.v1.ObjectMetaArgs(name=gpudirect_admission.EXEC_POLICY_NAME),
                spec=cast(Any, gpudirect_admission.exec_binding_spec()),
                opts=self._child([exec_policy]),
            )]
        return resources

    def _priority_class(self, tier: PriorityTierSpec) -> None:
        k8s.scheduling.v1.PriorityClass(
            f"{self._name}-{tier.name}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=tier.name),
            value=tier.value,
            preemption_policy=tier.preemption_policy,
            global_default=tier.global_default,
            description=tier.description,
            # Value and preemption policy are immutable in the API: changing them means a new
            # class of the same name, so the old one goes first.
            opts=pulumi.ResourceOptions.merge(
                self._opts,
                pulumi.ResourceOptions(replace_on_changes=["value", "preemptionPolicy"], delete_before_replace=True),
            ),
        )

    def _namespace(self, resource_name: str, name: str, labels: Mapping[str, str]) -> k8s.core.v1.Namespace:
        return k8s.core.v1.Namespace(
            resource_name,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, labels=dict(labels)),
            opts=self._opts,
        )

    def _release(
        self,
        chart: charts.Chart,
        values: Mapping[str, Any],
        namespace_labels: Mapping[str, str] | None = None,
        depends_on: list[pulumi.Resource] | None = None,
    ) -> k8s.helm.v3.Release:
        namespace = self._namespace(f"{self._name}-{chart.namespace}", chart.namespace, namespace_labels or {})
        return helm_release(f"{self._name}-{chart.name}", chart, dict(values), self._child([namespace, *(depends_on or [])]))

    def _custom_resource(
        self,
        resource_name: str,
        kind: str,
        name: str,
        spec: Mapping[str, Any],
        namespace: str | None = None,
        depends_on: list[pulumi.Resource] | None = None,
    ) -> k8s.apiextensions.CustomResource:
        return k8s.apiextensions.CustomResource(
            resource_name,
            api_version=KUEUE_API,
            kind=kind,
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=namespace),
            spec=dict(spec),
            opts=self._child([self._kueue, *(depends_on or [])]),
        )

    def _webhook_gate(self, kueue: k8s.helm.v3.Release) -> k8s.batch.v1.Job:
        return webhook_gate.gate_job(f"{self._name}-{webhook_gate.GATE_NAME}", charts.KUEUE.namespace, self._child([kueue]))

    def _admins(self) -> None:
        """cluster-admin for `platform.admins`, on clusters where RBAC names them (GKE, existing);
        EKS admins get it through their access entries."""
        subjects = tenancy.cluster_admin_subjects(self._spec)
        if not subjects:
            return
        k8s.rbac.v1.ClusterRoleBinding(
            f"{self._name}-{tenancy.ADMINS_BINDING}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=tenancy.ADMINS_BINDING),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=tenancy.CLUSTER_ADMIN_ROLE
            ),
            subjects=[_subject_args(subject) for subject in subjects],
            opts=self._opts,
        )

    def _queues(self, plan: QueuePlan, pools: list[Pool], teams: list[TeamSpec]) -> None:
        # ClusterQueues name their flavors and cohort; depending on them also deletes the
        # queues first, before Kueue's finalizers would hold the flavors.
        # Multi-node fabric pools place by the nodes' topology (components.kubernetes.topology).
        topology = topology_spec(self._spec) if needs_topology(self._spec, pools) else None
        placement: list[pulumi.Resource] = [self._custom_resource(f"{self._name}-{TOPOLOGY_NAME}", "Topology", TOPOLOGY_NAME, topology)] if topology else []
        quota_holders: list[pulumi.Resource] = [
            self._custom_resource(f"{self._name}-{plan.flavors[pool.name]}", "ResourceFlavor", plan.flavors[pool.name],
                                  {**flavor_spec(pool), **flavor_topology(self._spec, pool)}, depends_on=placement)
            for pool in pools
        ]
        quota_holders.append(
            self._custom_resource(f"{self._name}-cohort", "Cohort", plan.cohort, cohort_spec(plan, pools))
        )
        if plan.queued_flavors:
            config = self._custom_resource(
                f"{self._name}-{QUEUED_PROVISIONING}-config",
                "ProvisioningRequestConfig",
                QUEUED_PROVISIONING,
                provisioning_request_config_spec(),
            )
            quota_holders.append(
                self._custom_resource(
                    f"{self._name}-{QUEUED_PROVISIONING}",
                    "AdmissionCheck",
                    QUEUED_PROVISIONING,
                    admission_check_spec(),
                    depends_on=[config],
                )
            )
        for team in plan.teams:
            cluster_queue = self._custom_resource(
                f"{self._name}-{team.team}",
                "ClusterQueue",
                team.cluster_queue,
                cluster_queue_spec(team, plan, pools),
                depends_on=quota_holders,
            )
            members = next((t for t in teams if t.name == team.team), None)
            self._team(team, plan, cluster_queue, members)

    def _team(self, team: TeamQueue, plan: QueuePlan, cluster_queue: pulumi.Resource, spec: TeamSpec | None) -> None:
        """A team's namespace, with its queues, GPU ceiling, default requests, trainer account and
        its members' Role."""
        in_namespace: list[pulumi.Resource] = []
        if team.owns_namespace:
            security = self._pod_security
            in_namespace.append(
                k8s.core.v1.Namespace(
                    f"{self._name}-{team.team}",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=team.namespace,
                        labels={TEAM_LABEL: team.team, **security.labels()},
                        annotations={pod_security.REASON_ANNOTATION: security.reason},
                    ),
                    # A namespace that PSA leaves at privileged exists only once the policy binds it.
                    opts=self._child([self._kueue, *self._admission]),
                )
            )
            k8s.core.v1.ResourceQuota(
                f"{self._name}-{team.team}-gpus",
                metadata=_in_namespace("gpus", team.namespace),
                spec=k8s.core.v1.ResourceQuotaSpecArgs(hard={f"requests.{GPU_RESOURCE}": str(plan.team_gpu_ceiling)}),
                opts=self._child(in_namespace),
            )
            k8s.core.v1.LimitRange(
                f"{self._name}-{team.team}-defaults",
                metadata=_in_namespace("defaults", team.namespace),
                spec=k8s.core.v1.LimitRangeSpecArgs(
                    limits=[k8s.core.v1.LimitRangeItemArgs(type="Container", default_request=DEFAULT_CONTAINER_REQUESTS)]
                ),
                opts=self._child(in_namespace),
            )
        k8s.core.v1.ServiceAccount(
            f"{self._name}-{team.team}-{TRAINER_SERVICE_ACCOUNT}",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=TRAINER_SERVICE_ACCOUNT,
                namespace=team.namespace,
                annotations=self._trainer_annotations.get(team.namespace, {}),
            ),
            opts=self._child(in_namespace),
        )
        if self._data_volume is not None:
            self._data_claim(team, self._data_volume, in_namespace)
        for queue in local_queue_names(team):
            self._custom_resource(
                f"{self._name}-{team.team}" if queue == team.local_queue else f"{self._name}-{team.team}-{queue}",
                "LocalQueue",
                queue,
                local_queue_spec(team),
                namespace=team.namespace,
                depends_on=[cluster_queue, *in_namespace],
            )
        if spec is not None:
            self._team_rbac(team, spec, in_namespace)

    def _team_rbac(self, team: TeamQueue, spec: TeamSpec, in_namespace: list[pulumi.Resource]) -> None:
        """The members' Role in the team's namespace, and its binding: nothing cluster-wide."""
        role = k8s.rbac.v1.Role(
            f"{self._name}-{team.team}-{tenancy.TEAM_ROLE}",
            metadata=_in_namespace(tenancy.TEAM_ROLE, team.namespace),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(api_groups=rule["apiGroups"], resources=rule["resources"], verbs=rule["verbs"])
                for rule in tenancy.TEAM_RULES
            ],
            opts=self._child(in_namespace),
        )
        subjects = tenancy.team_subjects(self._spec, spec)
        if not subjects:
            return
        k8s.rbac.v1.RoleBinding(
            f"{self._name}-{team.team}-{tenancy.TEAM_ROLE_BINDING}",
            metadata=_in_namespace(tenancy.TEAM_ROLE_BINDING, team.namespace),
            role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name=tenancy.TEAM_ROLE),
            subjects=[_subject_args(subject) for subject in subjects],
            opts=self._child([role, *in_namespace]),
        )

    def _data_claim(self, team: TeamQueue, volume: DataVolume, in_namespace: list[pulumi.Resource]) -> None:
        """A pre-bound volume and claim: the claim names the volume and the volume reserves itself
        for the claim, so no other claim can take it and no provisioner is asked
        (storageClassName "" on both)."""
        name = volume_name(team.namespace)
        persistent_volume = k8s.core.v1.PersistentVolume(
            f"{self._name}-{team.team}-data",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, labels={TEAM_LABEL: team.team}),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                access_modes=["ReadWriteMany"],
                capacity={"storage": volume.capacity},
                # Deleting the claim or the stack's Kubernetes objects leaves the data alone.
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                mount_options=list(volume.options(team.namespace)) or None,
                csi=k8s.core.v1.CSIPersistentVolumeSourceArgs(
                    driver=volume.driver,
                    volume_handle=volume.handles[team.namespace],
                    # None where the driver needs none (EFS): the volume source is immutable, so
                    # an attribute added to a deployed PV fails the update (docs/aws.md).
                    volume_attributes=dict(volume.volume_attributes) or None,
                ),
                claim_ref=k8s.core.v1.ObjectReferenceArgs(namespace=team.namespace, name=DATA_CLAIM),
            ),
            opts=self._child(list(volume.depends_on)),
        )
        k8s.core.v1.PersistentVolumeClaim(
            f"{self._name}-{team.team}-data",
            metadata=_in_namespace(DATA_CLAIM, team.namespace),
            spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
                access_modes=["ReadWriteMany"],
                resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": volume.capacity}),
                storage_class_name="",
                volume_name=name,
            ),
            opts=self._child([persistent_volume, *in_namespace]),
        )
        if volume.denied_egress_tcp_ports:
            self._egress_policy(team, volume.denied_egress_tcp_ports, in_namespace)

    def _egress_policy(self, team: TeamQueue, closed: tuple[int, ...], in_namespace: list[pulumi.Resource]) -> None:
        """Every pod of the namespace may send anything but TCP to `closed` (components.kubernetes.egress)."""
        spec = egress.egress_without_tcp_ports(closed)
        k8s.networking.v1.NetworkPolicy(
            f"{self._name}-{team.team}-{egress.NAME}",
            metadata=_in_namespace(egress.NAME, team.namespace),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(),
                policy_types=spec["policyTypes"],
                egress=[
                    k8s.networking.v1.NetworkPolicyEgressRuleArgs(
                        ports=[
                            k8s.networking.v1.NetworkPolicyPortArgs(
                                protocol=port["protocol"], port=port.get("port"), end_port=port.get("endPort")
                            )
                            for port in rule["ports"]
                        ]
                    )
                    for rule in spec["egress"]
                ],
            ),
            opts=self._child(in_namespace),
        )

"""The GPU layer as synthesized on the onprem stack (and variants): what a real `pulumi up` would send."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from k8s_support import chart_defaults, chart_keys, crd_schema, onprem_platform, synthesize

from components.facts import charts
from components.kubernetes.tiers import DEFAULT_TIERS
from infra.synth import Synthesis

RELEASE = "kubernetes:helm.sh/v3:Release"
KUEUE_TYPE = "kubernetes:kueue.x-k8s.io/v1beta2:"
LAYER = "gpu-platform:kubernetes:GpuLayer::lab-gpu"


def objects_of(synthesis: Synthesis, kind: str) -> list[dict[str, Any]]:
    return [obj for obj in synthesis.kubernetes_objects() if obj["kind"] == kind]


def release(synthesis: Synthesis, chart: charts.Chart) -> dict[str, Any]:
    [found] = [r["inputs"] for r in synthesis.by_type(RELEASE) if r["inputs"]["name"] == chart.name]
    return found


def layer_resources(synthesis: Synthesis) -> list[dict[str, Any]]:
    return [r for r in synthesis.resources if r["parent"] == LAYER]


@pytest.fixture(scope="module")
def managed() -> Synthesis:
    """onprem, but the cluster brings its own device plugin and has the Prometheus Operator."""
    platform = onprem_platform()
    platform["devicePlugin"] = "managed"
    platform["monitoring"] = {"serviceMonitor": True}
    return synthesize(platform)


@pytest.fixture(scope="module")
def no_teams() -> Synthesis:
    platform = onprem_platform()
    platform["scheduling"] = {}
    platform["monitoring"] = {"dcgm": False}
    return synthesize(platform)


# --- every object is one the API server and the CRDs accept --------------------------------


def test_built_in_objects_validate_against_kubernetes_1_33_strictly(onprem: Synthesis) -> None:
    core = [obj for obj in onprem.kubernetes_objects() if crd_schema(obj["apiVersion"], obj["kind"]) is None]
    assert {obj["kind"] for obj in core} == {
        "Namespace",
        "PriorityClass",
        "ResourceQuota",
        "LimitRange",
        "ServiceAccount",
        "Job",
        "Role",
        "RoleBinding",
        "ConfigMap",
    }
    for obj in core:
        kubernetes_validate.validate(obj, "1.33", strict=True)


def test_custom_resources_validate_against_the_upstream_crds_with_unknown_fields_as_errors(onprem: Synthesis) -> None:
    custom = [obj for obj in onprem.kubernetes_objects() if crd_schema(obj["apiVersion"], obj["kind"]) is not None]
    assert {obj["kind"] for obj in custom} == {
        "ResourceFlavor",
        "Cohort",
        "ClusterQueue",
        "LocalQueue",
        "WorkloadPriorityClass",
        "ServiceMonitor",
        "PodMonitor",
        "PrometheusRule",
    }
    for obj in custom:
        jsonschema.validate(obj, crd_schema(obj["apiVersion"], obj["kind"]))


def test_the_crd_check_rejects_a_misspelt_field(onprem: Synthesis) -> None:
    [queue] = [q for q in objects_of(onprem, "ClusterQueue") if q["metadata"]["name"] == "research"]
    misspelt = {**queue, "spec": {**queue["spec"], "cohort": "lab"}}
    with pytest.raises(jsonschema.ValidationError, match="'cohort' was unexpected"):
        jsonschema.validate(misspelt, crd_schema(queue["apiVersion"], queue["kind"]))


@pytest.mark.parametrize("chart", [charts.NVIDIA_DEVICE_PLUGIN, charts.KUEUE, charts.JOBSET, charts.DCGM_EXPORTER, charts.KUBE_PROMETHEUS_STACK], ids=lambda c: c.name)
def test_every_helm_values_key_is_one_the_pinned_chart_reads(onprem: Synthesis, chart: charts.Chart) -> None:
    inputs = release(onprem, chart)
    assert charts.unknown_values_keys(inputs["values"], chart_keys(chart.name, inputs["version"])) == []


def test_service_monitor_values_are_known_to_the_dcgm_chart(managed: Synthesis) -> None:
    inputs = release(managed, charts.DCGM_EXPORTER)
    assert charts.unknown_values_keys(inputs["values"], chart_keys("dcgm-exporter", inputs["version"])) == []


# --- releases -------------------------------------------------------------------------------


@pytest.mark.parametrize("chart", [charts.NVIDIA_DEVICE_PLUGIN, charts.KUEUE, charts.JOBSET, charts.DCGM_EXPORTER], ids=lambda c: c.name)
def test_each_release_installs_the_pinned_chart_into_its_own_namespace(onprem: Synthesis, chart: charts.Chart) -> None:
    inputs = release(onprem, chart)
    assert (inputs["chart"], inputs["version"], inputs["namespace"]) == (chart.reference, chart.version, chart.namespace)
    assert chart.namespace in {ns["metadata"]["name"] for ns in objects_of(onprem, "Namespace")}


def test_the_device_plugin_runs_gpu_feature_discovery_and_tolerates_the_gpu_taint(onprem: Synthesis) -> None:
    values = release(onprem, charts.NVIDIA_DEVICE_PLUGIN)["values"]
    assert values["gfd"] == {"enabled": True}
    assert values["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_the_device_plugin_has_one_config_per_sharing_profile_with_the_spec_s_replicas(onprem: Synthesis) -> None:
    config = release(onprem, charts.NVIDIA_DEVICE_PLUGIN)["values"]["config"]
    assert config["default"] == "none"
    assert sorted(config["map"]) == ["none", "time-slicing-2"]
    shared = yaml.safe_load(config["map"]["time-slicing-2"])
    assert shared["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 2}]


def test_no_device_plugin_where_the_platform_provides_one(managed: Synthesis) -> None:
    assert charts.NVIDIA_DEVICE_PLUGIN.name not in {r["inputs"]["name"] for r in managed.by_type(RELEASE)}


def test_kueue_runs_the_chart_s_configuration_managing_team_namespaces_and_checking_only_covered_resources(
    onprem: Synthesis,
) -> None:
    chart_default = chart_defaults(charts.KUEUE.name, charts.KUEUE.version)
    default_config = yaml.safe_load(chart_default["managerConfig"]["controllerManagerConfigYaml"])
    ours = yaml.safe_load(release(onprem, charts.KUEUE)["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert ours == {
        **default_config,
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {
            "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["research", "applied"]}]
        },
        "resources": {"quotaCheckStrategy": "IgnoreUndeclared"},
        "metrics": {**default_config["metrics"], "enableClusterQueueResources": True},
    }


def test_kueue_reports_the_cluster_queue_usage_the_cost_records_read(onprem: Synthesis) -> None:
    # kubernetes-sigs/kueue@v0.19.2 cmd/kueue/main.go: kueue_cluster_queue_resource_usage only
    # with metrics.enableClusterQueueResources; the metrics Service still targets :8443.
    ours = yaml.safe_load(release(onprem, charts.KUEUE)["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert ours["metrics"] == {"bindAddress": ":8443", "enableClusterQueueResources": True}


def test_kueue_installs_after_jobset_so_its_jobset_integration_starts(onprem: Synthesis) -> None:
    kueue = onprem.one(RELEASE, "lab-gpu-kueue")
    assert f"{RELEASE}::lab-gpu-jobset" in kueue["options"]["dependsOn"]


def test_the_dcgm_exporter_runs_on_gpu_nodes_only(onprem: Synthesis) -> None:
    values = release(onprem, charts.DCGM_EXPORTER)["values"]
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "gpu-platform.io/pool", "operator": "In", "values": [pool]}]}
        for pool in ("a100-train", "l40s-shared")
    ]
    assert values["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_no_service_monitor_unless_the_spec_says_prometheus_operator_is_there(onprem: Synthesis) -> None:
    assert release(onprem, charts.DCGM_EXPORTER)["values"]["serviceMonitor"] == {"enabled": False}


def test_a_service_monitor_when_the_spec_asks_for_one(managed: Synthesis) -> None:
    assert release(managed, charts.DCGM_EXPORTER)["values"]["serviceMonitor"] == {"enabled": True}


def test_no_dcgm_exporter_when_the_spec_turns_it_off(no_teams: Synthesis) -> None:
    assert charts.DCGM_EXPORTER.name not in {r["inputs"]["name"] for r in no_teams.by_type(RELEASE)}


# --- priorities -----------------------------------------------------------------------------


def test_priority_classes_carry_the_tiers_values_and_preemption_policies(onprem: Synthesis) -> None:
    classes = {pc["metadata"]["name"]: pc for pc in objects_of(onprem, "PriorityClass")}
    assert {name: (pc["value"], pc["preemptionPolicy"], pc["globalDefault"]) for name, pc in classes.items()} == {
        t.name: (t.value, t.preemption_policy, t.global_default) for t in DEFAULT_TIERS
    }


def test_workload_priority_classes_mirror_the_priority_classes(onprem: Synthesis) -> None:
    workload = {w["metadata"]["name"]: w["value"] for w in objects_of(onprem, "WorkloadPriorityClass")}
    assert workload == {pc["metadata"]["name"]: pc["value"] for pc in objects_of(onprem, "PriorityClass")}


def test_a_changed_tier_value_replaces_its_priority_class(onprem: Synthesis) -> None:
    options = onprem.one("kubernetes:scheduling.k8s.io/v1:PriorityClass", "lab-gpu-standard")["options"]
    assert options["replaceOnChanges"] == ["preemptionPolicy", "value"]
    assert options["deleteBeforeReplace"] is True


# --- queues and quotas ----------------------------------------------------------------------


def test_every_custom_resource_waits_for_kueue_s_webhook_gate(onprem: Synthesis) -> None:
    custom = [r for r in onprem.resources if r["type"].startswith(KUEUE_TYPE)]
    # 2 flavors, 1 cohort, 2 cluster queues, 2 x 2 local queues (the team's and `default`), tiers.
    assert len(custom) == 2 + 1 + 2 + 4 + len(DEFAULT_TIERS)
    for resource in custom:
        assert "kubernetes:batch/v1:Job::lab-gpu-kueue-webhook-ready" in resource["options"]["dependsOn"], resource["name"]


def test_one_resource_flavor_per_pool(onprem: Synthesis) -> None:
    assert [f["metadata"]["name"] for f in objects_of(onprem, "ResourceFlavor")] == ["a100-train", "l40s-shared"]


def test_queue_quotas_plus_the_cohort_s_equal_each_pool_s_derived_capacity(onprem: Synthesis) -> None:
    totals: dict[str, int] = {}
    for holder in objects_of(onprem, "ClusterQueue") + objects_of(onprem, "Cohort"):
        for flavor in holder["spec"]["resourceGroups"][0]["flavors"]:
            totals[flavor["name"]] = totals.get(flavor["name"], 0) + flavor["resources"][0]["nominalQuota"]
    # a100-train: 4 nodes x 8 GPUs; l40s-shared: 2 nodes x 4 GPUs x 2 time-slices.
    assert totals == {"a100-train": 32, "l40s-shared": 16}


def test_each_team_queue_holds_the_team_s_quota(onprem: Synthesis) -> None:
    quotas = {
        q["metadata"]["name"]: {f["name"]: f["resources"][0]["nominalQuota"] for f in q["spec"]["resourceGroups"][0]["flavors"]}
        for q in objects_of(onprem, "ClusterQueue")
    }
    assert quotas == {
        "research": {"a100-train": 16, "l40s-shared": 8},
        "applied": {"a100-train": 8, "l40s-shared": 8},
    }


def test_cluster_queues_are_created_after_the_flavors_and_cohort_they_name(onprem: Synthesis) -> None:
    depends = onprem.one(f"{KUEUE_TYPE}ClusterQueue", "lab-gpu-research")["options"]["dependsOn"]
    assert {f"{KUEUE_TYPE}ResourceFlavor::lab-gpu-a100-train", f"{KUEUE_TYPE}Cohort::lab-gpu-cohort"} <= set(depends)


def test_each_team_has_a_namespace_with_its_local_queue(onprem: Synthesis) -> None:
    queues = {(q["metadata"]["namespace"], q["metadata"]["name"], q["spec"]["clusterQueue"]) for q in objects_of(onprem, "LocalQueue")}
    assert queues == {
        ("research", "research", "research"),
        ("research", "default", "research"),
        ("applied", "applied", "applied"),
        ("applied", "default", "applied"),
    }
    assert {"research", "applied"} <= {ns["metadata"]["name"] for ns in objects_of(onprem, "Namespace")}


def test_a_team_s_gpu_resource_quota_is_the_most_its_queue_can_admit(onprem: Synthesis) -> None:
    quotas = {q["metadata"]["namespace"]: q["spec"]["hard"] for q in objects_of(onprem, "ResourceQuota")}
    assert quotas == {team: {"requests.nvidia.com/gpu": "48"} for team in ("research", "applied")}


def test_team_namespaces_give_containers_default_requests(onprem: Synthesis) -> None:
    [limits] = [lr for lr in objects_of(onprem, "LimitRange") if lr["metadata"]["namespace"] == "research"]
    assert limits["spec"]["limits"] == [{"type": "Container", "defaultRequest": {"cpu": "500m", "memory": "1Gi"}}]


def test_each_team_namespace_has_the_trainer_service_account(onprem: Synthesis) -> None:
    accounts = {(sa["metadata"]["namespace"], sa["metadata"]["name"]) for sa in objects_of(onprem, "ServiceAccount")}
    assert accounts == {("research", "trainer"), ("applied", "trainer")}


def test_without_teams_jobs_queue_in_the_default_namespace(no_teams: Synthesis) -> None:
    [queue] = objects_of(no_teams, "LocalQueue")
    assert (queue["metadata"]["namespace"], queue["metadata"]["name"]) == ("default", "default")
    assert objects_of(no_teams, "ResourceQuota") == []
    assert "default" not in {ns["metadata"]["name"] for ns in objects_of(no_teams, "Namespace")}


# --- the component ----------------------------------------------------------------------------


def test_every_layer_resource_is_a_child_of_the_layer_on_the_given_provider(onprem: Synthesis) -> None:
    children = layer_resources(onprem)
    assert len(children) == len(onprem.resources) - 2  # all but the layer and its provider
    assert {r["provider"] for r in children} == {"pulumi:providers:kubernetes::lab-k8s"}


def test_every_kubernetes_object_is_named_explicitly(onprem: Synthesis) -> None:
    # Without a name Pulumi appends a random suffix, and jobs could not find their queue.
    assert all(obj["metadata"].get("name") for obj in onprem.kubernetes_objects())


def test_the_stack_exports_queues_tiers_and_pool_labels(onprem: Synthesis) -> None:
    outputs = onprem.outputs
    assert outputs["queues"]["research"] == {
        "namespace": "research",
        "localQueue": "research",
        "clusterQueue": "research",
        "gpuQuota": {"a100-train": 16, "l40s-shared": 8},
    }
    assert outputs["priorityClasses"] == [t.name for t in DEFAULT_TIERS]
    assert outputs["devicePluginLabels"] == {
        "a100-train": {"nvidia.com/device-plugin.config": "none"},
        "l40s-shared": {"nvidia.com/device-plugin.config": "time-slicing-2"},
    }


def test_the_same_spec_synthesizes_byte_identical_resources(onprem: Synthesis) -> None:
    assert synthesize(onprem_platform()).resources == onprem.resources


def test_onprem_selects_no_pool_by_a_label_a_node_agent_rewrites(onprem: Synthesis) -> None:
    """GPU feature discovery rewrites nvidia.com/gpu.product on shared nodes: flavors, jobs and the
    exporter's affinity select our own pool label."""
    assert "nvidia.com/gpu.product" not in json.dumps(onprem.resources)

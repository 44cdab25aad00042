"""The manager stack: MultiKueue objects per worker, dispatch order, admission check, schemas."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml
from k8s_support import crd_schema
from test_k8s_queued_provisioning import validate

from components.facts import multikueue
from components.fleet import order, plan
from infra import offline

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"
AWS, GCP = "organization/gpu-platform/prod-aws", "organization/gpu-platform/prod-gcp"


def objects(fleet: offline.FleetSynthesis, kind: str) -> list[dict[str, Any]]:
    return [r["inputs"] for r in fleet.synthesis.by_type(KUEUE + kind)]


def descriptions(fleet: offline.FleetSynthesis) -> dict[str, Any]:
    return {w: s.outputs["fleetQueues"] for w, (_, s) in fleet.workers.items()}


def test_each_worker_has_a_multikueue_cluster_reading_its_own_kubeconfig_secret(fleet: offline.FleetSynthesis) -> None:
    clusters = {c["metadata"]["name"]: c["spec"]["clusterSource"]["kubeConfig"] for c in objects(fleet, "MultiKueueCluster")}
    secrets = {s["metadata"]["name"]: s for s in (r["inputs"] for r in fleet.synthesis.by_type("kubernetes:core/v1:Secret"))}
    assert clusters == {
        "prod-aws": {"locationType": "Secret", "location": "prod-aws-kubeconfig"},
        "prod-gcp": {"locationType": "Secret", "location": "prod-gcp-kubeconfig"},
    }
    assert {n: s["metadata"]["namespace"] for n, s in secrets.items()} == {
        "prod-aws-kubeconfig": "kueue-system", "prod-gcp-kubeconfig": "kueue-system"}
    # The kubeconfig comes from a secret output and stays masked in what synth writes.
    assert all(s["stringData"] == "[secret]" for s in secrets.values())


def test_the_multikueue_config_lists_the_cheaper_h100_worker_first(fleet: offline.FleetSynthesis) -> None:
    [config] = objects(fleet, "MultiKueueConfig")
    # H100: p5.48xlarge $55.04/h for 8 vs a3-highgpu-8g $88.49/h for 8 (components.facts.catalog).
    assert config["spec"]["clusters"] == ["prod-aws", "prod-gcp"]
    assert fleet.synthesis.outputs["dispatchOrderPerGpuModel"]["L4"] == [GCP, AWS]


def test_fleet_order_overrides_the_price_order(fleet: offline.FleetSynthesis) -> None:
    assert order.dispatch_order([GCP, AWS], descriptions(fleet)) == [GCP, AWS]
    assert order.dispatch_order(None, descriptions(fleet)) == [AWS, GCP]


def test_free_quota_breaks_a_price_tie() -> None:
    pool = {"gpuModel": "H100-80GB", "maxSlots": 8, "usdPerGpuHour": 5.0}
    a = {"pools": {"p": pool}, "sharedQuota": {"p": 0}}
    b = {"pools": {"p": pool}, "sharedQuota": {"p": 8}}
    assert order.default_order({"x/y/a": a, "x/y/b": b}) == ["x/y/b", "x/y/a"]


def test_every_team_cluster_queue_carries_the_multikueue_check_on_all_flavors(fleet: offline.FleetSynthesis) -> None:
    queues = objects(fleet, "ClusterQueue")
    assert {q["metadata"]["name"] for q in queues} == {"research", "applied"}
    for queue in queues:
        assert queue["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": plan.ADMISSION_CHECK}]}
    [check] = objects(fleet, "AdmissionCheck")
    assert check["spec"] == {
        "controllerName": "kueue.x-k8s.io/multikueue",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": plan.CONFIG_NAME},
    }


def test_team_quota_is_the_sum_of_the_workers_per_gpu_model(fleet: offline.FleetSynthesis) -> None:
    research = next(q for q in objects(fleet, "ClusterQueue") if q["metadata"]["name"] == "research")
    quotas = {f["name"]: f["resources"][0]["nominalQuota"] for f in research["spec"]["resourceGroups"][0]["flavors"]}
    # research holds 32 H100 and 16 H200 slots on each worker.
    assert quotas == {"h100-80gb": 64, "h200-141gb": 32, "l4": 0}


def test_local_queues_and_namespaces_mirror_the_workers(fleet: offline.FleetSynthesis) -> None:
    local = {(q["metadata"]["namespace"], q["metadata"]["name"]) for q in objects(fleet, "LocalQueue")}
    assert local == {("research", "research"), ("research", "default"), ("applied", "applied"), ("applied", "default")}
    for _, synthesis in fleet.workers.values():
        worker = {(q["inputs"]["metadata"]["namespace"], q["inputs"]["metadata"]["name"]) for q in synthesis.by_type(KUEUE + "LocalQueue")}
        assert local <= worker


def test_every_kueue_object_validates_against_its_crd_schema_with_unknown_fields_as_errors(fleet: offline.FleetSynthesis) -> None:
    kinds = set()
    for obj in fleet.synthesis.kubernetes_objects():
        if crd_schema(obj["apiVersion"], obj["kind"]) is not None:
            validate(obj)
            kinds.add(obj["kind"])
    assert {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "ClusterQueue", "LocalQueue"} <= kinds


def test_a_misspelt_multikueue_field_fails_the_schema() -> None:
    broken = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": "x"},
              "spec": {"clusterSource": {"kubeconfig": {"location": "x"}}}}
    schema = crd_schema("kueue.x-k8s.io/v1beta2", "MultiKueueCluster")
    try:
        jsonschema.validate(broken, schema)
    except jsonschema.ValidationError:
        return
    raise AssertionError("a misspelt kubeConfig passed the schema")


def test_kueue_on_the_manager_dispatches_incrementally_and_only_jobs_and_jobsets(fleet: offline.FleetSynthesis) -> None:
    [kueue] = [r for r in fleet.synthesis.by_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "kueue"]
    configuration = yaml.safe_load(kueue["inputs"]["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert configuration["multiKueue"]["dispatcherName"] == multikueue.INCREMENTAL_DISPATCHER
    assert configuration["integrations"]["frameworks"] == ["batch/job", "jobset.x-k8s.io/jobset"]
    assert configuration["managedJobsNamespaceSelector"]["matchExpressions"][0]["values"] == ["applied", "research"]


def test_the_incremental_dispatcher_nominates_one_worker_per_round(fleet: offline.FleetSynthesis) -> None:
    # Kueue defaults stepSize to 3 (apis/config/v1beta2/defaults.go): both workers at once.
    [kueue] = [r for r in fleet.synthesis.by_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "kueue"]
    configuration = yaml.safe_load(kueue["inputs"]["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert configuration["multiKueue"]["incrementalDispatcherConfig"] == {"stepSize": 1}


def test_every_kueue_object_on_the_manager_waits_for_the_webhook_gate(fleet: offline.FleetSynthesis) -> None:
    [gate] = fleet.synthesis.by_type("kubernetes:batch/v1:Job")
    assert gate["inputs"]["metadata"] == {"name": "kueue-webhook-ready", "namespace": "kueue-system"}
    gate_key = f"kubernetes:batch/v1:Job::{gate['name']}"
    # The rest (config, check, queues) wait on these, and so on the gate through them.
    first = [r for r in fleet.synthesis.resources if r["type"].startswith(KUEUE)
             and r["inputs"]["kind"] in {"MultiKueueCluster", "ResourceFlavor", "Cohort", "WorkloadPriorityClass"}]
    assert len(first) == 2 + 3 + 1 + len(descriptions(fleet)["organization/gpu-platform/prod-aws"]["priorityTiers"])
    assert all(gate_key in r["options"]["dependsOn"] for r in first)


def _tiers(value: int) -> dict[str, Any]:
    return {"priorityTiers": [{"name": "production", "value": value, "description": ""}]}


def test_workers_agreeing_on_a_tier_give_one_priority_class() -> None:
    assert plan.priority_tiers({"x/y/a": _tiers(100), "x/y/b": _tiers(100)}) == [_tiers(100)["priorityTiers"][0]]


def test_workers_disagreeing_on_a_tier_s_value_are_refused_naming_both() -> None:
    with pytest.raises(plan.FleetConflict) as caught:
        plan.priority_tiers({"x/y/a": _tiers(100), "x/y/b": _tiers(200)})
    assert str(caught.value).startswith("priority tier 'production' is 100 on x/y/a but 200 on x/y/b")

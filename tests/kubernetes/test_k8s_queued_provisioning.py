"""Kueue and GKE queued provisioning: an AdmissionCheck with a ProvisioningRequestConfig on the
flavors of queued pools, so a job waits in its queue until GKE grants all its nodes at once."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from helpers import REPO, platform_of
from k8s_support import crd_schema, synthesize

from components.kubernetes.queues import GKE_QUEUED_TAINT_KEY, QUEUED_PROVISIONING
from infra.synth import Synthesis

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"


def gke(provisioning: str) -> dict[str, Any]:
    raw = platform_of("dev-gcp")
    raw["nodePools"] = [
        {"name": "h200", "instanceType": "a3-ultragpu-8g", "maxNodes": 4, "provisioning": provisioning},
        {"name": "l4", "instanceType": "g2-standard-8", "maxNodes": 2, "capacity": "spot"},
    ]
    raw["scheduling"] = {"teams": [{"name": "research", "quotas": {"h200": 16}}, {"name": "applied", "quotas": {"h200": 8}}]}
    return raw


@pytest.fixture(scope="module")
def queued() -> Synthesis:
    return synthesize(gke("queued"), stack="dev-gcp")


@pytest.fixture(scope="module")
def flex() -> Synthesis:
    return synthesize(gke("flex-start"), stack="dev-gcp")


def python_patterns(schema: Any) -> Any:
    """CRD patterns are Go RE2, which takes a flag after the anchor (AdmissionCheck's `^(?i)...`);
    Python's re wants it first: the same pattern, with the flag moved to the front."""
    if isinstance(schema, list):
        return [python_patterns(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: python_patterns(value) for key, value in schema.items()}
    pattern = out.get("pattern")
    if isinstance(pattern, str) and pattern.startswith("^(?i)"):
        out["pattern"] = "(?i)^" + pattern.removeprefix("^(?i)")
    return out


def validate(obj: dict[str, Any]) -> None:
    """Validate against the CRD schema, unknown fields included. The schema itself is not checked
    against the JSON Schema metaschema, whose ECMA regex format refuses RE2's inline flags."""
    schema = python_patterns(crd_schema(obj["apiVersion"], obj["kind"]))
    jsonschema.validators.validator_for(schema)(schema).validate(obj)


def kueue(result: Synthesis, kind: str) -> list[dict[str, Any]]:
    return [r["inputs"] for r in result.by_type(f"{KUEUE}{kind}")]


@pytest.mark.parametrize("kind", ["AdmissionCheck", "ProvisioningRequestConfig", "ClusterQueue", "ResourceFlavor"])
def test_the_queued_provisioning_objects_match_kueue_s_schemas(queued: Synthesis, kind: str) -> None:
    objects = kueue(queued, kind)
    assert objects
    for obj in objects:
        validate(obj)


def test_the_admission_check_names_its_provisioning_request_config(queued: Synthesis) -> None:
    [check] = kueue(queued, "AdmissionCheck")
    [config] = kueue(queued, "ProvisioningRequestConfig")
    assert check["spec"] == {
        "controllerName": "kueue.x-k8s.io/provisioning-request",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": config["metadata"]["name"]},
    }


def test_the_config_asks_gke_for_queued_provisioning_of_the_gpu_pods(queued: Synthesis) -> None:
    [config] = kueue(queued, "ProvisioningRequestConfig")
    assert {k: config["spec"][k] for k in ("provisioningClassName", "managedResources")} == {
        "provisioningClassName": "queued-provisioning.gke.io",
        "managedResources": ["nvidia.com/gpu"],
    }


def test_the_config_states_its_retry_strategy_with_every_field_the_crd_defaults(queued: Synthesis) -> None:
    """Unset, the CRD's defaults (3 tries) decide when Kueue deactivates a workload."""
    [config] = kueue(queued, "ProvisioningRequestConfig")
    schema = json.loads((REPO / "tests/data/schemas/kueue.x-k8s.io_v1beta2_ProvisioningRequestConfig.json").read_text())
    fields = schema["properties"]["spec"]["properties"]["retryStrategy"]["properties"]
    assert set(config["spec"]["retryStrategy"]) == set(fields)
    assert config["spec"]["retryStrategy"]["backoffLimitCount"] > fields["backoffLimitCount"]["default"]


def test_every_cluster_queue_runs_the_check_only_on_the_queued_flavor(queued: Synthesis) -> None:
    queues = kueue(queued, "ClusterQueue")
    assert {q["metadata"]["name"] for q in queues} == {"research", "applied"}
    for queue in queues:
        assert queue["spec"]["admissionChecksStrategy"] == {
            "admissionChecks": [{"name": QUEUED_PROVISIONING, "onFlavors": ["h200-tas"]}]
        }


def test_the_admission_check_exists_before_the_cluster_queues_that_name_it(queued: Synthesis) -> None:
    check_key = next(f"{r['type']}::{r['name']}" for r in queued.by_type(f"{KUEUE}AdmissionCheck"))
    for queue in queued.by_type(f"{KUEUE}ClusterQueue"):
        assert check_key in queue["options"]["dependsOn"]


def test_the_queued_flavor_tolerates_the_taint_gke_puts_on_queued_nodes(queued: Synthesis) -> None:
    flavors = {f["metadata"]["name"]: f["spec"]["tolerations"] for f in kueue(queued, "ResourceFlavor")}
    queued_taint = {"key": GKE_QUEUED_TAINT_KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    assert queued_taint in flavors["h200-tas"]
    assert queued_taint not in flavors["l4"]


def test_flex_start_without_queueing_needs_no_admission_check(flex: Synthesis) -> None:
    assert kueue(flex, "AdmissionCheck") == []
    assert all("admissionChecksStrategy" not in q["spec"] for q in kueue(flex, "ClusterQueue"))


def test_a_misspelt_field_of_the_admission_check_fails_validation(queued: Synthesis) -> None:
    [check] = kueue(queued, "AdmissionCheck")
    misspelt = {**check, "spec": {**check["spec"], "controllername": "x"}}
    with pytest.raises(jsonschema.ValidationError):
        validate(misspelt)

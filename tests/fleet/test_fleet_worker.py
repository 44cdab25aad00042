"""Workers: the manager's least-privilege access, the kubeconfig and queues outputs, the data claim."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from helpers import REPO, platform_of, stack_config

from components.checks.rules import base, fleet as fleet_rule
from components.facts import multikueue
from components.fleet.worker import MissingWorkerToken, _decoded
from components.spec import SpecError, parse_spec
from infra import offline

RBAC = "kubernetes:rbac.authorization.k8s.io/v1:"
WORKERS = ["organization/gpu-platform/prod-aws", "organization/gpu-platform/prod-gcp"]


def worker(fleet: offline.FleetSynthesis, name: str) -> Any:
    return fleet.workers[name][1]


@pytest.mark.parametrize("name", WORKERS)
def test_the_kubeconfig_output_is_secret_and_carries_the_worker_token(fleet: offline.FleetSynthesis, name: str) -> None:
    synthesis = worker(fleet, name)
    assert synthesis.outputs["fleetKubeconfig"] == "[secret]"
    config = yaml.safe_load(synthesis.revealed_outputs["fleetKubeconfig"])
    [user] = config["users"]
    assert user["user"] == {"token": "mock-service-account-token"}
    assert config["clusters"][0]["cluster"]["server"].startswith("https://")


@pytest.mark.parametrize("name", WORKERS)
def test_the_manager_account_gets_exactly_the_documented_worker_rules(fleet: offline.FleetSynthesis, name: str) -> None:
    synthesis = worker(fleet, name)
    [role] = [r["inputs"] for r in synthesis.by_type(RBAC + "ClusterRole") if r["inputs"]["metadata"]["name"] == multikueue.WORKER_ROLE]
    assert role["rules"] == [dict(rule) for rule in multikueue.WORKER_RULES]
    [token] = [r["inputs"] for r in synthesis.by_type("kubernetes:core/v1:Secret") if r["inputs"]["metadata"]["name"] == multikueue.WORKER_TOKEN_SECRET]
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["namespace"] == "kueue-system"
    assert token["metadata"]["annotations"] == {"kubernetes.io/service-account.name": multikueue.WORKER_SERVICE_ACCOUNT}


def test_the_queues_output_names_queues_pools_quota_and_price(fleet: offline.FleetSynthesis) -> None:
    queues = worker(fleet, WORKERS[0]).outputs["fleetQueues"]
    assert queues["teams"]["research"] == {
        "namespace": "research", "clusterQueue": "research", "localQueues": ["research", "default"],
        "quota": {"h100-train": 32, "h200-train": 16, "l4-eval": 0},
    }
    assert queues["pools"]["h100-train"]["gpuModel"] == "H100-80GB"
    assert queues["pools"]["h100-train"]["usdPerGpuHour"] == 6.88


def test_a_gke_worker_binds_each_team_s_training_data_claim_to_its_bucket_folder(fleet: offline.FleetSynthesis) -> None:
    synthesis = worker(fleet, WORKERS[1])
    volumes = {r["inputs"]["metadata"]["name"]: r["inputs"]["spec"] for r in synthesis.by_type("kubernetes:core/v1:PersistentVolume")}
    research = volumes["research-training-data"]
    assert research["csi"]["driver"] == "gcsfuse.csi.storage.gke.io"
    assert research["csi"]["volumeHandle"] == "ml-prod-prod-training"
    assert research["csi"]["volumeAttributes"] == {"skipCSIBucketAccessCheck": "true"}
    assert "only-dir=teams/research" in research["mountOptions"]
    claims = {(c["inputs"]["metadata"]["namespace"], c["inputs"]["metadata"]["name"]) for c in synthesis.by_type("kubernetes:core/v1:PersistentVolumeClaim")}
    assert {("research", "training-data"), ("applied", "training-data")} <= claims


def violations(records: list[dict[str, Any]]) -> list[str]:
    ctx = base.context_of(parse_spec(platform_of("prod-aws"), "stacks/Pulumi.prod-aws.yaml", "us-east-1"))
    return [v.message for v in fleet_rule.fleet_worker_least_privilege(base.from_synthesis(records), ctx)]


def test_the_worker_role_holds_the_rule(fleet: offline.FleetSynthesis) -> None:
    assert violations(worker(fleet, WORKERS[0]).resources) == []


def _role(records: list[dict[str, Any]]) -> dict[str, Any]:
    return next(r for r in records if r["type"] == RBAC + "ClusterRole" and r["inputs"]["metadata"]["name"] == multikueue.WORKER_ROLE)


def test_a_planted_broader_verb_fails_the_rule(fleet: offline.FleetSynthesis) -> None:
    records = copy.deepcopy(worker(fleet, WORKERS[0]).resources)
    _role(records)["inputs"]["rules"][1]["verbs"].append("update")
    assert violations(records) == ["grants the MultiKueue manager update on jobs/status in API group 'batch', beyond Kueue's documented worker role"]


def test_a_planted_wildcard_or_extra_resource_fails_the_rule(fleet: offline.FleetSynthesis) -> None:
    records = copy.deepcopy(worker(fleet, WORKERS[0]).resources)
    _role(records)["inputs"]["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]})
    assert violations(records) == ["grants the MultiKueue manager * on secrets in API group '', beyond Kueue's documented worker role"]


def test_a_planted_binding_to_cluster_admin_fails_the_rule(fleet: offline.FleetSynthesis) -> None:
    records = copy.deepcopy(worker(fleet, WORKERS[0]).resources)
    binding = next(r for r in records if r["type"] == RBAC + "ClusterRoleBinding" and r["inputs"]["metadata"]["name"] == multikueue.WORKER_BINDING)
    binding["inputs"]["roleRef"]["name"] = "cluster-admin"
    assert violations(records) == ["binds the MultiKueue manager's account to cluster-admin, a role this stack does not declare"]


def test_an_existing_cluster_cannot_be_a_worker() -> None:
    platform = platform_of("onprem")
    platform["fleet"] = {"worker": True}
    with pytest.raises(SpecError) as caught:
        parse_spec(platform, "stacks/Pulumi.onprem.yaml")
    assert [p.path for p in caught.value.problems] == ["platform.fleet.worker"]


def test_an_unknown_fleet_key_on_a_cluster_stack_is_an_error() -> None:
    platform = platform_of("prod-aws")
    platform["fleet"] = {"worker": True, "workers": []}
    with pytest.raises(SpecError) as caught:
        parse_spec(platform, "stacks/Pulumi.prod-aws.yaml", "us-east-1")
    assert caught.value.problems[0].path == "platform.fleet.workers"
    assert "allowed keys: worker" in caught.value.problems[0].message


def test_being_a_worker_adds_only_the_fleet_outputs(fleet: offline.FleetSynthesis, tmp_path: Any) -> None:
    config = stack_config("prod-aws")
    config["gpu-platform:platform"]["fleet"] = {"worker": False}
    (tmp_path / "Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.prod-aws.yaml").write_text(yaml.safe_dump({"config": config}))
    outputs = offline.synthesize(str(tmp_path / "stacks" / "Pulumi.prod-aws.yaml"), tmp_path)[2].outputs
    as_worker = worker(fleet, WORKERS[0]).outputs
    assert sorted(set(as_worker) - set(outputs)) == ["fleetKubeconfig", "fleetQueues"]
    assert {k: v for k, v in as_worker.items() if k in outputs} == outputs


def test_the_manager_may_update_and_patch_remote_workloads(fleet: offline.FleetSynthesis) -> None:
    # workload.go: remote Update to drop the finalizer before delete and to carry a priority change.
    [role] = [r["inputs"] for r in worker(fleet, WORKERS[0]).by_type(RBAC + "ClusterRole") if r["inputs"]["metadata"]["name"] == multikueue.WORKER_ROLE]
    [rule] = [r for r in role["rules"] if r["resources"] == ["workloads"]]
    assert {"update", "patch"} <= set(rule["verbs"])


def test_an_empty_token_after_an_apply_is_an_error() -> None:
    with pytest.raises(MissingWorkerToken) as caught:
        _decoded({"token": ""}, preview=False)
    assert "kueue-system/multikueue-sa has no data.token" in str(caught.value)


def test_a_preview_without_a_token_yet_is_not_an_error() -> None:
    assert _decoded(None, preview=True) == ""


@pytest.mark.parametrize("name", WORKERS)
def test_workers_keep_kueue_s_default_pods_ready_timeout(fleet: offline.FleetSynthesis, name: str) -> None:
    # Absent `waitForPodsReady` and no DisableWaitForPodsReady gate: Kueue 0.19 defaults it on
    # (30 minutes), which is what evicts a job whose pods never start and sends it back to the manager.
    [kueue] = [r for r in worker(fleet, name).by_type("kubernetes:helm.sh/v3:Release") if r["inputs"]["name"] == "kueue"]
    configuration = yaml.safe_load(kueue["inputs"]["values"]["managerConfig"]["controllerManagerConfigYaml"])
    assert "waitForPodsReady" not in configuration
    assert multikueue.DISABLE_PODS_READY_GATE not in configuration.get("featureGates", {})

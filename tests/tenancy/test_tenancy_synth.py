"""Tenancy as synthesized: what Kueue, the API server's RBAC and Pod Security Admission, and the
Pulumi engine's ordering will do with the objects the stacks declare."""

from __future__ import annotations

from typing import Any, Callable

import jsonschema
import pytest
import yaml
from k8s_support import crd_schema

from components import tenancy
from components.facts import multikueue
from components.checks import isolation
from components.facts import charts
from components.kubernetes import pod_security, webhook_gate
from infra.synth import Synthesis

RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
JOB = "kubernetes:batch/v1:Job"
Synthesized = Callable[[str], Synthesis]


def kinds(result: Synthesis, kind: str) -> list[dict[str, Any]]:
    return [obj for obj in result.kubernetes_objects() if obj["kind"] == kind]


def kueue_config(result: Synthesis) -> dict[str, Any]:
    [release] = [r["inputs"] for r in result.by_type(RELEASE) if r["inputs"]["name"] == charts.KUEUE.name]
    return yaml.safe_load(release["values"]["managerConfig"]["controllerManagerConfigYaml"])


def namespace_labels(result: Synthesis, name: str) -> dict[str, str]:
    [namespace] = [n for n in kinds(result, "Namespace") if n["metadata"]["name"] == name]
    return {**namespace["metadata"].get("labels", {}), "kubernetes.io/metadata.name": name}


@pytest.mark.parametrize("stack", ["prod-aws", "prod-gcp", "onprem"])
def test_kueue_manages_jobs_without_a_queue_label_in_every_team_namespace_and_no_other(
    synthesized: Synthesized, stack: str
) -> None:
    result = synthesized(stack)
    config = kueue_config(result)
    assert config["manageJobsWithoutQueueName"] is True
    selector = config["managedJobsNamespaceSelector"]
    for team in ("research", "applied"):
        assert isolation.selects(selector, namespace_labels(result, team))
    for system in ("kube-system", "kueue-system", "default", "nvidia-device-plugin"):
        assert not isolation.selects(selector, {"kubernetes.io/metadata.name": system})


def test_a_stack_without_teams_has_kueue_manage_the_default_namespace() -> None:
    from k8s_support import onprem_platform, synthesize

    platform = onprem_platform()
    del platform["scheduling"]["teams"]
    selector = kueue_config(synthesize(platform))["managedJobsNamespaceSelector"]
    assert isolation.selects(selector, {"kubernetes.io/metadata.name": "default"})
    assert not isolation.selects(selector, {"kubernetes.io/metadata.name": "kube-system"})


def test_jobs_naming_no_queue_land_in_their_team_s_queue_through_the_default_local_queue(synthesized: Synthesized) -> None:
    queues = {(q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"] for q in kinds(synthesized("onprem"), "LocalQueue")}
    for team in ("research", "applied"):
        assert queues[(team, "default")] == {"clusterQueue": team}
        assert queues[(team, team)] == {"clusterQueue": team}


def test_a_team_reclaims_its_nominal_quota_from_borrowers_of_any_tier(synthesized: Synthesized) -> None:
    for queue in kinds(synthesized("prod-aws"), "ClusterQueue"):
        assert queue["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}


def test_fair_sharing_sets_kueue_s_strategies_and_each_team_s_weight(synthesized: Synthesized) -> None:
    from k8s_support import onprem_platform, synthesize

    platform = onprem_platform()
    platform["scheduling"]["fairSharing"] = {"enabled": True, "weights": {"research": 3}}
    result = synthesize(platform)
    assert kueue_config(result)["fairSharing"] == {
        "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
    }
    queues = kinds(result, "ClusterQueue")
    assert {q["metadata"]["name"]: q["spec"]["fairSharing"]["weight"] for q in queues} == {"research": 3, "applied": 1}
    for queue in queues:
        jsonschema.validate(queue, crd_schema(queue["apiVersion"], queue["kind"]))
    assert "fairSharing" not in kueue_config(synthesized("onprem"))


def test_each_team_s_members_hold_one_role_in_their_own_namespace_only(synthesized: Synthesized) -> None:
    result = synthesized("onprem")
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r["rules"] for r in kinds(result, "Role")}
    assert roles == {
        ("research", tenancy.TEAM_ROLE): tenancy.TEAM_RULES,
        ("applied", tenancy.TEAM_ROLE): tenancy.TEAM_RULES,
    }
    bindings = {b["metadata"]["namespace"]: b for b in kinds(result, "RoleBinding")}
    assert bindings["research"]["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "research"}]
    assert bindings["research"]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": tenancy.TEAM_ROLE}
    assert kinds(result, "ClusterRole") == []


def test_team_rules_never_create_pods_directly_so_every_job_goes_through_kueue() -> None:
    for rule in tenancy.TEAM_RULES:
        if "pods" in rule["resources"]:
            assert "create" not in rule["verbs"]


def _not_the_fleet_manager(bindings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """prod-aws and prod-gcp are fleet workers: the MultiKueue manager's account is bound to its
    documented role there (docs/fleet.md; rule fleet-worker-least-privilege)."""
    manager = [b for b in bindings if b["metadata"]["name"] == multikueue.WORKER_BINDING]
    assert [b["roleRef"]["name"] for b in manager] == [multikueue.WORKER_ROLE]
    return [b for b in bindings if b not in manager]


def test_members_cannot_delete_claims_so_no_team_strands_its_data_volume(synthesized: Synthesized) -> None:
    for role in kinds(synthesized("prod-aws"), "Role"):
        claims = [rule for rule in role["rules"] if "persistentvolumeclaims" in rule["resources"]]
        assert claims and all("delete" not in rule["verbs"] and "*" not in rule["verbs"] for rule in claims)


def test_only_the_admins_are_bound_cluster_wide(synthesized: Synthesized) -> None:
    # On GKE besides the admins only Kueue's and JobSet's metrics scrapers, to read /metrics
    # (docs/observability.md).
    bindings = _not_the_fleet_manager(kinds(synthesized("prod-gcp"), "ClusterRoleBinding"))
    [binding] = [b for b in bindings if b["metadata"]["name"] == tenancy.ADMINS_BINDING]
    scrapers = {b["roleRef"]["name"]: b["subjects"] for b in bindings if b is not binding}
    assert scrapers == {
        "kueue-metrics-reader": [{"kind": "ServiceAccount", "name": "gpu-platform-kueue-scraper", "namespace": "kueue-system"}],
        "jobset-metrics-reader": [{"kind": "ServiceAccount", "name": "gpu-platform-jobset-scraper", "namespace": "jobset-system"}],
    }
    assert binding["roleRef"]["name"] == "cluster-admin"
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "platform-admins@example.com"}]
    # On AWS the admins come by EKS access entries and Prometheus's /metrics reads by the chart's
    # own ClusterRole (docs/observability.md): the platform binds nothing cluster-wide.
    assert _not_the_fleet_manager(kinds(synthesized("prod-aws"), "ClusterRoleBinding")) == []


def test_gke_binds_google_groups_through_the_security_group_and_lets_members_fetch_credentials(
    synthesized: Synthesized,
) -> None:
    result = synthesized("prod-gcp")
    [cluster] = result.by_type("gcp:container/cluster:Cluster")
    assert cluster["inputs"]["authenticatorGroupsConfig"] == {"securityGroup": "gke-security-groups@example.com"}
    viewers = {r["inputs"]["member"] for r in result.by_type("gcp:projects/iAMMember:IAMMember") if r["inputs"]["role"] == "roles/container.clusterViewer"}
    assert viewers == {
        "group:ml-research@example.com",
        "group:ml-applied@example.com",
        "user:oncall-applied@example.com",
        "group:platform-admins@example.com",
    }


def test_each_gke_team_has_its_own_service_account_on_its_own_managed_folder(synthesized: Synthesized) -> None:
    result = synthesized("prod-gcp")
    grants = {
        (r["inputs"]["member"], r["inputs"]["managedFolder"], r["inputs"]["role"])
        for r in result.by_type("gcp:storage/managedFolderIamMember:ManagedFolderIamMember")
    }
    account = "serviceAccount:ml-prod-t-{}@my-ml-prod.iam.gserviceaccount.com"
    assert grants == {
        (account.format("research"), "teams/research/", "roles/storage.objectUser"),
        (account.format("research"), "datasets/", "roles/storage.objectViewer"),
        (account.format("applied"), "teams/applied/", "roles/storage.objectUser"),
        (account.format("applied"), "datasets/", "roles/storage.objectViewer"),
    }
    assert result.by_type("gcp:storage/bucketIAMMember:BucketIAMMember") == []
    assert result.outputs["trainerServiceAccounts"] == {
        "research": "ml-prod-t-research@my-ml-prod.iam.gserviceaccount.com",
        "applied": "ml-prod-t-applied@my-ml-prod.iam.gserviceaccount.com",
    }


@pytest.mark.parametrize("stack", ["prod-aws", "onprem"])
def test_team_namespaces_enforce_the_restricted_pod_security_level(synthesized: Synthesized, stack: str) -> None:
    for team in ("research", "applied"):
        labels = namespace_labels(synthesized(stack), team)
        assert labels[pod_security.ENFORCE_LABEL] == "restricted"
        assert labels["gpu-platform.io/team"] == team


def test_gke_gpudirect_pools_need_host_plugins_so_team_namespaces_enforce_privileged_and_say_why(
    synthesized: Synthesized,
) -> None:
    """prod-gcp's A3 pools: multi-node jobs mount the host's NCCL plugin and run the NET_ADMIN
    datapath daemon (components.kubernetes.pod_security)."""
    for team in ("research", "applied"):
        [namespace] = [n for n in kinds(synthesized("prod-gcp"), "Namespace") if n["metadata"]["name"] == team]
        assert namespace["metadata"]["labels"][pod_security.ENFORCE_LABEL] == "privileged"
        reason = namespace["metadata"]["annotations"][pod_security.REASON_ANNOTATION]
        assert "GPUDirect pools (h100-train, h200-train)" in reason and "hostPath" in reason


def test_gke_mps_needs_host_ipc_so_its_team_namespaces_enforce_privileged_and_say_why(synthesized: Synthesized) -> None:
    from helpers import platform_of
    from k8s_support import synthesize

    platform = platform_of("dev-gcp")
    platform["nodePools"][0]["sharing"] = {"mode": "mps", "replicas": 2}
    platform["scheduling"] = {"teams": [{"name": "vision", "quotas": {}}]}
    result = synthesize(platform, "dev-gcp")
    [namespace] = [n for n in kinds(result, "Namespace") if n["metadata"]["name"] == "vision"]
    assert namespace["metadata"]["labels"][pod_security.ENFORCE_LABEL] == "privileged"
    assert "hostIPC" in namespace["metadata"]["annotations"][pod_security.REASON_ANNOTATION]


def test_kueue_objects_wait_for_the_webhook_gate_which_waits_for_kueue(synthesized: Synthesized) -> None:
    result = synthesized("onprem")
    gate_key = f"{JOB}::lab-gpu-{webhook_gate.GATE_NAME}"
    gate = result.one(JOB, f"lab-gpu-{webhook_gate.GATE_NAME}")
    assert f"{RELEASE}::lab-gpu-kueue" in gate["options"]["dependsOn"]
    kueue_objects = [r for r in result.resources if r["type"].startswith("kubernetes:kueue.x-k8s.io/")]
    assert kueue_objects
    for resource in kueue_objects:
        assert gate_key in resource["options"]["dependsOn"], resource["name"]


def test_team_namespaces_depend_on_kueue_so_destroy_removes_them_and_their_workloads_first(
    synthesized: Synthesized,
) -> None:
    result = synthesized("onprem")
    for team in ("research", "applied"):
        namespace = result.one(NAMESPACE, f"lab-gpu-{team}")
        assert f"{JOB}::lab-gpu-{webhook_gate.GATE_NAME}" in namespace["options"]["dependsOn"]


def test_the_webhook_gate_asks_kueue_s_webhook_service_within_a_bounded_time() -> None:
    script = webhook_gate.gate_script("kueue-system")
    assert "https://kueue-webhook-service.kueue-system.svc:443/" in script
    assert f"seq {webhook_gate.ATTEMPTS}" in script and script.endswith("exit 1")

"""`observability.prometheus: amp`: an AMP workspace, an IRSA role that may only remote write to
it, and the chart's Prometheus writing there with sigv4 (AMP docs, "Set up ingestion from a new
Prometheus server using Helm")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_support import variant
from helpers import REPO, stack_config
from parliament import analyze_policy_string

from components.aws import iam
from components.facts import charts
from infra.mock_outputs import MOCK_ACCOUNT
from infra.synth import Synthesis

HELM = "kubernetes:helm.sh/v3:Release"
WORKSPACE = "aws:amp/workspace:Workspace"
# prometheus-operator v0.93.1 pkg/apis/monitoring/v1/types.go: the RemoteWriteSpec and Sigv4
# fields we set (json names); the chart passes remoteWrite through whole, so the operator is the
# consumer that reads them.
REMOTE_WRITE_FIELDS = {"url", "sigv4", "queueConfig"}
SIGV4_FIELDS = {"region", "accessKey", "secretKey", "profile", "roleArn", "useFIPSSTSEndpoint"}
QUEUE_FIELDS = {"capacity", "minShards", "maxShards", "maxSamplesPerSend", "batchSendDeadline", "maxRetries",
                "minBackoff", "maxBackoff", "retryOnRateLimit", "sampleAgeLimit"}


@pytest.fixture(scope="module")
def amp(tmp_path_factory: pytest.TempPathFactory) -> Synthesis:
    def change(platform: dict[str, Any]) -> None:
        platform["observability"] = {"prometheus": "amp"}

    return variant(tmp_path_factory.mktemp("amp"), change)


REGION = stack_config("dev-aws")["aws:region"]


def _workspace(synthesis: Synthesis) -> tuple[str, str]:
    """The one workspace's endpoint (the stack output) and ARN (as the offline mocks make it)."""
    [workspace] = synthesis.by_type(WORKSPACE)
    return synthesis.outputs["prometheusWorkspaceEndpoint"], f"arn:aws:aps:{REGION}:{MOCK_ACCOUNT}:workspace/ws-{workspace['name']}"


def _values(synthesis: Synthesis) -> dict[str, Any]:
    [values] = [r["inputs"]["values"] for r in synthesis.by_type(HELM) if r["inputs"]["name"] == charts.KUBE_PROMETHEUS_STACK.name]
    return values


def _remote_write_role(synthesis: Synthesis) -> dict[str, Any]:
    [role] = [r for r in synthesis.by_type("aws:iam/role:Role") if r["name"].endswith("-remote-write")]
    return role


def test_amp_declares_one_workspace_and_exports_its_endpoint(amp: Synthesis) -> None:
    [workspace] = amp.by_type(WORKSPACE)
    assert workspace["inputs"]["alias"].endswith("-metrics")
    endpoint, _ = _workspace(amp)
    assert endpoint.endswith(f"/workspaces/ws-{workspace['name']}/")


def test_the_chart_remote_writes_to_the_workspace_with_sigv4(amp: Synthesis) -> None:
    endpoint, _ = _workspace(amp)
    [write] = _values(amp)["prometheus"]["prometheusSpec"]["remoteWrite"]
    assert write["url"] == endpoint + "api/v1/remote_write"
    assert write["sigv4"] == {"region": REGION}
    assert set(write) <= REMOTE_WRITE_FIELDS and set(write["sigv4"]) <= SIGV4_FIELDS
    assert set(write["queueConfig"]) <= QUEUE_FIELDS


def test_prometheus_s_service_account_carries_the_role_the_trust_policy_names(amp: Synthesis) -> None:
    values = _values(amp)["prometheus"]["serviceAccount"]
    role = _remote_write_role(amp)
    assert values["annotations"] == {"eks.amazonaws.com/role-arn": f"arn:aws:iam::{MOCK_ACCOUNT}:role/{role['name']}"}
    trust = json.loads(role["inputs"]["assumeRolePolicy"])
    [statement] = trust["Statement"]
    subjects = [v for k, v in statement["Condition"]["StringEquals"].items() if k.endswith(":sub")]
    assert subjects == [[f"system:serviceaccount:{charts.KUBE_PROMETHEUS_STACK.namespace}:{values['name']}"]]


def test_the_amp_values_are_keys_the_chart_reads(amp: Synthesis) -> None:
    keys = json.loads((REPO / "tests/data/charts/kube-prometheus-stack-88.5.3.keys.json").read_text())
    assert charts.unknown_values_keys(_values(amp), keys) == []


def test_the_remote_write_policy_allows_only_remote_write_on_the_workspace(amp: Synthesis) -> None:
    _, arn = _workspace(amp)
    [policy] = [r for r in amp.by_type("aws:iam/rolePolicy:RolePolicy") if r["name"].endswith("-remote-write")]
    document = json.loads(policy["inputs"]["policy"])
    assert [(s["Action"], s["Resource"]) for s in document["Statement"]] == [("aps:RemoteWrite", arn)]
    assert analyze_policy_string(policy["inputs"]["policy"]).findings == []


def test_parliament_catches_remote_write_scoped_to_the_wrong_resource_type() -> None:
    wrong = iam.prometheus_remote_write_policy("arn:aws:aps:us-east-1:000000000000:rulegroupsnamespace/ws-1/x")
    assert [f.issue for f in analyze_policy_string(json.dumps(wrong)).findings] == ["RESOURCE_MISMATCH"]


def test_the_default_chart_backend_declares_no_workspace(dev: Synthesis) -> None:
    assert dev.by_type(WORKSPACE) == []
    assert "remoteWrite" not in _values(dev)["prometheus"]["prometheusSpec"]
    assert "prometheusWorkspaceEndpoint" not in dev.outputs


def test_the_chart_waits_for_the_remote_write_role_s_policy_not_only_the_role(amp: Synthesis) -> None:
    [release] = [r for r in amp.by_type(HELM) if r["inputs"]["name"] == charts.KUBE_PROMETHEUS_STACK.name]
    [policy] = [r for r in amp.by_type("aws:iam/rolePolicy:RolePolicy") if r["name"].endswith("-remote-write")]
    assert f"aws:iam/rolePolicy:RolePolicy::{policy['name']}" in release["options"]["dependsOn"]

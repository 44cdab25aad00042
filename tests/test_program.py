"""The program wires each cloud's cluster to the same GPU layer."""

from __future__ import annotations

import pytest

from infra.synth import Synthesis

LAYER = "gpu-platform:kubernetes:GpuLayer"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.mark.parametrize("stack", ["dev-aws", "prod-aws", "dev-gcp", "prod-gcp", "onprem"])
def test_every_stack_gets_the_gpu_layer_on_its_cluster_provider(stack: str, synthesized) -> None:
    result: Synthesis = synthesized(stack)
    (layer,) = result.by_type(LAYER)
    children = [r for r in result.resources if r["parent"] == f"{LAYER}::{layer['name']}" and r["custom"]]
    assert children
    providers = {r["provider"] for r in children}
    assert len(providers) == 1 and next(iter(providers)).startswith("pulumi:providers:kubernetes::")


def trainer_annotations(result: Synthesis) -> list[dict[str, str]]:
    accounts = [r for r in result.by_type(SERVICE_ACCOUNT) if r["inputs"]["metadata"]["name"] == "trainer"]
    assert accounts
    return [r["inputs"]["metadata"].get("annotations", {}) for r in accounts]


def test_aws_trainer_accounts_assume_the_bucket_role(synthesized) -> None:
    for annotations in trainer_annotations(synthesized("dev-aws")):
        assert annotations["eks.amazonaws.com/role-arn"].startswith("arn:aws:")


def test_gcp_trainer_accounts_impersonate_the_bucket_service_account(synthesized) -> None:
    result = synthesized("dev-gcp")
    email = result.outputs["trainerServiceAccount"]
    for annotations in trainer_annotations(result):
        assert annotations == {"iam.gke.io/gcp-service-account": email}


def test_existing_cluster_trainer_accounts_carry_no_cloud_binding(synthesized) -> None:
    assert all(a == {} for a in trainer_annotations(synthesized("onprem")))


def test_gke_collects_dcgm_itself_so_the_exporter_chart_is_skipped(synthesized) -> None:
    charts = {r["inputs"]["chart"] for r in synthesized("dev-gcp").by_type(RELEASE)}
    assert "dcgm-exporter" not in charts
    assert "dcgm-exporter" in {r["inputs"]["chart"] for r in synthesized("dev-aws").by_type(RELEASE)}

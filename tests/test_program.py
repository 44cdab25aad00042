"""The program wires each cloud's cluster to the same GPU layer."""

from __future__ import annotations

from pathlib import Path

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


def test_gcp_trainer_accounts_each_act_as_their_team_s_service_account(synthesized) -> None:
    result = synthesized("dev-gcp")
    emails = result.outputs["trainerServiceAccounts"]
    # Besides the trainers' accounts only Kueue's and JobSet's metrics scrapers (components.observability.gmp_https).
    scrapers = {"gpu-platform-kueue-scraper", "gpu-platform-jobset-scraper"}
    accounts = [a for a in result.by_type("kubernetes:core/v1:ServiceAccount") if a["inputs"]["metadata"]["name"] not in scrapers]
    assert {a["inputs"]["metadata"]["namespace"] for a in accounts} == set(emails)
    for account in accounts:
        namespace = account["inputs"]["metadata"]["namespace"]
        assert account["inputs"]["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": emails[namespace]}
    assert len(set(emails.values())) == len(emails)


def test_existing_cluster_trainer_accounts_carry_no_cloud_binding(synthesized) -> None:
    assert all(a == {} for a in trainer_annotations(synthesized("onprem")))


def test_gke_collects_dcgm_itself_so_the_exporter_chart_is_skipped(synthesized) -> None:
    charts = {r["inputs"]["chart"] for r in synthesized("dev-gcp").by_type(RELEASE)}
    assert "dcgm-exporter" not in charts
    assert "dcgm-exporter" in {r["inputs"]["chart"] for r in synthesized("dev-aws").by_type(RELEASE)}


def synthesize_with_trainer_build(stack: str) -> Synthesis:
    import dataclasses

    from infra import program, stackfile, synth

    repo = Path(__file__).resolve().parents[1]
    stack_file = stackfile.read(stack, repo)
    platform = {**stack_file.config["gpu-platform:platform"], "trainer": {"image": "build"}}
    varied = dataclasses.replace(stack_file, config={**stack_file.config, "gpu-platform:platform": platform})
    return synth.run(program.main, "gpu-platform", stack, varied.pulumi_config())


@pytest.mark.parametrize(
    ("stack", "registry_prefix", "address", "username"),
    [
        ("dev-aws", "000000000000.dkr.ecr.us-west-2.mock.internal/", "https://000000000000.dkr.ecr.us-west-2.mock.internal", "AWS"),
        ("dev-gcp", "us-central1-docker.pkg.dev/my-ml-dev/", "us-central1-docker.pkg.dev", "oauth2accesstoken"),
    ],
)
def test_trainer_build_pushes_a_content_tagged_image_to_the_stack_s_registry(
    stack: str, registry_prefix: str, address: str, username: str
) -> None:
    from components.trainer_image import CONTEXT_DIR, content_tag

    result = synthesize_with_trainer_build(stack)
    (image,) = result.by_type("docker-build:index:Image")
    (tag,) = image["inputs"]["tags"]
    # No EFA pool in the dev stacks: the plain `trainer` target.
    context = Path(__file__).resolve().parents[1] / CONTEXT_DIR
    assert tag.startswith(registry_prefix) and tag.endswith(f":trainer-{content_tag(context)}")
    (login,) = image["inputs"]["registries"]
    assert (login["address"], login["username"], login["password"]) == (address, username, "[secret]")
    assert result.outputs["trainerImage"].endswith("@sha256:" + "0" * 64)


def test_no_image_is_built_unless_the_spec_asks(synthesized) -> None:
    assert not synthesized("dev-aws").by_type("docker-build:index:Image")


def test_gke_runs_the_gcs_fuse_driver_that_jobs_mount_the_bucket_with(synthesized) -> None:
    (cluster,) = synthesized("dev-gcp").by_type("gcp:container/cluster:Cluster")
    assert cluster["inputs"]["addonsConfig"]["gcsFuseCsiDriverConfig"] == {"enabled": True}

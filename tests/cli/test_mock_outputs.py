"""The mock engine answers what the cloud would derive from the declared resources: a
registry URL from the repository's declared name, an image ref from its first tag."""

from __future__ import annotations

from typing import Callable

import pytest

from infra import mock_outputs, synth

Synthesized = Callable[[str], synth.Synthesis]


def test_the_ecr_registry_url_is_the_declared_repository_name(synthesized: Synthesized) -> None:
    result = synthesized("dev-aws")
    (repository,) = result.by_type("aws:ecr/repository:Repository")
    assert repository["inputs"]["name"] == "ml-dev/trainer"
    assert result.outputs["registryUrl"] == "000000000000.dkr.ecr.us-west-2.mock.internal/ml-dev/trainer"


def test_the_artifact_registry_url_is_the_declared_repository_id(synthesized: Synthesized) -> None:
    result = synthesized("dev-gcp")
    (repository,) = result.by_type("gcp:artifactregistry/repository:Repository")
    repository_id = repository["inputs"]["repositoryId"]
    assert result.outputs["registryUrl"] == f"us-central1-docker.pkg.dev/my-ml-dev/{repository_id}"


def test_a_service_account_email_is_its_declared_account_id(synthesized: Synthesized) -> None:
    result = synthesized("dev-gcp")
    account_ids = {r["inputs"]["accountId"] for r in result.by_type("gcp:serviceaccount/account:Account")}
    emails = result.outputs["trainerServiceAccounts"].values()
    assert emails and {email.split("@")[0] for email in emails} <= account_ids


def test_a_pushed_image_s_ref_is_its_first_tag_with_the_digest() -> None:
    inputs = {"tags": ["000000000000.dkr.ecr.us-west-2.mock.internal/ml-dev/trainer:sha-0123456789abcdef"]}
    outputs = mock_outputs.resource_outputs("docker-build:index:Image", "ml-dev-trainer", inputs)
    assert outputs["ref"] == inputs["tags"][0] + "@sha256:" + "0" * 64


@pytest.mark.parametrize(
    ("type_token", "output", "expected"),
    [
        ("aws:ecr/repository:Repository", "repositoryUrl", ".mock.internal/ml-dev-trainer"),
        ("aws:s3/bucket:Bucket", "arn", "arn:aws:s3:::ml-dev-trainer"),
    ],
)
def test_an_undeclared_name_is_the_resource_s_name_as_pulumi_autonames(type_token: str, output: str, expected: str) -> None:
    assert mock_outputs.resource_outputs(type_token, "ml-dev-trainer", {})[output].endswith(expected)

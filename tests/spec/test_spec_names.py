"""Names in the stack file: no control characters anywhere, every field valid for the target it
ends up in, and a derived name too long for its cloud refused with the derived name shown."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import platform_of

from components.spec import SpecError, parse_spec

SOURCE = "stacks/Pulumi.test.yaml"


def problems(raw: Any) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, SOURCE)
    return caught.value.render().splitlines()


@pytest.mark.parametrize("name", ["ml-dev\n", "ml\x00dev", "ml\x1bdev", "ml\x85dev", "ml\ud800dev"])
def test_a_control_character_in_the_cluster_name_is_refused(name: str) -> None:
    raw = platform_of("dev-aws")
    raw["cluster"]["name"] = name
    assert problems(raw) == [
        f"{SOURCE}: platform.cluster.name: expected text without control characters, got {name!r}"
        f" (U+{ord(next(c for c in name if not c.isalnum() and c != '-')):04X})"
    ]


def test_a_control_character_in_any_string_is_refused() -> None:
    raw = platform_of("onprem")
    raw["scheduling"]["teams"][0]["members"] = ["group:research\t"]
    raw["nodePools"][1]["description\n"] = "x"
    lines = problems(raw)
    assert f"{SOURCE}: platform.scheduling.teams[0].members[0]: expected text without control characters," \
        " got 'group:research\\t' (U+0009)" in lines
    assert any(line.startswith(f"{SOURCE}: platform.nodePools[1].'description\\n':") for line in lines)


@pytest.mark.parametrize("bucket", ["My_Bucket!!", "ab", "b" * 70, ""])
def test_a_bucket_name_the_cloud_refuses_is_refused(bucket: str) -> None:
    raw = platform_of("dev-aws")
    raw["storage"] = {"bucketName": bucket}
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.storage.bucketName: expected an S3 bucket name")
    assert line.endswith(f"got {bucket!r}")


def test_gcs_bucket_names_follow_cloud_storage() -> None:
    raw = platform_of("dev-gcp")
    raw["storage"] = {"bucketName": "google-datasets"}
    (line,) = problems(raw)
    assert "platform.storage.bucketName: expected a Cloud Storage bucket name" in line


def test_a_long_cluster_name_that_makes_a_node_group_prefix_too_long_shows_the_derived_name() -> None:
    raw = platform_of("dev-aws")
    raw["cluster"]["name"] = "c" * 40
    lines = problems(raw)
    assert (
        f"{SOURCE}: platform.cluster.name: expected an EKS node group name prefix (the provider appends a 26-character"
        f" suffix), 1-37 characters; got the derived eks-node-group-prefix name '{'c' * 40}-system-'"
    ) in lines


def test_a_long_team_name_that_makes_an_iam_role_too_long_is_refused() -> None:
    raw = platform_of("prod-aws")
    raw["scheduling"]["teams"][0]["name"] = "t" * 40
    raw["scheduling"]["teams"][0]["quotas"] = raw["scheduling"]["teams"][0]["quotas"]
    lines = problems(raw)
    assert any(
        line.startswith(f"{SOURCE}: platform.scheduling.teams[0].name: expected an IAM role's Pulumi name")
        and f"-storage-trainer-{'t' * 40}'" in line
        for line in lines
    )


def test_invalid_node_selector_labels_are_refused() -> None:
    raw = platform_of("onprem")
    raw["nodePools"][0]["nodeSelector"] = {"bad key!": "ok", "good": "bad value!"}
    lines = problems(raw)
    assert any(line.startswith(f"{SOURCE}: platform.nodePools[0].nodeSelector.bad key!: expected a label key") for line in lines)
    assert any(line.startswith(f"{SOURCE}: platform.nodePools[0].nodeSelector.good: expected a label value") for line in lines)


def test_an_existing_network_with_an_invalid_name_is_refused() -> None:
    raw = platform_of("dev-gcp")
    raw["gcp"]["network"] = {
        "existing": {"network": "Bad Name!", "subnetwork": "sub", "podsRange": "pods", "servicesRange": "svc"}
    }
    assert any(
        line.startswith(f"{SOURCE}: platform.gcp.network.existing.network: expected a Compute Engine name")
        for line in problems(raw)
    )


@pytest.mark.parametrize("image", ["ghcr.io/Acme/trainer:1", "ghcr.io/" + "a" * 300 + ":1", "trainer:\n"])
def test_a_trainer_image_that_is_no_image_reference_is_refused(image: str) -> None:
    raw = platform_of("onprem")
    raw["trainer"] = {"image": image}
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.trainer.image: expected ")


def test_aws_system_node_instance_type_is_checked() -> None:
    raw = platform_of("dev-aws")
    raw.setdefault("aws", {})["systemNodes"] = {"instanceType": "not a type; rm -rf /"}
    assert f"{SOURCE}: platform.aws.systemNodes.instanceType: expected an EC2 instance type like m6i.large" \
        " (<family>.<size>), got 'not a type; rm -rf /'" in problems(raw)


def test_gcp_system_node_machine_type_is_checked() -> None:
    raw = platform_of("dev-gcp")
    raw["gcp"]["systemNodes"] = {"machineType": "bogus type!!"}
    assert any(line.startswith(f"{SOURCE}: platform.gcp.systemNodes.machineType: expected a Compute Engine") for line in problems(raw))

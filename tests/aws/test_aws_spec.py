"""AWS-only spec rules: what a stack file may say about the AWS wing, and what it is told when wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.spec import PlatformSpec, SpecError, parse_spec
from infra import stackfile
from helpers import platform_of, stack_config

SOURCE = "stacks/Pulumi.test.yaml"
REGION = "us-east-1"


def problems(raw: dict[str, Any], region: str | None = REGION) -> dict[str, str]:
    """path -> message of every problem in `raw` (empty when valid)."""
    try:
        parse_spec(raw, SOURCE, region=region)
    except SpecError as exc:
        return {p.path: p.message for p in exc.problems}
    return {}


def parsed(raw: dict[str, Any]) -> PlatformSpec:
    return parse_spec(raw, SOURCE, region=REGION)


@pytest.fixture
def prod() -> dict[str, Any]:
    return platform_of("prod-aws")


@pytest.fixture
def dev() -> dict[str, Any]:
    return platform_of("dev-aws")


def test_aws_only_pool_fields_default_to_al2023_200gib_no_efa(dev: dict[str, Any]) -> None:
    pool = parsed(dev).node_pools[0]
    assert (pool.ami_type, pool.root_volume_gib, pool.efa) == ("AL2023_x86_64_NVIDIA", 200, False)


def test_efa_on_an_instance_without_efa_is_an_error(dev: dict[str, Any]) -> None:
    dev["nodePools"][0]["efa"] = True  # g6.xlarge
    assert "g6.xlarge has no EFA" in problems(dev)["platform.nodePools[0].efa"]


def test_efa_on_an_efa_instance_is_accepted(prod: dict[str, Any]) -> None:
    assert problems(prod) == {}


def test_an_efa_pool_in_two_zones_is_an_error(prod: dict[str, Any]) -> None:
    prod["aws"] = {"zones": ["us-east-1a", "us-east-1b"]}
    prod["nodePools"][0]["zones"] = ["us-east-1a", "us-east-1b"]
    assert "one zone" in problems(prod)["platform.nodePools[0].zones"]


def test_a_pool_zone_outside_the_region_is_an_error(dev: dict[str, Any]) -> None:
    dev["aws"] = {"zones": ["us-east-1a", "us-east-1b"]}
    dev["nodePools"][0]["zones"] = ["us-east-2a"]
    message = problems(dev)["platform.nodePools[0].zones[0]"]
    assert "not an availability zone of region us-east-1" in message and "aws:region" in message


def test_a_platform_zone_outside_the_region_is_an_error(dev: dict[str, Any]) -> None:
    dev["aws"] = {"zones": ["us-east-1a", "eu-west-1b"]}
    assert "eu-west-1b" in problems(dev)["platform.aws.zones[1]"]


def test_zones_are_not_checked_without_a_region(dev: dict[str, Any]) -> None:
    dev["aws"] = {"zones": ["eu-west-1a", "eu-west-1b"]}
    assert problems(dev, region=None) == {}


def test_pool_zones_need_the_platform_zones_listed(dev: dict[str, Any]) -> None:
    dev["nodePools"][0]["zones"] = ["us-east-1a"]
    assert "platform.aws.zones" in problems(dev)["platform.nodePools[0].zones"]


def test_a_pool_zone_must_be_one_of_the_platform_zones(dev: dict[str, Any]) -> None:
    dev["aws"] = {"zones": ["us-east-1a", "us-east-1b"]}
    dev["nodePools"][0]["zones"] = ["us-east-1c"]
    assert "not one of the cluster's zones" in problems(dev)["platform.nodePools[0].zones[0]"]


def test_one_platform_zone_is_too_few_for_eks(dev: dict[str, Any]) -> None:
    dev["aws"] = {"zones": ["us-east-1a"]}
    assert "at least two zones" in problems(dev)["platform.aws.zones"]


def test_aws_pool_fields_on_another_cloud_are_errors() -> None:
    gcp = platform_of("dev-gcp")
    gcp["nodePools"][0]["amiType"] = "AL2023_x86_64_NVIDIA"
    gcp["nodePools"][0]["efa"] = False
    found = problems(gcp)
    assert found["platform.nodePools[0].amiType"] == "only for cloud: aws, not gcp"
    assert found["platform.nodePools[0].efa"] == "only for cloud: aws, not gcp"


def test_the_aws_section_on_another_cloud_is_an_error() -> None:
    gcp = platform_of("dev-gcp")
    gcp["aws"] = {}
    assert problems(gcp)["platform.aws"] == "only for cloud: aws, not gcp"


def test_prod_endpoint_is_private_by_default(prod: dict[str, Any]) -> None:
    # The example opens its endpoint to the fleet manager's range; the default is what is left without it.
    del prod["aws"]
    assert parsed(prod).aws_settings.endpoint_public("prod") is False


def test_prod_cannot_open_the_endpoint_to_everyone(prod: dict[str, Any]) -> None:
    prod["aws"] = {"publicEndpoint": True}
    assert "whole internet" in problems(prod)["platform.aws.publicEndpoint"]


def test_prod_cannot_list_0_0_0_0_as_an_allowed_range(prod: dict[str, Any]) -> None:
    prod["aws"] = {"publicEndpoint": True, "publicAccessCidrs": ["203.0.113.0/24", "0.0.0.0/0"]}
    assert "platform.aws.publicEndpoint" in problems(prod)


def test_prod_may_open_the_endpoint_to_listed_ranges(prod: dict[str, Any]) -> None:
    prod["aws"] = {"publicEndpoint": True, "publicAccessCidrs": ["203.0.113.0/24"]}
    assert problems(prod) == {}


def test_allowed_ranges_without_a_public_endpoint_are_an_error(prod: dict[str, Any]) -> None:
    prod["aws"] = {"publicAccessCidrs": ["203.0.113.0/24"]}
    assert "endpoint is private" in problems(prod)["platform.aws.publicAccessCidrs"]


def test_an_allowed_range_must_be_a_cidr(dev: dict[str, Any]) -> None:
    dev["aws"] = {"publicAccessCidrs": ["office"]}
    assert "IPv4 CIDR" in problems(dev)["platform.aws.publicAccessCidrs[0]"]


def test_bottlerocket_pools_make_the_device_plugin_managed(dev: dict[str, Any]) -> None:
    for pool in dev["nodePools"]:
        pool["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"
        pool.pop("sharing", None)
    # Without sharing the pools hold fewer GPU slots than the example teams' quotas.
    dev.pop("scheduling", None)
    assert parsed(dev).device_plugin == "managed"


def test_al2023_pools_keep_the_nvidia_device_plugin(dev: dict[str, Any]) -> None:
    assert parsed(dev).device_plugin == "nvidia"


def test_mixing_bottlerocket_and_al2023_pools_is_an_error(dev: dict[str, Any]) -> None:
    dev["nodePools"][1]["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"
    assert "one AMI family" in problems(dev)["platform.nodePools"]


def test_the_nvidia_plugin_on_bottlerocket_is_an_error(dev: dict[str, Any]) -> None:
    dev["devicePlugin"] = "nvidia"
    dev["nodePools"][1]["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"
    assert "advertised twice" in problems(dev)["platform.nodePools[1].amiType"]


def test_a_managed_plugin_on_al2023_is_an_error(dev: dict[str, Any]) -> None:
    dev["devicePlugin"] = "managed"
    assert "no GPU would be advertised" in problems(dev)["platform.nodePools[0].amiType"]


def test_gpu_sharing_on_bottlerocket_is_an_error(dev: dict[str, Any]) -> None:
    for pool in dev["nodePools"]:
        pool["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"
    assert "AL2023_x86_64_NVIDIA" in problems(dev)["platform.nodePools[0].sharing.mode"]


def test_an_arm_ami_on_an_x86_instance_is_an_error(dev: dict[str, Any]) -> None:
    dev["nodePools"][1]["amiType"] = "AL2023_ARM_64_NVIDIA"
    assert "x86_64" in problems(dev)["platform.nodePools[1].amiType"]


def test_an_unknown_ami_type_lists_the_choices(dev: dict[str, Any]) -> None:
    dev["nodePools"][1]["amiType"] = "AL2_x86_64_GPU"
    assert "AL2023_x86_64_NVIDIA" in problems(dev)["platform.nodePools[1].amiType"]


def test_a_root_volume_below_20_gib_is_an_error(dev: dict[str, Any]) -> None:
    dev["nodePools"][0]["rootVolumeGiB"] = 8
    assert "platform.nodePools[0].rootVolumeGiB" in problems(dev)


def test_a_pool_may_not_take_the_system_node_groups_name(dev: dict[str, Any]) -> None:
    dev["nodePools"][0]["name"] = "system"
    assert "add-on node group" in problems(dev)["platform.nodePools[0].name"]


def test_an_existing_vpc_needs_subnets_in_two_zones(dev: dict[str, Any]) -> None:
    dev["aws"] = {"network": {"vpcId": "vpc-0123456789abcdef0", "subnetIds": {"us-east-1a": "subnet-0123456789abcdef0"}}}
    assert "at least two zones" in problems(dev)["platform.aws.network.subnetIds"]


def test_an_existing_subnet_outside_the_region_is_an_error(dev: dict[str, Any]) -> None:
    dev["aws"] = {
        "network": {
            "vpcId": "vpc-0123456789abcdef0",
            "subnetIds": {"us-east-1a": "subnet-0123456789abcdef0", "us-west-2b": "subnet-0123456789abcdef1"},
        }
    }
    assert "us-west-2b" in problems(dev)["platform.aws.network.subnetIds.us-west-2b"]


def test_subnets_without_a_vpc_are_an_error(dev: dict[str, Any]) -> None:
    dev["aws"] = {"network": {"subnetIds": {"us-east-1a": "subnet-0123456789abcdef0"}}}
    assert "only with vpcId" in problems(dev)["platform.aws.network.subnetIds"]


def test_a_new_vpc_smaller_than_a_slash_20_is_an_error(dev: dict[str, Any]) -> None:
    dev["aws"] = {"network": {"vpcCidr": "10.0.0.0/24"}}
    assert "/20 or larger" in problems(dev)["platform.aws.network.vpcCidr"]


def test_an_admin_must_be_an_iam_role_or_user_arn(dev: dict[str, Any]) -> None:
    dev["aws"] = {"admins": ["arn:aws:sts::111122223333:assumed-role/admin/me", "arn:aws:iam::111122223333:role/admins"]}
    found = problems(dev)
    assert "platform.aws.admins[0]" in found and "platform.aws.admins[1]" not in found


def test_a_misspelt_aws_key_suggests_the_right_one(dev: dict[str, Any]) -> None:
    dev["aws"] = {"publicAcessCidrs": []}
    assert "did you mean 'publicAccessCidrs'" in problems(dev)["platform.aws.publicAcessCidrs"]


def test_all_aws_problems_are_reported_together(dev: dict[str, Any]) -> None:
    dev["nodePools"][0]["efa"] = True
    dev["aws"] = {"zones": ["us-east-1a", "us-west-2b"]}
    assert {"platform.nodePools[0].efa", "platform.aws.zones[1]"} <= set(problems(dev))


def test_an_aws_stack_file_without_a_region_is_an_error(tmp_path: Path) -> None:
    config = stack_config("dev-aws")
    del config["aws:region"]
    path = tmp_path / "Pulumi.no-region.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    with pytest.raises(SpecError) as raised:
        stackfile.read(str(path), tmp_path).spec()
    assert [p.path for p in raised.value.problems] == ["aws:region"]


def test_the_stack_files_region_reaches_the_zone_rules(tmp_path: Path) -> None:
    config = stack_config("dev-aws")
    config["gpu-platform:platform"]["aws"] = {"zones": ["us-east-1a", "us-east-1b"]}
    path = tmp_path / "Pulumi.wrong-zones.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    with pytest.raises(SpecError) as raised:
        stackfile.read(str(path), tmp_path).spec()
    assert "region us-west-2" in raised.value.problems[0].message

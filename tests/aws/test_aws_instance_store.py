"""Instance store: GPU launch templates tell nodeadm to stripe the NVMe disks (RAID0) and put
containerd, the kubelet and pod logs there; where no instance store is used, the EBS volume gets
provisioned gp3 performance. Read back the way EC2 and nodeadm read the user data."""

from __future__ import annotations

import base64
import dataclasses
import email
from email.message import Message
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from aws_support import variant
from helpers import REPO

from components.aws import karpenter_plan, user_data
from components.facts import aws as aws_facts
from components.facts import catalog
from components.pools import derive_pools
from infra import stackfile
from infra.synth import Synthesis

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"

# The NodeConfig fields nodeadm reads (awslabs/amazon-eks-ami nodeadm/api/v1alpha1/nodeconfig_types.go:
# NodeConfigSpec cluster/containerd/instance/kubelet/featureGates, InstanceOptions.localStorage,
# LocalStorageOptions strategy (enum RAID0, RAID10, Mount), mountPath, disabledMounts (enum
# Containerd, PodLogs)); anything else is a field nodeadm would never see.
NODECONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "node.eks.aws/v1alpha1"},
        "kind": {"const": "NodeConfig"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "cluster": {"type": "object"},
                "containerd": {"type": "object"},
                "kubelet": {"type": "object"},
                "featureGates": {"type": "object"},
                "instance": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "localStorage": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "strategy": {"enum": ["RAID0", "RAID10", "Mount"]},
                                "mountPath": {"type": "string"},
                                "disabledMounts": {"type": "array", "items": {"enum": ["Containerd", "PodLogs"]}},
                            },
                        }
                    },
                },
            },
        },
    },
}


def template(result: Synthesis, name: str) -> dict[str, Any]:
    return result.one(LAUNCH_TEMPLATE, name)["inputs"]


def node_configs(encoded: str) -> list[dict[str, Any]]:
    """The NodeConfig documents of the user data, as nodeadm finds them: base64 (EC2), a MIME
    multipart/mixed document, the parts of content type application/node.eks.aws."""
    message: Message = email.message_from_string(base64.b64decode(encoded).decode())
    assert message.is_multipart() and message.get_content_type() == "multipart/mixed"
    parts = [p for p in message.walk() if p.get_content_type() == "application/node.eks.aws"]
    return [doc for part in parts for doc in yaml.safe_load_all(str(part.get_payload())) if doc is not None]


@pytest.mark.parametrize("pool", ["h100-train", "h200-train"])
def test_a_p5_launch_template_s_user_data_is_a_nodeconfig_striping_the_instance_store(prod: Synthesis, pool: str) -> None:
    (config,) = node_configs(template(prod, f"ml-prod-{pool}")["userData"])
    jsonschema.validate(config, NODECONFIG_SCHEMA)
    assert config["spec"] == {"instance": {"localStorage": {"strategy": "RAID0"}}}


def test_the_user_data_leaves_the_cluster_s_coordinates_to_the_managed_node_group(prod: Synthesis) -> None:
    (config,) = node_configs(template(prod, "ml-prod-h100-train")["userData"])
    assert "cluster" not in config["spec"]


def test_a_volume_the_instance_store_relieves_keeps_gp3_s_baseline(prod: Synthesis) -> None:
    (device,) = template(prod, "ml-prod-h100-train")["blockDeviceMappings"]
    assert "iops" not in device["ebs"] and "throughput" not in device["ebs"]


def test_the_system_node_group_s_template_is_unchanged(prod: Synthesis) -> None:
    system = template(prod, "ml-prod-system")
    (device,) = system["blockDeviceMappings"]
    assert "userData" not in system
    assert "iops" not in device["ebs"] and "throughput" not in device["ebs"]


def test_a_type_without_instance_store_gets_no_user_data() -> None:
    shape = dataclasses.replace(catalog.INSTANCE_TYPES["p5.48xlarge"], instance_store=(0, 0))
    assert user_data.launch_template_user_data(shape, "AL2023_x86_64_NVIDIA") is None


def test_bottlerocket_pools_get_no_nodeadm_user_data_and_a_provisioned_data_volume(tmp_path: Path) -> None:
    def bottlerocket(platform: dict[str, Any]) -> None:
        for pool in platform["nodePools"]:
            pool["amiType"] = "BOTTLEROCKET_x86_64_NVIDIA"
            pool.pop("sharing", None)
        platform.pop("scheduling", None)

    launch = template(variant(tmp_path, bottlerocket), "ml-dev-l4-train")
    (device,) = launch["blockDeviceMappings"]
    assert "userData" not in launch
    assert (device["ebs"]["iops"], device["ebs"]["throughput"]) == (aws_facts.GP3_IOPS, aws_facts.GP3_THROUGHPUT_MIBS)


def test_the_provisioned_gp3_performance_is_within_gp3_s_limits() -> None:
    # EBS User Guide, "General Purpose SSD volumes": 3000-16000 IOPS, 125-1000 MiB/s, at most
    # 0.25 MiB/s per IOPS.
    assert 3000 <= aws_facts.GP3_IOPS <= 16000
    assert 125 <= aws_facts.GP3_THROUGHPUT_MIBS <= 1000
    assert aws_facts.GP3_THROUGHPUT_MIBS <= aws_facts.GP3_IOPS // 4


@pytest.mark.parametrize("name", ["p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"])
def test_the_8_gpu_p5_family_carries_eight_nvme_disks_of_3800_gb_as_the_ec2_api_counts_them(name: str) -> None:
    # DescribeInstanceTypes TotalSizeInGB 30400 (Karpenter's instance-local-nvme label).
    assert catalog.INSTANCE_TYPES[name].instance_store == (8, 3800)


def test_a_p5_4xlarge_carries_one_nvme_disk_of_3800_gb() -> None:
    assert catalog.INSTANCE_TYPES["p5.4xlarge"].instance_store == (1, 3800)


def test_on_al2023_every_catalog_aws_type_stripes_its_instance_store_so_only_bottlerocket_takes_the_provisioned_gp3() -> None:
    # docs/aws.md: the 6000/500 gp3 path is the Bottlerocket pools' alone.
    aws_types = [t for t in catalog.INSTANCE_TYPES.values() if t.cloud == "aws"]
    assert all(user_data.uses_instance_store(t, "AL2023_x86_64_NVIDIA") for t in aws_types)
    assert not any(user_data.uses_instance_store(t, "BOTTLEROCKET_x86_64_NVIDIA") for t in aws_types)


@pytest.mark.parametrize(("store", "policy"), [((1, 250), "RAID0"), ((0, 0), None)])
def test_karpenter_s_instance_store_policy_reads_the_same_catalog_column(store: tuple[int, int], policy: str | None) -> None:
    spec = stackfile.read("dev-aws-karpenter", REPO).spec()
    pool, spec_pool = derive_pools(spec)[0], spec.node_pools[0]
    assert pool.instance_type is not None
    pool = dataclasses.replace(pool, instance_type=dataclasses.replace(pool.instance_type, instance_store=store))
    assert karpenter_plan.node_class(spec_pool, pool, "ml-dev", "role").get("instanceStorePolicy") == policy


def test_a_nodeconfig_field_nodeadm_does_not_read_fails_the_schema() -> None:
    misspelt = {**user_data.node_config(), "spec": {"instance": {"storage": {"strategy": "RAID0"}}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(misspelt, NODECONFIG_SCHEMA)

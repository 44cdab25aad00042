"""The AWS wing's pure decisions: autoscaler tags and values, subnets, EFA, kubeconfig, pins."""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

from helpers import platform_of

from components import node_resources
from components.aws import plan
from components.facts import aws as aws_facts
from components.facts import catalog
from components.pools import derive_pools
from components.spec import PlatformSpec, parse_spec


def spec_of(raw: dict[str, Any]) -> PlatformSpec:
    return parse_spec(raw, "test", region="us-east-1")


def dev_pools() -> dict[str, Any]:
    return {pool.name: pool for pool in derive_pools(spec_of(platform_of("dev-aws")))}


def test_asg_tags_advertise_every_extended_resource_a_job_may_request() -> None:
    pool = dev_pools()["l4-train"]
    tags = plan.asg_tags("ml-dev", pool, pool.labels, {"nvidia.com/gpu": 4, "vpc.amazonaws.com/efa": 1})
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/nvidia.com/gpu"] == "4"
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa"] == "1"


def test_asg_tags_template_the_pools_labels_and_taint() -> None:
    pool = dev_pools()["l4-train"]
    tags = plan.asg_tags("ml-dev", pool, {"gpu-platform.io/pool": "l4-train"}, {})
    assert tags["k8s.io/cluster-autoscaler/node-template/label/gpu-platform.io/pool"] == "l4-train"
    assert tags["k8s.io/cluster-autoscaler/node-template/taint/nvidia.com/gpu"] == "present:NoSchedule"


def test_asg_tags_carry_the_auto_discovery_tags() -> None:
    pool = dev_pools()["l4-train"]
    tags = plan.asg_tags("ml-dev", pool, {}, {})
    assert tags["k8s.io/cluster-autoscaler/enabled"] == "true"
    assert tags["k8s.io/cluster-autoscaler/ml-dev"] == "owned"


def test_node_labels_add_the_accelerator_to_the_pool_labels() -> None:
    raw = platform_of("dev-aws")
    spec = spec_of(raw)
    pool = derive_pools(spec)[1]
    labels = plan.node_labels(pool, spec.node_pools[1])
    assert labels == {**pool.labels, "k8s.amazonaws.com/accelerator": "nvidia-l4"}


def test_efa_pools_carry_the_efa_label() -> None:
    spec = spec_of(platform_of("prod-aws"))
    labels = plan.node_labels(derive_pools(spec)[0], spec.node_pools[0])
    assert labels[aws_facts.EFA_LABEL] == "true"


def test_spot_pools_rank_above_on_demand_pools() -> None:
    raw = platform_of("dev-aws")
    raw["nodePools"][1]["capacity"] = "on-demand"
    pools = derive_pools(spec_of(raw))
    table = plan.expander_priorities(pools, {"l4-shared": "eks-a-1", "l4-train": "eks-b-2"}, "eks-sys-3")
    assert table == {"1": ["^eks-sys-3$"], "10": ["^eks-b-2$"], "20": ["^eks-a-1$"]}


def test_priority_patterns_match_only_their_asg() -> None:
    pattern = plan.exact_match("eks-ml-dev-l4.x-00")
    assert re.match(pattern, "eks-ml-dev-l4.x-00")
    assert not re.match(pattern, "eks-ml-dev-l4Xx-00") and not re.match(pattern, "eks-ml-dev-l4.x-00-b")


def test_gpu_scale_down_threshold_spares_nodes_running_one_gpu_pod() -> None:
    pools = derive_pools(spec_of(platform_of("prod-aws")))
    threshold = float(plan.gpu_scale_down_threshold(pools))
    assert all(1 / pool.slots_per_node > threshold for pool in pools)
    assert threshold > 0


def test_autoscaler_runs_the_image_of_the_cluster_minor() -> None:
    values = plan.autoscaler_values("c", "us-east-1", "1.34", "arn", {}, list(dev_pools().values()))
    assert values["image"]["tag"].startswith("v1.34.")


def test_every_supported_minor_has_autoscaler_and_addon_pins() -> None:
    minors = set(catalog.SUPPORTED_KUBERNETES_VERSIONS)
    assert set(aws_facts.CLUSTER_AUTOSCALER_IMAGE_TAGS) == minors
    assert set(aws_facts.ADDON_VERSIONS) == minors
    assert all(set(v) == {"vpc-cni", "kube-proxy", "coredns", "aws-ebs-csi-driver", "aws-efs-csi-driver"} for v in aws_facts.ADDON_VERSIONS.values())


def test_kube_proxy_pins_follow_the_minor() -> None:
    assert all(versions["kube-proxy"].startswith(f"v{minor}.") for minor, versions in aws_facts.ADDON_VERSIONS.items())


def test_subnets_are_disjoint_and_inside_the_vpc() -> None:
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
    subnets = plan.subnet_plan("10.0.0.0/16", zones)
    networks = [ipaddress.IPv4Network(c) for s in subnets for c in (s.private_cidr, s.public_cidr)]
    vpc = ipaddress.IPv4Network("10.0.0.0/16")
    assert all(n.subnet_of(vpc) for n in networks)
    assert not any(a.overlaps(b) for i, a in enumerate(networks) for b in networks[i + 1 :])
    assert [s.zone for s in subnets] == zones


def test_private_subnets_get_a_quarter_of_a_16_each() -> None:
    subnets = plan.subnet_plan("10.0.0.0/16", ["a", "b", "c"])
    assert [s.private_cidr for s in subnets] == ["10.0.0.0/18", "10.0.64.0/18", "10.0.128.0/18"]


def test_six_zones_still_fit_a_slash_20() -> None:
    subnets = plan.subnet_plan("10.0.0.0/20", [f"z{i}" for i in range(6)])
    assert len({s.private_cidr for s in subnets} | {s.public_cidr for s in subnets}) == 12


def test_p5_gets_one_efa_per_network_card() -> None:
    interfaces = node_resources.efa_interfaces("p5.48xlarge")
    assert len(interfaces) == 32
    assert interfaces[0] == node_resources.EfaInterface(0, 0, "efa")
    assert {i.interface_type for i in interfaces[1:]} == {"efa-only"}
    assert sorted(i.network_card_index for i in interfaces) == list(range(32))


def test_a_single_card_efa_type_gets_one_efa() -> None:
    assert node_resources.efa_interfaces("g6.8xlarge") == [node_resources.EfaInterface(0, 0, "efa")]


def test_kubeconfig_authenticates_with_aws_eks_get_token() -> None:
    config = json.loads(plan.kubeconfig("ml-dev", "https://x", "Y2E=", "us-west-2"))
    user = config["users"][0]["user"]["exec"]
    assert user["command"] == "aws"
    assert user["args"][:2] == ["eks", "get-token"]
    assert user["args"][user["args"].index("--cluster-name") + 1] == "ml-dev"
    assert user["args"][user["args"].index("--region") + 1] == "us-west-2"


def test_each_team_has_a_trainer_identity_of_its_own() -> None:
    raw = platform_of("dev-aws")
    raw["scheduling"] = {"teams": [{"name": "vision"}, {"name": "nlp"}]}
    identities = plan.trainer_identities(spec_of(raw))
    assert [(i.resource_suffix, i.subject, i.team) for i in identities] == [
        ("trainer-vision", "system:serviceaccount:vision:trainer", "vision"),
        ("trainer-nlp", "system:serviceaccount:nlp:trainer", "nlp"),
    ]


def test_without_teams_the_one_trainer_role_runs_in_default_and_keeps_its_name() -> None:
    raw = platform_of("dev-aws")
    raw.pop("scheduling", None)
    (identity,) = plan.trainer_identities(spec_of(raw))
    assert (identity.resource_suffix, identity.subject, identity.team) == (
        "trainer-role",
        "system:serviceaccount:default:trainer",
        None,
    )


def test_prod_keeps_a_nat_gateway_per_zone() -> None:
    assert plan.single_nat("prod") is False and plan.single_nat("dev") is True


def test_ecr_lifecycle_expires_untagged_images_first() -> None:
    rules = json.loads(plan.ecr_lifecycle_policy())["rules"]
    assert rules[0]["selection"]["tagStatus"] == "untagged"
    assert rules[-1]["selection"]["tagStatus"] == "any"

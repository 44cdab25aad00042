"""`team-file-system-isolated`: the shipped AWS stacks hold it, and each planted hole fails it."""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest

from components.checks import declared, file_system_isolation
from components.checks.declared import Resource
from components.checks.rules import base, registry
from infra.synth import Synthesis

Synthesized = Callable[[str], Synthesis]
RULE = "team-file-system-isolated"
POLICY = file_system_isolation.EFS_FILE_SYSTEM_POLICY
PV = file_system_isolation.PERSISTENT_VOLUME
NETWORK_POLICY = file_system_isolation.NETWORK_POLICY


def resources_of(result: Synthesis) -> list[Resource]:
    return base.from_synthesis(copy.deepcopy(result.resources))


def messages(resources: list[Resource]) -> list[tuple[str | None, str]]:
    return [(v.resource, v.message) for v in registry.CHECKS[RULE](resources, base.Context("prod", 16, 512, False))]


def find(resources: list[Resource], type_token: str, name: str) -> Resource:
    [found] = [r for r in resources if r.type == type_token and r.name == name]
    return found


def replace(resources: list[Resource], old: Resource, props: dict[str, Any]) -> list[Resource]:
    return [Resource(r.type, r.name, props, r.protect, r.ignore_changes, r.depends_on) if r is old else r for r in resources]


def with_policy(resources: list[Resource], change: Callable[[list[dict[str, Any]]], None]) -> list[Resource]:
    """prod-aws with its file system policy's statements changed by `change`."""
    policy = find(resources, POLICY, "ml-prod-training-data")
    document = json.loads(policy.props["policy"])
    change(document["Statement"])
    return replace(resources, policy, {**policy.props, "policy": json.dumps(document)})


def statement(statements: list[dict[str, Any]], sid: str) -> dict[str, Any]:
    [found] = [s for s in statements if s["Sid"] == sid]
    return found


def with_volume(resources: list[Resource], change: Callable[[dict[str, Any]], None]) -> list[Resource]:
    """prod-aws with research's PersistentVolume changed by `change`."""
    volume = find(resources, PV, "ml-prod-gpu-research-data")
    props = copy.deepcopy(dict(volume.props))
    change(props)
    return replace(resources, volume, props)


@pytest.fixture
def prod(synthesized: Synthesized) -> list[Resource]:
    return resources_of(synthesized("prod-aws"))


@pytest.mark.parametrize("stack", ["prod-aws", "dev-aws", "dev-aws-karpenter"])
def test_the_shipped_aws_stacks_isolate_the_file_system(synthesized: Synthesized, stack: str) -> None:
    assert messages(resources_of(synthesized(stack))) == []


def test_stacks_without_efs_have_nothing_to_isolate(synthesized: Synthesized) -> None:
    assert messages(resources_of(synthesized("prod-gcp"))) == []


def test_a_file_system_without_a_policy_fails(prod: list[Resource]) -> None:
    without = [r for r in prod if r.type != POLICY]
    assert messages(without) == [
        (
            "aws:efs/fileSystem:FileSystem::ml-prod-training-data",
            "no file system policy: EFS applies its default, full access for any anonymous client that reaches a "
            "mount target (a pod with a userspace NFS client included)",
        )
    ]


def test_a_policy_without_the_tls_deny_fails(prod: list[Resource]) -> None:
    planted = with_policy(prod, lambda s: s.remove(statement(s, "DenyWithoutTls")))
    assert [m for _, m in messages(planted)] == [
        "no statement denies every principal the client actions without TLS (Bool aws:SecureTransport false)"
    ]


def test_a_policy_without_the_access_point_deny_fails(prod: list[Resource]) -> None:
    planted = with_policy(prod, lambda s: s.remove(statement(s, "DenyOutsideTheTeamsAccessPoints")))
    assert [m for _, m in messages(planted)] == [
        "no statement denies every principal the client actions outside an access point (elasticfilesystem:AccessPointArn)"
    ]


def test_an_allow_without_the_tls_condition_fails(prod: list[Resource]) -> None:
    planted = with_policy(prod, lambda s: statement(s, "CsiDriverMountsTeamAccessPoints")["Condition"].pop("Bool"))
    assert [m for _, m in messages(planted)] == [
        "statement CsiDriverMountsTeamAccessPoints does not require TLS (Bool aws:SecureTransport true)"
    ]


def test_an_allow_without_the_access_point_condition_fails(prod: list[Resource]) -> None:
    planted = with_policy(prod, lambda s: statement(s, "CsiDriverMountsTeamAccessPoints")["Condition"].pop("StringEquals"))
    assert [m for _, m in messages(planted)] == [
        "statement CsiDriverMountsTeamAccessPoints does not require an access point (elasticfilesystem:AccessPointArn): "
        "it allows the file system's root"
    ]


def test_an_allow_for_anyone_fails(prod: list[Resource]) -> None:
    planted = with_policy(prod, lambda s: statement(s, "CsiDriverMountsTeamAccessPoints").update(Principal={"AWS": "*"}))
    assert [m for _, m in messages(planted)] == [
        "statement CsiDriverMountsTeamAccessPoints allows anyone (Principal \"*\"), anonymous clients included"
    ]


def test_an_allow_for_another_principal_than_the_csi_role_fails(prod: list[Resource]) -> None:
    trainer = "arn:aws:iam::000000000000:role/ml-prod-storage-trainer-research"
    planted = with_policy(prod, lambda s: statement(s, "CsiDriverMountsTeamAccessPoints").update(Principal={"AWS": trainer}))
    assert [m for _, m in messages(planted)] == [
        f"statement CsiDriverMountsTeamAccessPoints allows {trainer}, not only the EFS CSI driver's role "
        "arn:aws:iam::000000000000:role/ml-prod-aws-efs-csi-driver"
    ]


def test_an_allow_of_root_access_fails(prod: list[Resource]) -> None:
    planted = with_policy(
        prod, lambda s: statement(s, "CsiDriverMountsTeamAccessPoints")["Action"].append("elasticfilesystem:ClientRootAccess")
    )
    assert [m for _, m in messages(planted)] == [
        "statement CsiDriverMountsTeamAccessPoints allows root access (elasticfilesystem:ClientMount, "
        "elasticfilesystem:ClientWrite, elasticfilesystem:ClientRootAccess): only ClientMount and ClientWrite"
    ]


def test_an_allow_of_an_access_point_no_team_volume_uses_fails(prod: list[Resource]) -> None:
    foreign = "arn:aws:elasticfilesystem:us-east-1:000000000000:access-point/fsap-root"
    planted = with_policy(
        prod, lambda s: statement(s, "CsiDriverMountsTeamAccessPoints")["Condition"]["StringEquals"].update(
            {"elasticfilesystem:AccessPointArn": [foreign]}
        )
    )
    assert [m for _, m in messages(planted)] == [
        f"statement CsiDriverMountsTeamAccessPoints allows access points no team volume uses ({foreign})"
    ]


def test_an_identity_policy_granting_client_mount_fails(prod: list[Resource]) -> None:
    grant = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "elasticfilesystem:ClientMount", "Resource": "*"}
    ]}
    planted = Resource(declared.IAM_ROLE_POLICY, "planted", {"role": "trainer", "policy": json.dumps(grant)})
    assert messages([*prod, planted]) == [
        (
            "aws:iam/rolePolicy:RolePolicy::planted",
            "grants elasticfilesystem:ClientMount: its holder mounts the training file system past the file system "
            "policy's allow-list",
        )
    ]


def test_a_team_volume_without_iam_fails(prod: list[Resource]) -> None:
    planted = with_volume(prod, lambda props: props["spec"].pop("mountOptions"))
    assert messages(planted) == [
        (
            "kubernetes:core/v1:PersistentVolume::ml-prod-gpu-research-data",
            "no `iam` mount option: the mount is anonymous, which the file system policy refuses, or open to anyone "
            "without one",
        )
    ]


def test_a_team_volume_that_turns_tls_off_fails(prod: list[Resource]) -> None:
    planted = with_volume(prod, lambda props: props["spec"]["csi"].update(volumeAttributes={"encryptInTransit": "false"}))
    assert [m for _, m in messages(planted)] == ["volumeAttributes.encryptInTransit is false: TLS hangs on the access point alone"]


def test_a_team_volume_without_tls_or_access_point_fails_on_both(prod: list[Resource]) -> None:
    def root_in_clear(props: dict[str, Any]) -> None:
        props["spec"]["csi"]["volumeHandle"] = props["spec"]["csi"]["volumeHandle"].split("::")[0]
        props["spec"]["csi"]["volumeAttributes"] = {"encryptInTransit": "false"}

    found = [m for _, m in messages(with_volume(prod, root_in_clear))]
    assert "the driver mounts without `tls`: NFS in clear text, which the file system policy refuses" in found
    assert "the volume handle names no access point: it mounts the file system's root, every team's directory" in found


def test_a_root_volume_without_attributes_still_gets_tls_from_the_drivers_default(prod: list[Resource]) -> None:
    def root(props: dict[str, Any]) -> None:
        props["spec"]["csi"]["volumeHandle"] = props["spec"]["csi"]["volumeHandle"].split("::")[0]

    found = [m for _, m in messages(with_volume(prod, root))]
    assert "the volume handle names no access point: it mounts the file system's root, every team's directory" in found
    assert not [m for m in found if "tls" in m.lower()]


def test_the_driver_adds_tls_for_an_access_point_and_keeps_iam(prod: list[Resource]) -> None:
    volume = find(prod, PV, "ml-prod-gpu-research-data")
    assert file_system_isolation.driver_mount_options(volume) == [
        "accesspoint=ml-prod-training-data-research-id",
        "tls",
        "iam",
    ]


def test_a_team_namespace_without_the_nfs_egress_policy_fails(prod: list[Resource]) -> None:
    without = [r for r in prod if r.key != f"{NETWORK_POLICY}::ml-prod-gpu-research-deny-file-system-egress"]
    assert messages(without) == [
        (
            None,
            "namespace 'research' holds a team volume but no NetworkPolicy puts the egress of all its pods under "
            "policy: they reach NFS (TCP 2049) on the mount targets",
        )
    ]


def test_an_egress_rule_that_opens_nfs_fails(prod: list[Resource]) -> None:
    policy = find(prod, NETWORK_POLICY, "ml-prod-gpu-applied-deny-file-system-egress")
    props = copy.deepcopy(dict(policy.props))
    props["spec"]["egress"].append({"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"port": 2049}]})
    assert messages(replace(prod, policy, props)) == [
        (policy.key, "egress rule 1 allows TCP 2049 (NFS): pods reach the mount targets")
    ]


def test_an_egress_rule_to_pods_only_may_use_any_port(prod: list[Resource]) -> None:
    policy = find(prod, NETWORK_POLICY, "ml-prod-gpu-applied-deny-file-system-egress")
    props = copy.deepcopy(dict(policy.props))
    props["spec"]["egress"].append({"to": [{"podSelector": {}}]})
    assert messages(replace(prod, policy, props)) == []


def test_network_policy_off_on_the_cni_fails(prod: list[Resource]) -> None:
    cni = find(prod, declared.EKS_ADDON, "ml-prod-vpc-cni")
    planted = replace(prod, cni, {k: v for k, v in cni.props.items() if k != "configurationValues"})
    assert messages(planted) == [
        (
            cni.key,
            "enableNetworkPolicy is not true in the add-on's configuration values: no NetworkPolicy is enforced, "
            "NFS is open to every pod",
        )
    ]


def test_a_team_namespace_allowing_host_network_fails(prod: list[Resource]) -> None:
    namespace = find(prod, file_system_isolation.NAMESPACE, "ml-prod-gpu-research")
    props = copy.deepcopy(dict(namespace.props))
    props["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "privileged"
    assert messages(replace(prod, namespace, props)) == [
        (namespace.key, "Pod Security enforces privileged: a hostNetwork pod escapes every NetworkPolicy and reaches NFS")
    ]

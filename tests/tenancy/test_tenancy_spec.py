"""Members, admins and fair sharing in the stack file: each cloud's principals, refused with the
line a user reads when they are not."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import platform_of

from components import tenancy
from components.spec import SpecError, parse_spec

SOURCE = "stacks/Pulumi.test.yaml"


def problems(raw: Any) -> list[str]:
    with pytest.raises(SpecError) as caught:
        parse_spec(raw, SOURCE)
    return caught.value.render().splitlines()


def with_members(stack: str, members: list[str], **extra: Any) -> dict[str, Any]:
    raw = platform_of(stack)
    raw["scheduling"]["teams"][0]["members"] = members
    raw.update(extra)
    return raw


def test_aws_members_are_iam_role_or_user_arns() -> None:
    assert problems(with_members("prod-aws", ["alice@example.com"])) == [
        f"{SOURCE}: platform.scheduling.teams[0].members[0]: expected an IAM role or user ARN"
        " (arn:aws:iam::<account>:role/<name>) on cloud aws, got 'alice@example.com'"
    ]


def test_gcp_members_are_google_users_or_groups() -> None:
    assert problems(with_members("prod-gcp", ["alice"])) == [
        f"{SOURCE}: platform.scheduling.teams[0].members[0]: expected user:<email> or group:<email> on cloud gcp, got 'alice'"
    ]


def test_google_groups_need_google_groups_for_rbac() -> None:
    raw = with_members("prod-gcp", ["group:ml@example.com"])
    raw["scheduling"]["teams"][1]["members"] = ["user:oncall@example.com"]
    del raw["gcp"]["rbacSecurityGroup"]
    raw.pop("admins")
    assert problems(raw) == [
        f"{SOURCE}: platform.scheduling.teams[0].members[0]: 'group:ml@example.com': GKE binds Google Groups only"
        " with Google Groups for RBAC; set gcp.rbacSecurityGroup (gke-security-groups@<domain>) or list the users"
    ]


def test_the_rbac_security_group_is_gke_security_groups_of_a_domain() -> None:
    raw = platform_of("prod-gcp")
    raw["gcp"]["rbacSecurityGroup"] = "admins@example.com"
    assert problems(raw) == [
        f"{SOURCE}: platform.gcp.rbacSecurityGroup: expected gke-security-groups@<your domain>, got 'admins@example.com'"
    ]


def test_a_member_listed_twice_is_an_error() -> None:
    arn = "arn:aws:iam::111122223333:role/x"
    assert problems(with_members("prod-aws", [arn, arn])) == [
        f"{SOURCE}: platform.scheduling.teams[0].members[1]: '{arn}' is listed twice"
    ]


def test_fair_sharing_weights_name_teams_and_need_fair_sharing_on() -> None:
    raw = platform_of("prod-aws")
    raw["scheduling"]["fairSharing"] = {"weights": {"reserch": 2}}
    assert problems(raw) == [
        f"{SOURCE}: platform.scheduling.fairSharing.weights: weights act only with fair sharing: set enabled: true",
        f"{SOURCE}: platform.scheduling.fairSharing.weights.reserch: no team named 'reserch' (did you mean 'research'?);"
        " teams: research, applied",
    ]


def test_a_person_in_two_teams_gets_one_eks_access_entry_with_both_groups() -> None:
    arn = "arn:aws:iam::111122223333:role/lead"
    raw = platform_of("prod-aws")
    for team in raw["scheduling"]["teams"]:
        team["members"] = [arn]
    raw["admins"] = ["arn:aws:iam::111122223333:role/platform"]
    access = tenancy.eks_access(parse_spec(raw, SOURCE))
    assert access == [
        tenancy.EksAccess("arn:aws:iam::111122223333:role/platform", admin=True, groups=()),
        tenancy.EksAccess(arn, admin=False, groups=("gpu-platform:team:research", "gpu-platform:team:applied")),
    ]


@pytest.mark.parametrize(
    "member",
    [
        "user:system:anonymous",
        "group:system:unauthenticated",
        "group:system:authenticated",
        "group:system:masters",
        "group:system:serviceaccounts",
        "user:system:serviceaccount:kube-system:default",
    ],
)
def test_kubernetes_built_in_identities_are_refused_as_members(member: str) -> None:
    assert problems(with_members("onprem", [member])) == [
        f"{SOURCE}: platform.scheduling.teams[0].members[0]: {member!r} is a Kubernetes built-in identity:"
        " names starting with 'system:' are reserved for Kubernetes itself, and binding one grants the role to every"
        " caller of that kind (system:authenticated is anyone with credentials, system:anonymous anyone at all);"
        " name people or groups"
    ]


def test_kubernetes_built_in_identities_are_refused_as_admins() -> None:
    raw = platform_of("onprem")
    raw["admins"] = ["group:system:authenticated"]
    (line,) = problems(raw)
    assert line.startswith(f"{SOURCE}: platform.admins[0]: 'group:system:authenticated' is a Kubernetes built-in identity")


def test_built_in_identities_are_refused_on_gcp_too() -> None:
    raw = platform_of("prod-gcp")
    raw["admins"] = ["group:system:masters"]
    (line,) = problems(raw)
    assert "platform.admins[0]: 'group:system:masters' is a Kubernetes built-in identity" in line

"""The mandatory tenancy rules: the shipped stacks pass them, and each planted break fails its rule."""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest
import yaml

from components.checks import declared, isolation
from components.checks.declared import Resource
from components.checks.rules import base, registry
from infra.synth import Synthesis

Synthesized = Callable[[str], Synthesis]
TENANCY_RULES = ("kueue-manages-team-namespaces", "team-identity-isolated", "team-rbac-namespaced")


def resources_of(result: Synthesis) -> list[Resource]:
    return base.from_synthesis(copy.deepcopy(result.resources))


def violations(resources: list[Resource], stack: str) -> list[base.Violation]:
    from helpers import platform_of
    from k8s_support import spec_of

    ctx = base.context_of(spec_of(platform_of(stack)))
    return [v for rule in TENANCY_RULES for v in registry.CHECKS[rule](resources, ctx)]


def find(resources: list[Resource], type_token: str, name: str) -> Resource:
    [found] = [r for r in resources if r.type == type_token and r.name == name]
    return found


def replace(resources: list[Resource], old: Resource, props: dict[str, Any]) -> list[Resource]:
    return [Resource(r.type, r.name, props, r.protect, r.ignore_changes, r.depends_on) if r is old else r for r in resources]


@pytest.mark.parametrize("stack", ["prod-aws", "prod-gcp", "onprem", "dev-aws", "dev-gcp"])
def test_the_shipped_stacks_keep_every_tenancy_guarantee(synthesized: Synthesized, stack: str) -> None:
    assert violations(resources_of(synthesized(stack)), stack) == []


def with_kueue_config(result: Synthesis, change: Callable[[dict[str, Any]], None]) -> list[Resource]:
    """onprem's resources with its Kueue configuration changed by `change`."""
    resources = resources_of(result)
    kueue = find(resources, "kubernetes:helm.sh/v3:Release", "lab-gpu-kueue")
    props = copy.deepcopy(dict(kueue.props))
    config = yaml.safe_load(props["values"]["managerConfig"]["controllerManagerConfigYaml"])
    change(config)
    props["values"]["managerConfig"]["controllerManagerConfigYaml"] = yaml.safe_dump(config)
    return replace(resources, kueue, props)


def test_a_kueue_configuration_without_the_namespace_selector_fails(synthesized: Synthesized) -> None:
    found = violations(with_kueue_config(synthesized("onprem"), lambda c: c.pop("managedJobsNamespaceSelector")), "onprem")
    assert [(v.rule, v.message) for v in found] == [
        (
            "kueue-manages-team-namespaces",
            "no managedJobsNamespaceSelector: Kueue would manage every namespace's jobs, system ones included",
        )
    ]


def test_a_selector_that_misses_a_team_namespace_fails(synthesized: Synthesized) -> None:
    def only_research(config: dict[str, Any]) -> None:
        config["managedJobsNamespaceSelector"]["matchExpressions"][0]["values"] = ["research"]

    [found] = violations(with_kueue_config(synthesized("onprem"), only_research), "onprem")
    assert found.message == "managedJobsNamespaceSelector does not select team namespace 'applied'"


def test_a_cross_team_statement_fails(synthesized: Synthesized) -> None:
    resources = resources_of(synthesized("prod-aws"))
    policy = find(resources, declared.IAM_ROLE_POLICY, "ml-prod-storage-trainer-research")
    document = json.loads(policy.props["policy"])
    document["Statement"].append(
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::ml-prod-prod-training/teams/applied/*"}
    )
    [found] = violations(replace(resources, policy, {**policy.props, "policy": json.dumps(document)}), "prod-aws")
    assert (found.rule, found.message) == ("team-identity-isolated", "reaches the prefixes of several teams (applied, research)")


def test_a_bucket_wide_statement_fails_once_there_are_teams(synthesized: Synthesized) -> None:
    resources = resources_of(synthesized("prod-aws"))
    policy = find(resources, declared.IAM_ROLE_POLICY, "ml-prod-storage-trainer-applied")
    document = json.loads(policy.props["policy"])
    document["Statement"].append(
        {"Sid": "Everything", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::ml-prod-prod-training/*"}
    )
    [found] = violations(replace(resources, policy, {**policy.props, "policy": json.dumps(document)}), "prod-aws")
    assert found.message == "statement Everything reaches every team's objects (arn:aws:s3:::ml-prod-prod-training/*)"


def test_one_role_trusted_by_two_teams_fails(synthesized: Synthesized) -> None:
    resources = resources_of(synthesized("prod-aws"))
    role = find(resources, declared.IAM_ROLE, "ml-prod-storage-trainer-research")
    trust = json.loads(role.props["assumeRolePolicy"])
    condition = trust["Statement"][0]["Condition"]["StringEquals"]
    sub = next(key for key in condition if key.endswith(":sub"))
    condition[sub] = ["system:serviceaccount:applied:trainer", "system:serviceaccount:research:trainer"]
    [found] = violations(replace(resources, role, {**role.props, "assumeRolePolicy": json.dumps(trust)}), "prod-aws")
    assert found.message == "trusted by the trainer accounts of several namespaces (applied, research)"


def test_a_gke_team_account_on_another_team_s_folder_fails(synthesized: Synthesized) -> None:
    resources = resources_of(synthesized("prod-gcp"))
    grant = find(resources, isolation.GCS_FOLDER_IAM_MEMBER, "ml-prod-trainer-applied-objects")
    planted = Resource(grant.type, "planted", {**grant.props, "managedFolder": "teams/research/"})
    [found] = violations([*resources, planted], "prod-gcp")
    assert found.message == (
        "serviceAccount:ml-prod-t-applied@my-ml-prod.iam.gserviceaccount.com reaches the folders of several teams"
        " (applied, research)"
    )


def test_a_cluster_role_binding_for_a_team_fails(synthesized: Synthesized) -> None:
    resources = resources_of(synthesized("prod-aws"))
    planted = Resource(
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
        "planted",
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "research-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "gpu-platform:team:research"}],
        },
    )
    [found] = violations([*resources, planted], "prod-aws")
    assert (found.rule, found.message) == (
        "team-rbac-namespaced",
        "a ClusterRoleBinding names team subject 'gpu-platform:team:research' (research)",
    )


def test_a_team_bound_in_another_team_s_namespace_fails(synthesized: Synthesized) -> None:
    resources = resources_of(synthesized("onprem"))
    binding = find(resources, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "lab-gpu-applied-team-members")
    props = copy.deepcopy(dict(binding.props))
    props["subjects"] = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "research"}]
    [found] = violations(replace(resources, binding, props), "onprem")
    assert found.message == "binds team subject 'research' (research) in namespace 'applied'"

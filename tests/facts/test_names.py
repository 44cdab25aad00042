"""The naming table: each target's rule accepts its own valid names and refuses the ones the
cloud or the API server refuses (examples from the rules' upstream pages)."""

from __future__ import annotations

import pytest

from components.facts.names import RULES, NameKind, name_problem

VALID: list[tuple[NameKind, str]] = [
    ("dns-label", "ml-dev"),
    ("dns-subdomain", "a.b-c.d"),
    ("label-key", "nvidia.com/gpu.product"),
    ("label-key", "team"),
    ("label-value", ""),
    ("label-value", "NVIDIA-A100-SXM4-80GB"),
    ("eks-cluster", "ML_prod-1"),
    ("s3-bucket", "ml-prod-prod-training"),
    ("gcs-bucket", "ml_prod.training"),
    ("gsa-account-id", "ml-prod-nodes"),
    ("ecr-repository", "ml-prod/trainer"),
]

INVALID: list[tuple[NameKind, str]] = [
    ("dns-label", "ml-dev\n"),
    ("dns-label", "a" * 64),
    ("dns-subdomain", "a..b"),
    ("label-key", "Bad Key"),
    ("label-key", "-x/name"),
    ("label-key", "x/" + "n" * 64),
    ("label-value", "ends-"),
    ("label-value", "v" * 64),
    ("eks-cluster", "_x"),
    ("eks-node-group", "n" * 64),
    ("eks-node-group-prefix", "p" * 38),
    ("iam-role", "r" * 65),
    ("iam-role-autonamed", "r" * 57),
    ("s3-bucket", "My_Bucket!!"),
    ("s3-bucket", "ab"),
    ("s3-bucket", "b" * 70),
    ("s3-bucket", ""),
    ("s3-bucket", "a..b"),
    ("s3-bucket", "192.168.5.4"),
    ("s3-bucket", "xn--bucket"),
    ("gcs-bucket", "google-data"),
    ("gcs-bucket", "b" * 64),
    ("gce-name", "Bad Name!"),
    ("gce-name", "1abc"),
    ("gke-cluster", "c" * 41),
    ("gsa-account-id", "short"),
    ("artifact-registry-repository", "Repo"),
    ("ecr-repository", "Upper/trainer"),
]


@pytest.mark.parametrize(("kind", "name"), VALID)
def test_valid_names_pass_their_rule(kind: NameKind, name: str) -> None:
    assert name_problem(kind, name) is None


@pytest.mark.parametrize(("kind", "name"), INVALID)
def test_invalid_names_are_refused_with_the_expected_form(kind: NameKind, name: str) -> None:
    problem = name_problem(kind, name)
    assert problem is not None and problem.startswith(f"expected {RULES[kind].expected}")


def test_every_rule_names_its_upstream_source() -> None:
    assert all(rule.source for rule in RULES.values())


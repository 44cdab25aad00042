"""The EKS cluster's lifecycle: explicit upgrade policy, deletion protection from the stack file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from aws_support import variant
from helpers import REPO, stack_config

from components.spec.models import ClusterSpec
from infra import offline
from infra.synth import Synthesis

CLUSTER = "aws:eks/cluster:Cluster"


def cluster(result: Synthesis) -> dict[str, Any]:
    [found] = result.by_type(CLUSTER)
    return found["inputs"]


def test_the_upgrade_policy_is_explicitly_standard_support(dev: Synthesis, prod: Synthesis) -> None:
    for result in (dev, prod):
        assert cluster(result)["upgradePolicy"] == {"supportType": "STANDARD"}


def test_extended_support_is_a_stack_choice(tmp_path: Path) -> None:
    def extended(platform: dict[str, Any]) -> None:
        platform["aws"] = {"supportType": "EXTENDED"}

    assert cluster(variant(tmp_path, extended))["upgradePolicy"] == {"supportType": "EXTENDED"}


def test_prod_clusters_have_deletion_protection_and_dev_clusters_none(dev: Synthesis, prod: Synthesis) -> None:
    assert (cluster(prod)["deletionProtection"], cluster(dev)["deletionProtection"]) == (True, False)


def test_deletion_protection_follows_the_stack_file(tmp_path: Path) -> None:
    def protected(platform: dict[str, Any]) -> None:
        platform["cluster"]["deletionProtection"] = True

    assert cluster(variant(tmp_path, protected))["deletionProtection"] is True


def test_the_teardown_s_first_step_changes_only_the_cluster_s_deletion_protection(tmp_path: Path, prod: Synthesis) -> None:
    """docs/aws.md, "Tear down": `deletionProtection: false` then `pulumi up` touches nothing else."""
    config = stack_config("prod-aws")
    config["gpu-platform:platform"]["cluster"]["deletionProtection"] = False
    path = tmp_path / "Pulumi.prod-aws.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    unlocked = offline.synthesize(str(path), REPO)[2]
    before = {(r["type"], r["name"]): r for r in prod.resources}
    after = {(r["type"], r["name"]): r for r in unlocked.resources}
    assert before.keys() == after.keys()
    changed = [key for key in before if before[key] != after[key]]
    assert changed == [(CLUSTER, "ml-prod")]
    assert {k for k in before[changed[0]]["inputs"] if before[changed[0]]["inputs"][k] != after[changed[0]]["inputs"].get(k)} == {
        "deletionProtection"
    }


def test_the_documented_teardown_key_is_the_spec_s() -> None:
    text = (REPO / "docs" / "aws.md").read_text()
    assert "    cluster:\n         name: ml-prod\n         deletionProtection: false" in text
    assert ClusterSpec.model_fields["deletion_protection"].alias == "deletionProtection"

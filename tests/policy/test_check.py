"""`gpu-platform check`: synthesize, run the rules and the schema validation, print one line per
finding, exit 1 on a mandatory violation and 2 on an invalid stack file."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pytest
import yaml
from helpers import REPO, stack_config

from components.spec import PlatformSpec
from infra import cli, program
from infra.tools import check


@pytest.fixture(autouse=True)
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


def also_declare(monkeypatch: pytest.MonkeyPatch, declare: Callable[[PlatformSpec], None]) -> None:
    """Run the real program, plus `declare`: a stand-in for a resource a wing would build."""
    build = program.build_platform

    def build_and_declare(spec: PlatformSpec, trainer_context: Path | None = None) -> dict[str, Any]:
        outputs = build(spec, trainer_context)
        declare(spec)
        return outputs

    monkeypatch.setattr(program, "build_platform", build_and_declare)


def priority_class(value: int) -> Callable[[PlatformSpec], None]:
    def declare(spec: PlatformSpec) -> None:
        k8s.scheduling.v1.PriorityClass("gpu-urgent", metadata={"name": "gpu-urgent"}, value=value, preemption_policy="Never")

    return declare


def drifting_node_group(spec: PlatformSpec) -> None:
    """A CPU node group whose desired size the autoscaler's changes would fight."""
    aws.eks.NodeGroup(
        f"{spec.cluster.name}-cpu",
        cluster_name=spec.cluster.name,
        node_role_arn="arn:aws:iam::000000000000:role/nodes",
        subnet_ids=["subnet-1"],
        instance_types=["m7i.large"],
        scaling_config={"min_size": 0, "max_size": 2, "desired_size": 0},
        launch_template={"id": "lt-1", "version": "1"},
    )


def warm_node_group(spec: PlatformSpec) -> None:
    aws.eks.NodeGroup(
        f"{spec.cluster.name}-l4",
        cluster_name=spec.cluster.name,
        node_role_arn="arn:aws:iam::000000000000:role/nodes",
        subnet_ids=["subnet-1"],
        instance_types=["g6.xlarge"],
        scaling_config={"min_size": 1, "max_size": 2, "desired_size": 1},
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
        launch_template={"id": "lt-1", "version": "1"},
        opts=pulumi.ResourceOptions(ignore_changes=["scalingConfig.desiredSize"]),
    )


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = cli.main(["check", *args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_the_example_stacks_pass(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = run(capsys)
    assert (code, lines) == (0, [])
    # The six cluster stacks and the fleet manager over two of them.
    assert err.startswith("checked 7 stack(s): 0 mandatory")


def test_a_mandatory_violation_prints_one_line_and_exits_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    also_declare(monkeypatch, priority_class(2_000_000_000))
    code, lines, _ = run(capsys, "dev-aws")
    assert code == 1
    assert lines == [
        "dev-aws: priority-class-range kubernetes:scheduling.k8s.io/v1:PriorityClass::gpu-urgent:"
        " mandatory: value 2000000000 is above 1,000,000,000, the highest user priority"
    ]


def test_an_advisory_violation_prints_but_exits_0(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    also_declare(monkeypatch, drifting_node_group)
    code, lines, _ = run(capsys, "dev-aws")
    assert code == 0
    assert [line.split(" ")[1] for line in lines] == ["autoscaler-drift-ignored"]
    assert ": advisory: " in lines[0]


def test_a_warm_dev_gpu_pool_fails_until_overridden_with_a_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    also_declare(monkeypatch, warm_node_group)
    code, lines, _ = run(capsys, "dev-aws")
    assert code == 1
    assert lines == [
        "dev-aws: gpu-pool-scale-to-zero aws:eks/nodeGroup:NodeGroup::ml-dev-l4:"
        " mandatory: GPU pool keeps 1 node(s) running in dev: set its minimum to 0"
    ]
    config = stack_config("dev-aws")
    config["gpu-platform:platform"]["policy"] = {
        "overrides": [{"rule": "gpu-pool-scale-to-zero", "reason": "one warm L4 for the onboarding workshop"}]
    }
    stack_file = tmp_path / "Pulumi.dev-aws.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}))
    code, lines, _ = run(capsys, str(stack_file))
    assert code == 0
    assert lines == [
        "dev-aws: gpu-pool-scale-to-zero aws:eks/nodeGroup:NodeGroup::ml-dev-l4:"
        " overridden (one warm L4 for the onboarding workshop): GPU pool keeps 1 node(s) running in dev: set its minimum to 0"
    ]


def test_an_invalid_stack_file_exits_2_naming_the_field(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = stack_config("dev-aws")
    config["gpu-platform:platform"]["policy"] = {"overrides": [{"rule": "no-wildcard-iam", "reason": "legacy"}]}
    stack_file = tmp_path / "Pulumi.dev-aws.yaml"
    stack_file.write_text(yaml.safe_dump({"config": config}))
    code, lines, err = run(capsys, str(stack_file))
    assert (code, lines) == (2, [])
    assert "platform.policy.overrides[0].rule: no-wildcard-iam cannot be overridden" in err


def test_a_kubernetes_object_the_api_server_would_reject_is_a_mandatory_finding(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def bad_config_map(spec: PlatformSpec) -> None:
        k8s.core.v1.ConfigMap("limits", metadata={"name": "limits", "namespace": "default"}, data={"maxGpus": 8})  # type: ignore[dict-item]

    also_declare(monkeypatch, bad_config_map)
    code, lines, _ = run(capsys, "dev-aws")
    assert code == 1
    assert lines == ["dev-aws: kubernetes-schema kubernetes:core/v1:ConfigMap::limits: mandatory: data.maxGpus: 8 is not of type 'string', 'null'"]


def test_custom_resources_are_counted_not_validated(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def flavor(spec: PlatformSpec) -> None:
        k8s.apiextensions.CustomResource(
            "l4", api_version="kueue.x-k8s.io/v1beta2", kind="ResourceFlavor", metadata={"name": "l4"}, spec={}
        )

    def counts(err: str) -> tuple[int, int]:
        found = re.search(r"(\d+) Kubernetes object\(s\) validated, (\d+) custom resource\(s\)", err)
        assert found, err
        return int(found.group(1)), int(found.group(2))

    _, _, before = run(capsys, "dev-aws")
    also_declare(monkeypatch, flavor)
    code, lines, err = run(capsys, "dev-aws")
    assert (code, lines) == (0, [])
    validated, custom = counts(before)
    assert counts(err) == (validated, custom + 1)


def test_the_matrix_lists_every_stack_by_environment() -> None:
    matrix = check.stack_matrix(REPO)
    assert {group: [row["stack"] for row in rows] for group, rows in matrix.items()} == {
        "all": ["dev-aws-karpenter", "dev-aws", "dev-gcp", "onprem", "prod-aws", "prod-gcp", "fleet"],
        "dev": ["dev-aws-karpenter", "dev-aws", "dev-gcp"],
        "staging": ["onprem"],
        "prod": ["prod-aws", "prod-gcp"],
        "fleet": ["fleet"],
    }
    assert matrix["all"][0] == {"stack": "dev-aws-karpenter", "cloud": "aws", "environment": "dev", "region": "us-west-2"}


def test_a_fleet_manager_is_deployed_after_every_cluster_stack_through_its_context() -> None:
    assert check.stack_matrix(REPO)["fleet"] == [{"stack": "fleet", "cloud": "fleet", "environment": "prod", "region": ""}]


def test_the_matrix_becomes_github_outputs_with_counts() -> None:
    text = check.github_outputs({"all": [{"stack": "a"}], "staging": []})
    assert text == 'all={"include": [{"stack": "a"}]}\nall-count=1\nstaging={"include": []}\nstaging-count=0\n'

"""Every checked-in stack file is valid and synthesizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra import stackfile

STACKS = stackfile.all_stacks(Path(__file__).resolve().parents[1])
# Cluster stacks and fleet managers: editors check both against one schema.
STACK_FILES = STACKS + stackfile.fleet_stacks(Path(__file__).resolve().parents[1])


def test_the_example_stacks_are_the_ones_teams_start_from() -> None:
    assert STACKS == ["dev-aws-karpenter", "dev-aws", "dev-gcp", "onprem", "prod-aws", "prod-gcp"]


@pytest.mark.parametrize("stack", STACKS)
def test_stack_synthesizes(stack: str, synthesized) -> None:
    result = synthesized(stack)
    assert result.stack == stack
    assert result.outputs["clusterName"]


def test_the_committed_schema_is_the_generated_one(repo: Path) -> None:
    import json

    from components.spec import stack_file_schema

    committed = json.loads((repo / "stacks" / "stack.schema.json").read_text())
    assert committed == stack_file_schema(), "regenerate: gpu-platform schema > stacks/stack.schema.json"


@pytest.mark.parametrize("stack", STACK_FILES)
def test_stack_files_validate_against_the_schema_editors_use(stack: str, repo: Path) -> None:
    import jsonschema
    import yaml

    from components.spec import stack_file_schema

    document = yaml.safe_load((repo / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    jsonschema.validate(document, stack_file_schema())


@pytest.mark.parametrize("stack", STACK_FILES)
def test_stack_files_point_editors_at_the_schema(stack: str, repo: Path) -> None:
    first = (repo / "stacks" / f"Pulumi.{stack}.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=./stack.schema.json"


def test_a_misspelt_fleet_manager_key_fails_the_schema_editors_use(repo: Path) -> None:
    import jsonschema
    import yaml

    from components.spec import stack_file_schema

    document = yaml.safe_load((repo / "stacks" / "Pulumi.fleet.yaml").read_text())
    fleet = document["config"]["gpu-platform:platform"]["fleet"]
    fleet["workerz"] = fleet.pop("workers")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, stack_file_schema())

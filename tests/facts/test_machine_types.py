"""System node types: well-formed CPU instance and machine type names pass, typos, shell
fragments and GPU shapes do not."""

from __future__ import annotations

import pytest

from components.facts.catalog import Cloud
from components.facts.machine_types import system_node_type_problem


@pytest.mark.parametrize(
    ("cloud", "name"),
    [
        ("aws", "m6i.large"),
        ("aws", "c7gn.16xlarge"),
        ("aws", "t3.micro"),
        ("aws", "c7i.metal-24xl"),
        ("aws", "u-6tb1.metal"),
        ("gcp", "e2-standard-4"),
        ("gcp", "e2-medium"),
        ("gcp", "n2d-highmem-96"),
        ("gcp", "c3-standard-4-lssd"),
        ("gcp", "n2-custom-8-32768"),
        ("gcp", "n1-standard-4"),
    ],
)
def test_cpu_types_pass(cloud: Cloud, name: str) -> None:
    assert system_node_type_problem(cloud, name) is None


@pytest.mark.parametrize(
    ("cloud", "name"),
    [
        ("aws", "not a type; rm -rf /"),
        ("aws", "m6i"),
        ("aws", "m6i.large\n"),
        ("aws", "e2-standard-4"),
        ("gcp", "bogus type!!"),
        ("gcp", "m6i.large"),
        ("gcp", "E2-standard-4"),
    ],
)
def test_malformed_types_are_refused(cloud: Cloud, name: str) -> None:
    assert system_node_type_problem(cloud, name) == f"expected {'an EC2 instance type like m6i.large (<family>.<size>)' if cloud == 'aws' else 'a Compute Engine machine type like e2-standard-4 (<series>-<type>-<vCPUs>)'}, got {name!r}"


@pytest.mark.parametrize(("cloud", "name"), [("aws", "g6.xlarge"), ("gcp", "a3-highgpu-8g")])
def test_gpu_shapes_are_refused_for_system_nodes(cloud: Cloud, name: str) -> None:
    assert "is a GPU type" in (system_node_type_problem(cloud, name) or "")

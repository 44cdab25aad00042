"""docs/gcp.md documents the spec as it is: every GKE key, no invented ones."""

from __future__ import annotations

import re

from gcp_support import REPO

from components.spec import GcpSpec, NodePoolSpec

GCP_POOL_KEYS = {"driverVersion", "compactPlacement", "multiGpuTraining"}


def table_keys(heading: str) -> set[str]:
    """The first-column keys of the table that follows the line starting with `heading`."""
    text = (REPO / "docs" / "gcp.md").read_text()
    table = text[text.index(heading) :].split("\n\n")[1]
    return {match.split(".")[0] for match in re.findall(r"^\| `([A-Za-z.]+)` \|", table, flags=re.M)}


def test_the_gcp_section_table_lists_every_key() -> None:
    keys = {field.alias for field in GcpSpec.model_fields.values()}
    assert table_keys("The `gcp` section") == keys


def test_the_pool_table_lists_every_gke_only_pool_key() -> None:
    assert GCP_POOL_KEYS <= {field.alias for field in NodePoolSpec.model_fields.values()}
    assert table_keys("GKE-only pool keys") == GCP_POOL_KEYS


def test_the_job_example_targets_a_pool_of_dev_gcp() -> None:
    text = (REPO / "docs" / "gcp.md").read_text()
    stack, pool = re.findall(r"gpu-platform job (\S+) --pool (\S+)", text)[0]
    config = (REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text()
    assert f"- name: {pool}\n" in config

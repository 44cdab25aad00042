"""docs/aws.md and docs/gcp.md say how each family's GPUs are had, exactly as the capacity table does."""

from __future__ import annotations

import re

import pytest
from helpers import REPO

from components.facts import capacity

DOCS = {"aws": REPO / "docs" / "aws.md", "gcp": REPO / "docs" / "gcp.md"}


def family_rows(cloud: str) -> dict[str, str]:
    """First-column family -> the ways column, from the "Getting GPUs, family by family" table."""
    text = DOCS[cloud].read_text()
    blocks = text[text.index("Getting GPUs, family by family") :].split("\n\n")
    table = next(block for block in blocks if block.startswith("| family"))
    rows: dict[str, str] = {}
    for line in table.splitlines()[2:]:
        families, ways = line.split("|")[1:3]
        for family in re.findall(r"`([^`]+)`", families):
            rows[family] = ways.strip()
    return rows


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_every_family_of_the_capacity_table_is_documented_with_its_ways(cloud: str) -> None:
    offers = {o.prefix.rstrip(".-"): ", ".join(o.ways) for o in capacity.OFFERS if o.cloud == cloud}
    assert family_rows(cloud) == offers

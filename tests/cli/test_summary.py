"""summary.md: the GPU pools apart, then the whole stack's $/hour (system nodes, control plane,
NAT, keys, node disks) counted from what the program declared, every price an estimate with
its date and source."""

from __future__ import annotations

import dataclasses
import re
from typing import Callable

import pytest
from helpers import REPO

from components.facts import prices
from components.spec import PlatformSpec
from infra import stackfile, synth
from infra.tools import summary

Synthesized = Callable[[str], synth.Synthesis]


def spec_of(stack: str) -> PlatformSpec:
    return stackfile.read(stack, REPO).spec()


def whole_stack(text: str) -> dict[str, tuple[str, str, str]]:
    """The whole-stack table: part -> (count, $/h min, $/h max)."""
    table = text.split("## Whole stack")[1].split("\n\n")[1]
    rows = [cells(line) for line in table.splitlines()[2:]]
    return {row[0]: (row[1], row[2], row[3]) for row in rows}


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_dev_aws_costs_money_with_every_gpu_pool_at_zero(synthesized: Synthesized) -> None:
    table = whole_stack(summary.markdown(spec_of("dev-aws"), "dev-aws", synthesized("dev-aws")))
    assert table == {
        "GPU pools (table above)": ("2", "0.000", "12.424"),
        "system nodes (m6i.large)": ("2-3", "0.192", "0.288"),
        "GPU node root volumes (gp3, 0-1200 GiB)": ("0-6", "0.000", "0.132"),
        "EKS control plane": ("1", "0.100", "0.100"),
        "NAT gateways": ("1", "0.045", "0.045"),
        "public IPv4 addresses (NAT)": ("1", "0.005", "0.005"),
        "KMS keys": ("2", "0.003", "0.003"),
        "**stack total**": ("", "0.345", "12.996"),
    }


def test_the_counts_come_from_the_declared_resources(synthesized: Synthesized) -> None:
    """prod-aws keeps a NAT gateway per zone: three gateways, three addresses."""
    result = synthesized("prod-aws")
    table = whole_stack(summary.markdown(spec_of("prod-aws"), "prod-aws", result))
    assert len(result.by_type("aws:ec2/natGateway:NatGateway")) == 3
    assert table["NAT gateways"] == ("3", "0.135", "0.135")
    assert table["public IPv4 addresses (NAT)"] == ("3", "0.015", "0.015")


def test_gke_stacks_pay_the_management_fee_nat_and_boot_disks(synthesized: Synthesized) -> None:
    table = whole_stack(summary.markdown(spec_of("dev-gcp"), "dev-gcp", synthesized("dev-gcp")))
    assert table["GKE cluster management fee"] == ("1", "0.100", "0.100")
    assert {part.split(" (")[0] for part in table} >= {"system nodes", "node boot disks", "Cloud NAT"}
    total_min = sum(float(cells[1]) for part, cells in table.items() if part != "**stack total**")
    assert float(table["**stack total**"][1]) == pytest.approx(total_min, abs=0.001)
    assert total_min > 0


def test_the_gpu_pools_row_is_the_pool_table_s_total(synthesized: Synthesized) -> None:
    text = summary.markdown(spec_of("prod-gcp"), "prod-gcp", synthesized("prod-gcp"))
    pool_total = cells(next(line for line in text.splitlines() if line.startswith("| total |")))
    low, high = whole_stack(text)["GPU pools (table above)"][1:]
    assert float(low.replace(",", "")) == pytest.approx(float(pool_total[-2].replace(",", "")), abs=0.005)
    assert float(high.replace(",", "")) == pytest.approx(float(pool_total[-1].replace(",", "")), abs=0.005)


def test_pools_on_request_have_a_whole_stack_row_of_their_own_matching_the_pool_table(synthesized: Synthesized) -> None:
    text = summary.markdown(spec_of("prod-gcp"), "prod-gcp", synthesized("prod-gcp"))
    on_request = cells(next(line for line in text.splitlines() if line.startswith("| on request |")))
    count, low, high = whole_stack(text)["GPU pools on request, once granted (table above)"]
    assert (count, low) == ("1", "0.000")
    assert float(high.replace(",", "")) == pytest.approx(float(on_request[-1].replace(",", "")), abs=0.005)


def test_a_system_instance_type_without_a_price_is_na_and_left_out(synthesized: Synthesized) -> None:
    spec = spec_of("dev-aws")
    settings = spec.aws_settings
    odd = spec.model_copy(
        update={"aws": settings.model_copy(update={"system_nodes": settings.system_nodes.model_copy(update={"instance_type": "x9.odd"})})}
    )
    table = whole_stack(summary.markdown(odd, "dev-aws", synthesized("dev-aws")))
    assert table["system nodes (x9.odd)"] == ("2-3", "n/a", "n/a")
    assert table["**stack total**"][1] == "0.153"


@pytest.mark.parametrize("stack", ["dev-aws", "prod-aws", "dev-gcp", "prod-gcp"])
def test_every_price_is_an_estimate_with_its_date_and_source(stack: str, synthesized: Synthesized) -> None:
    text = summary.markdown(spec_of(stack), stack, synthesized(stack))
    assert f"## Whole stack, $/hour (estimate, list prices of {prices.PRICE_DATE})" in text
    assert f"## Prices (estimates: on-demand list prices, us-east-1 / us-central1, read {prices.PRICE_DATE})" in text
    listed = text.split("## Prices")[1].splitlines()[4:]
    items = {cells(line)[0] for line in listed if line.startswith("|")}
    used = {r.price.item for r in summary.cost_rows(spec_of(stack), synthesized(stack)) if r.price}
    shapes = {p.instance_type for p in spec_of(stack).node_pools}
    assert used | shapes <= items
    assert all(re.search(r"\| \S+\.(com|py)", line) for line in listed if line.startswith("|"))


def test_an_existing_cluster_prices_nothing(synthesized: Synthesized) -> None:
    text = summary.markdown(spec_of("onprem"), "onprem", synthesized("onprem"))
    assert whole_stack(text) == {"GPU pools (table above)": ("2", "n/a", "n/a"), "**stack total**": ("", "n/a", "n/a")}
    assert text.rstrip().endswith("No part of this stack has a price here.")

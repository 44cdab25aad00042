"""Kubernetes quantities read by apimachinery's full grammar: exponents, decimal and binary suffixes."""

from __future__ import annotations

from decimal import Decimal

import pytest

from components.checks.quantities import cpu_millicores, memory_mib, parse_quantity


@pytest.mark.parametrize(
    ("quantity", "value"),
    [
        ("1e3", Decimal(1000)),
        ("129e6", Decimal(129_000_000)),
        ("1T", Decimal(10**12)),
        ("1Pi", Decimal(2**50)),
        ("500m", Decimal("0.5")),
        ("1k", Decimal(1000)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("2E-3", Decimal("0.002")),
        ("+.5", Decimal("0.5")),
        ("100n", Decimal("1E-7")),
        (3, Decimal(3)),
    ],
)
def test_quantities_parse_to_their_exact_value(quantity: object, value: Decimal) -> None:
    assert parse_quantity(quantity) == value


@pytest.mark.parametrize("quantity", ["", "Mi", "1mi", "1.2.3", "1e", "1KiB", "one", True])
def test_what_is_not_a_quantity_is_refused(quantity: object) -> None:
    with pytest.raises(ValueError):
        parse_quantity(quantity)


def test_cpu_reads_in_millicores_rounded_up() -> None:
    assert [cpu_millicores(q) for q in ("500m", "1k", "1e3", "0.0001", "2")] == [500, 1_000_000, 1_000_000, 1, 2000]


def test_memory_reads_in_mib_rounded_up() -> None:
    assert [memory_mib(q) for q in ("129e6", "1T", "1Pi", "1k", "512Mi")] == [124, 953_675, 2**30, 1, 512]


def test_absent_and_unreadable_quantities_count_as_nothing() -> None:
    assert [memory_mib(q) for q in (None, "[unknown]", "lots")] == [0, 0, 0]

"""Kubernetes resource quantities as declared objects and chart values spell them, read back
into the units the checks compare (millicores, MiB).

The grammar is apimachinery's resource.Quantity (k8s.io/apimachinery pkg/api/resource
quantity.go, as kubernetes.utils.parse_quantity reads it): a signed decimal number, then a binary
suffix (Ki Mi Gi Ti Pi Ei), a decimal one (n u m k M G T P E, or none) or a decimal exponent
(`e3`, `E-2`). Values are exact (Decimal) until the final rounding up, as Quantity's MilliValue
and Value round up.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from components.checks.declared import UNKNOWN
from components.node_resources import MIB

_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|([a-zA-Z]*))$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(quantity: Any) -> Decimal:
    """The quantity's exact value in base units (cores, bytes); ValueError when it is none."""
    if isinstance(quantity, bool):
        raise ValueError(f"{quantity!r} is not a Kubernetes quantity")
    if isinstance(quantity, (int, float)):
        return Decimal(str(quantity))
    match = _QUANTITY.match(str(quantity))
    if match is None:
        raise ValueError(f"{quantity!r} is not a Kubernetes quantity")
    number, exponent, suffix = Decimal(match.group(1)), match.group(2), match.group(3) or ""
    if exponent:
        return number.scaleb(int(exponent[1:]))
    if suffix in _BINARY:
        return number * (1024 ** _BINARY[suffix])
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    raise ValueError(f"{quantity!r} has an unknown suffix {suffix!r}")


def _known(quantity: Any) -> Decimal | None:
    if quantity is None or quantity == UNKNOWN:
        return None
    try:
        return parse_quantity(quantity)
    except ValueError:
        return None


def cpu_millicores(quantity: Any) -> int:
    """A Kubernetes CPU quantity ("250m", "2", 2, "1k") in millicores, rounded up; 0 when absent,
    unknown or not a quantity."""
    value = _known(quantity)
    return 0 if value is None else math.ceil(value * 1000)


def memory_mib(quantity: Any) -> int:
    """A Kubernetes memory quantity ("256Mi", "1Gi", "129e6", bytes) in MiB, rounded up; 0 when
    absent, unknown or not a quantity."""
    value = _known(quantity)
    return 0 if value is None else math.ceil(value / MIB)

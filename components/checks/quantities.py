"""Kubernetes resource quantities as declared objects and chart values spell them, read back
into the units the checks compare (millicores, MiB)."""

from __future__ import annotations

import math
import re
from typing import Any

from components.checks.declared import UNKNOWN
from components.node_resources import MIB

# Kubernetes resource quantities as charts and our objects spell them (apimachinery resource.Quantity).
_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_MEMORY_UNITS = {"": 1 / MIB, "Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024, "k": 1e3 / MIB, "M": 1e6 / MIB, "G": 1e9 / MIB}


def cpu_millicores(quantity: Any) -> int:
    """A Kubernetes CPU quantity ("250m", "2", 2) in millicores; 0 when absent or unknown."""
    match = _QUANTITY.match(str(quantity)) if quantity is not None and quantity != UNKNOWN else None
    if match is None:
        return 0
    number, unit = float(match.group(1)), match.group(2)
    return int(number) if unit == "m" else int(number * 1000)


def memory_mib(quantity: Any) -> int:
    """A Kubernetes memory quantity ("256Mi", "1Gi", bytes) in MiB, rounded up; 0 when absent."""
    match = _QUANTITY.match(str(quantity)) if quantity is not None and quantity != UNKNOWN else None
    if match is None or match.group(2) not in _MEMORY_UNITS:
        return 0
    return math.ceil(float(match.group(1)) * _MEMORY_UNITS[match.group(2)])

"""The synthesized objects as the model reads them, and the value readers it needs."""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from components.checks.declared import HELM_RELEASE, KUEUE_TYPE_PREFIX, get, mapping
from components.pools import POOL_LABEL
from infra.tools.simulate.model import ModelError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration_s(text: str) -> float:
    """Seconds of a Go duration string (`15m`, `1h30m`, `90s`), as the autoscaler and Kueue take them."""
    text = text.strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise ModelError(f"not a duration: {text!r}")
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in parts)


def int_of(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit():
        raise ModelError(f"{what}: expected a whole number, got {value!r}")
    return int(value)


def optional_int(value: Any, what: str) -> int | None:
    return None if value is None else int_of(value, what)


class Objects:
    """The synthesized resources, by type."""

    def __init__(self, resources: Sequence[Mapping[str, Any]]) -> None:
        self.by_type: dict[str, list[Mapping[str, Any]]] = {}
        for record in resources:
            self.by_type.setdefault(str(record["type"]), []).append(record)

    def of(self, type_token: str) -> list[Mapping[str, Any]]:
        return self.by_type.get(type_token, [])

    def kueue(self, kind: str) -> list[Mapping[str, Any]]:
        return [r["inputs"] for r in self.of(f"{KUEUE_TYPE_PREFIX}{kind}")]

    def release(self, chart: str) -> Mapping[str, Any] | None:
        """The values of the Helm release of `chart` (`oci://.../kueue` and `kueue` alike)."""
        for record in self.of(HELM_RELEASE):
            if str(get(record["inputs"], "chart")).rsplit("/", 1)[-1] == chart:
                return mapping(get(record["inputs"], "values"))
        return None


def name_of(obj: Mapping[str, Any]) -> str:
    return str(get(obj, "metadata", "name"))


def pool_of(flavor: Mapping[str, Any]) -> str:
    """The pool a ResourceFlavor stands for, the name jobs and traces use: the pool label it
    selects nodes by (`gpu-platform job` selects the same label), else its own name (flavors of
    existing clusters' own selectors). A TAS flavor's name differs from its pool's
    (components.kubernetes.topology.flavor_name)."""
    return str(mapping(get(flavor, "spec", "nodeLabels")).get(POOL_LABEL) or name_of(flavor))


def flavor_pools(objects: Objects) -> dict[str, str]:
    """ResourceFlavor name -> its pool."""
    return {name_of(f): pool_of(f) for f in objects.kueue("ResourceFlavor")}

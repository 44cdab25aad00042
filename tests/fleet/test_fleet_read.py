"""What `simulate` reads of the manager's MultiKueue dispatch (infra.tools.simulate.fleet_read)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.checks.declared import HELM_RELEASE, KUEUE_TYPE_PREFIX
from components.facts import multikueue
from components.fleet.plan import cluster_name
from infra.tools.simulate.fleet_read import read_dispatch
from infra.tools.simulate.model import ModelError

WORKERS = ["prod-aws", "prod-gcp"]


def _manager(step_size: Any) -> list[dict[str, Any]]:
    config = {"multiKueue": {"dispatcherName": multikueue.INCREMENTAL_DISPATCHER, "incrementalDispatcherConfig": {"stepSize": step_size}}}
    return [
        {"type": f"{KUEUE_TYPE_PREFIX}MultiKueueConfig", "inputs": {"metadata": {"name": "fleet"}, "spec": {"clusters": [cluster_name(w) for w in WORKERS]}}},
        {"type": HELM_RELEASE, "inputs": {"chart": "kueue", "values": {"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(config)}}}},
    ]


def test_a_step_size_of_zero_is_refused_naming_the_field() -> None:
    with pytest.raises(ModelError, match=r"multiKueue\.incrementalDispatcherConfig\.stepSize 0"):
        read_dispatch(_manager(0), WORKERS)

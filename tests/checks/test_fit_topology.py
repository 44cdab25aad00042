"""`job-fits-pool` and Kueue Topology-Aware Scheduling: a flavor that places by a Topology needs
it declared, its levels on the pool's nodes, and nodes Kueue can count. Each planted miss edits
prod-gcp's synthesized resources."""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from test_job_fits_pool import find, misfits

from infra.synth import Synthesis

Records = list[dict[str, Any]]


@pytest.fixture(scope="module")
def records(synthesized: Callable[[str], Synthesis]) -> Callable[[str], Records]:
    return lambda stack: copy.deepcopy(synthesized(stack).resources)


def test_an_undeclared_topology_admits_nothing(records: Callable[[str], Records]) -> None:
    declared = [r for r in records("prod-gcp") if not r["type"].endswith(":Topology")]
    assert "pool h200-train, job 4 node(s) x 8 GPU(s): flavor h200-train-tas names Topology gpu-fabric, which is not declared: " \
        "Kueue would admit nothing there" in misfits("prod-gcp", declared)


def test_a_level_the_nodes_do_not_carry_leaves_no_domain(records: Callable[[str], Records]) -> None:
    declared = records("prod-gcp")
    topology = next(r for r in declared if r["type"].endswith(":Topology"))
    topology["inputs"]["spec"]["levels"].insert(0, {"nodeLabel": "example.com/rack"})
    found = [m for m in misfits("prod-gcp", declared) if "carry no" in m]
    assert found and all("carry no example.com/rack label" in m and "pool h200-train" in m for m in found)


def test_a_topology_flavor_on_a_pool_scaling_from_zero_never_admits_its_jobs(records: Callable[[str], Records]) -> None:
    declared = records("prod-gcp")
    find(declared, "ResourceFlavor", "ml-prod-gpu-h100-train")["inputs"]["spec"]["topologyName"] = "gpu-fabric"
    found = [m for m in misfits("prod-gcp", declared) if "counts only Ready nodes" in m]
    assert found and all("pool h100-train (0 standing)" in m for m in found)


def test_the_queued_pool_s_provisioning_request_lets_kueue_place_new_nodes(records: Callable[[str], Records]) -> None:
    assert not [m for m in misfits("prod-gcp", records("prod-gcp")) if "Topology" in m]

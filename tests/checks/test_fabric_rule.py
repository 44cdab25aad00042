"""`multi-node-fabric-wired`: the largest job of every fabric pool carries its cloud's wiring and the
fabric gate; each planted miss removes one piece from what the renderer produces."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import REPO

from components.checks.rules import base, registry
from components.facts.rule_catalog import RULES_BY_ID
from components.jobs import fabric, renderer
from infra import stackfile


def violations(stack: str) -> list[str]:
    ctx = base.context_of(stackfile.read(stack, REPO).spec())
    return [v.message for v in registry.CHECKS["multi-node-fabric-wired"]([], ctx)]


def test_the_rule_is_mandatory() -> None:
    assert RULES_BY_ID["multi-node-fabric-wired"].enforcement == "mandatory"


@pytest.mark.parametrize("stack", ["prod-aws", "prod-gcp", "dev-aws", "dev-gcp", "onprem"])
def test_the_example_stacks_wire_their_fabric_pools(stack: str) -> None:
    assert violations(stack) == []


def test_a_job_without_the_efa_provider_setting_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = fabric.env

    def without_provider(*args: Any) -> list[dict[str, Any]]:
        return [e for e in real(*args) if e["name"] != "FI_PROVIDER"]

    monkeypatch.setattr(fabric, "env", without_provider)
    assert violations("prod-aws") == [
        f"pool {pool} ({shape}), job {nodes} node(s): FI_PROVIDER=efa not set (libfabric would not pick the EFA provider)"
        for pool, shape, nodes in (("h100-train", "p5.48xlarge", 8), ("h200-train", "p5en.48xlarge", 4))
    ]


def test_a_job_without_efa_devices_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(renderer, "_efa_devices", lambda *args: 0)
    found = violations("prod-aws")
    assert "pool h100-train (p5.48xlarge), job 8 node(s): no vpc.amazonaws.com/efa devices requested" in found


def test_a_job_whose_gate_is_not_enforced_is_refused_on_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fabric, "trainer_flags", lambda *args: {fabric.FABRIC_CHECK: "warn"})
    assert "pool h100-train (p5.48xlarge), job 8 node(s): the fabric gate is not enforced with a floor " \
        "(--fabric-check warn)" in violations("prod-aws")


def test_a_gke_job_without_any_gate_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fabric, "trainer_flags", lambda *args: {})
    assert violations("prod-gcp") == [
        f"pool {pool} ({shape}), job {nodes} node(s): no fabric gate (--fabric-check off): a socket fallback would go unreported"
        for pool, shape, nodes in (("h100-train", "a3-highgpu-8g", 8), ("h200-train", "a3-ultragpu-8g", 4))
    ]

"""`multi-node-fabric-wired`: the largest job of every fabric pool carries its cloud's wiring and the
fabric gate; each planted miss removes one piece from what the renderer produces."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import REPO

from components.checks.declared import Resource
from components.checks.rules import base, registry
from components.facts.rule_catalog import RULES_BY_ID
from components.gcp import gpudirect as gke_objects
from components.jobs import fabric, renderer
from components.kubernetes import gpudirect_pod
from components.pools import INTERFACES_ANNOTATION, fabric_pools
from infra import stackfile


def violations(stack: str, resources: list[Resource] | None = None) -> list[str]:
    ctx = base.context_of(stackfile.read(stack, REPO).spec())
    return [v.message for v in registry.CHECKS["multi-node-fabric-wired"](resources or [], ctx)]


def installers(stack: str) -> list[Resource]:
    """The DaemonSets the GCP wing declares for the stack's GPUDirect pools, as the check reads them."""
    pools = fabric_pools(stackfile.read(stack, REPO).spec())
    return [Resource("kubernetes:apps/v1:DaemonSet", obj["metadata"]["name"], obj) for obj in gke_objects.daemon_sets(pools)]


GKE_POOLS = (("h100-train", "a3-highgpu-8g", 8), ("h200-train", "a3-ultragpu-8g", 4))


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


def test_a_gke_gpudirect_job_whose_gate_is_not_enforced_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fabric, "trainer_flags", lambda *args: {fabric.FABRIC_CHECK: "warn"})
    assert violations("prod-gcp") == [
        f"pool {pool} ({shape}), job {nodes} node(s): the fabric gate is not enforced with a floor (--fabric-check warn)"
        for pool, shape, nodes in GKE_POOLS
    ]


def test_a_gke_fast_pool_without_multi_gpu_training_still_needs_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """No `multiGpuTraining`: no GPUDirect wiring, but a multi-node job still runs the gate."""
    raw = stackfile.read("prod-gcp", REPO)
    spec = raw.spec()
    pools = [p.model_copy(update={"multi_gpu_training": False}) if p.name == "h100-train" else p for p in spec.node_pools]
    ctx = base.context_of(spec.model_copy(update={"node_pools": pools}))
    monkeypatch.setattr(fabric, "trainer_flags", lambda *args: {})
    found = [v.message for v in registry.CHECKS["multi-node-fabric-wired"]([], ctx)]
    assert "pool h100-train (a3-highgpu-8g), job 8 node(s): no fabric gate (--fabric-check off): " \
        "a socket fallback would go unreported" in found


def test_the_example_gke_stack_s_installers_satisfy_the_rule() -> None:
    assert violations("prod-gcp", installers("prod-gcp")) == []


def test_a_gke_stack_without_its_rdma_installer_is_refused() -> None:
    without = [r for r in installers("prod-gcp") if r.name != "nccl-rdma-installer"]
    assert violations("prod-gcp", without) == [
        "pool h200-train (a3-ultragpu-8g), job 4 node(s): no nccl-rdma-installer DaemonSet "
        "(us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1) on the pool's nodes"
    ]


def test_a_gke_job_without_its_interfaces_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = gpudirect_pod.gke_annotations

    def without_interfaces(*args: Any) -> dict[str, str]:
        return {k: v for k, v in real(*args).items() if k != INTERFACES_ANNOTATION}

    monkeypatch.setattr(gpudirect_pod, "gke_annotations", without_interfaces)
    found = violations("prod-gcp")
    assert len(found) == 2
    assert found[0] == ("pool h100-train (a3-highgpu-8g), job 8 node(s): the pod's networking.gke.io/interfaces do not "
                        "attach the pool's GPU networks (h100-train-vpc1, h100-train-vpc2, h100-train-vpc3, "
                        "h100-train-vpc4): NCCL would see only eth0")


def test_a_tcpx_job_without_its_daemon_sidecar_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpudirect_pod, "gke_sidecars", lambda *args: [])
    assert violations("prod-gcp") == [
        "pool h100-train (a3-highgpu-8g), job 8 node(s): no tcpx-daemon sidecar with its GPU devices "
        "(us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12): the plugin has no receive datapath"
    ]


def test_a_gke_job_without_the_host_plugin_mount_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpudirect_pod, "gke_trainer_mounts", lambda *args: [])
    found = violations("prod-gcp")
    assert "pool h100-train (a3-highgpu-8g), job 8 node(s): the trainer does not mount " \
        "/home/kubernetes/bin/nvidia/lib64 at /usr/local/nvidia/lib64: NCCL finds no GPUDirectTCPX plugin" in found
    assert "pool h200-train (a3-ultragpu-8g), job 4 node(s): the trainer does not mount " \
        "/home/kubernetes/bin/gib at /usr/local/gib: NCCL finds no gIB plugin" in found


def test_a_gib_job_that_does_not_select_the_gib_network_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = fabric.env

    def without_net(*args: Any) -> list[dict[str, Any]]:
        return [e for e in real(*args) if e["name"] != "NCCL_NET"]

    monkeypatch.setattr(fabric, "env", without_net)
    assert violations("prod-gcp") == [
        "pool h200-train (a3-ultragpu-8g), job 4 node(s): the RDMA NCCL environment is not set: NCCL_NET"
    ]

"""GKE GPUDirect on prod-gcp's A3 pools as synthesized: the GPU networks Compute Engine creates,
the NICs GKE attaches to the pools' nodes, the objects multi-networking reads, and the plugin
installers; dev-gcp (no GPUDirect pool) gets none of it."""

from __future__ import annotations

import copy
from typing import Any, Callable

import jsonschema
import kubernetes_validate
import pytest
from gcp_support import cluster, messages_at, node_pool, platform, synthesize
from k8s_support import crd_schema

from infra.synth import Synthesis

NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"


@pytest.fixture(scope="module")
def prod(synthesized: Callable[[str], Synthesis]) -> Synthesis:
    return synthesized("prod-gcp")


@pytest.fixture(scope="module")
def dev(synthesized: Callable[[str], Synthesis]) -> Synthesis:
    return synthesized("dev-gcp")


def networks(synthesis: Synthesis) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["name"]: r["inputs"] for r in synthesis.by_type(NETWORK)}


def subnets(synthesis: Synthesis) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["name"]: r["inputs"] for r in synthesis.by_type(SUBNET)}


def objects(synthesis: Synthesis, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in synthesis.kubernetes_objects() if o["kind"] == kind}


def test_the_tcpx_pool_gets_four_gpu_vpcs_with_the_documented_mtu(prod: Synthesis) -> None:
    gpu = {name: vpc["mtu"] for name, vpc in networks(prod).items() if name.startswith("ml-prod-h100-train-gpu-")}
    assert gpu == {f"ml-prod-h100-train-gpu-{i}": 8244 for i in range(1, 5)}


def test_the_rdma_pool_gets_a_gvnic_vpc_and_a_roce_vpc_of_its_zone_with_eight_subnets(prod: Synthesis) -> None:
    vpcs = networks(prod)
    assert vpcs["ml-prod-h200-train-gvnic"]["mtu"] == 8896 and "networkProfile" not in vpcs["ml-prod-h200-train-gvnic"]
    roce = vpcs["ml-prod-h200-train-rdma"]
    assert (roce["mtu"], roce["networkProfile"]) == (8896, "projects/my-ml-prod/global/networkProfiles/us-central1-b-vpc-roce")
    rdma = sorted(name for name in subnets(prod) if name.startswith("ml-prod-h200-train-rdma-"))
    assert rdma == [f"ml-prod-h200-train-rdma-{i}" for i in range(8)]


def test_no_two_gpu_subnets_overlap(prod: Synthesis) -> None:
    cidrs = [s["ipCidrRange"] for name, s in subnets(prod).items() if name != "ml-prod-subnet"]
    assert len(cidrs) == 4 + 1 + 8 and len(set(cidrs)) == len(cidrs)


def test_the_cluster_turns_on_multi_networking_over_dataplane_v2(prod: Synthesis, dev: Synthesis) -> None:
    inputs = cluster(prod)["inputs"]
    assert (inputs["enableMultiNetworking"], inputs["datapathProvider"]) == (True, "ADVANCED_DATAPATH")
    assert "enableMultiNetworking" not in cluster(dev)["inputs"]


@pytest.mark.parametrize(("pool", "nics"), [
    ("h100-train", [(f"ml-prod-h100-train-gpu-{i}", f"ml-prod-h100-train-gpu-{i}") for i in range(1, 5)]),
    ("h200-train", [("ml-prod-h200-train-gvnic", "ml-prod-h200-train-gvnic")]
     + [("ml-prod-h200-train-rdma", f"ml-prod-h200-train-rdma-{i}") for i in range(8)]),
])
def test_gpudirect_pools_attach_their_nics_in_order_over_gvnic(prod: Synthesis, pool: str, nics: list[tuple[str, str]]) -> None:
    inputs = node_pool(prod, pool)["inputs"]
    attached = [(n["network"], n["subnetwork"]) for n in inputs["networkConfig"]["additionalNodeNetworkConfigs"]]
    assert attached == nics
    assert inputs["nodeConfig"]["gvnic"] == {"enabled": True}


def test_pools_without_gpudirect_get_no_extra_nics(prod: Synthesis, dev: Synthesis) -> None:
    assert "networkConfig" not in node_pool(prod, "l4-eval")["inputs"]
    assert [n for n in networks(dev) if n != "ml-dev-vpc"] == []


def test_each_gpu_subnet_has_a_network_and_param_set_naming_it(prod: Synthesis) -> None:
    param_sets, nets = objects(prod, "GKENetworkParamSet"), objects(prod, "Network")
    assert set(param_sets) == set(nets) == {f"h100-train-vpc{i}" for i in range(1, 5)} | {
        "h200-train-gvnic-1", *(f"h200-train-rdma-{i}" for i in range(8))}
    assert param_sets["h200-train-rdma-3"]["spec"] == {
        "vpc": "ml-prod-h200-train-rdma", "vpcSubnet": "ml-prod-h200-train-rdma-3", "deviceMode": "RDMA"}
    assert param_sets["h100-train-vpc2"]["spec"]["deviceMode"] == "NetDevice"
    for name, net in nets.items():
        assert net["spec"] == {"type": "Device", "parametersRef": {
            "group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name}}
    subnet_names = set(subnets(prod))
    assert {p["spec"]["vpcSubnet"] for p in param_sets.values()} <= subnet_names


def test_the_networking_objects_validate_against_the_upstream_types_with_unknown_fields_as_errors(prod: Synthesis) -> None:
    found = [o for o in prod.kubernetes_objects() if o["apiVersion"] == "networking.gke.io/v1"]
    assert len(found) == 2 * 13
    for obj in found:
        jsonschema.validate(obj, crd_schema(obj["apiVersion"], obj["kind"]))


def test_a_misspelt_device_mode_is_refused_by_the_schema(prod: Synthesis) -> None:
    obj = objects(prod, "GKENetworkParamSet")["h200-train-rdma-0"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**obj, "spec": {**obj["spec"], "deviceMode": "Rdma"}}, crd_schema(obj["apiVersion"], obj["kind"]))


def pools_of(daemon_set: dict[str, Any]) -> list[str]:
    terms = daemon_set["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return [v for t in terms for e in t["matchExpressions"] if e["key"] == "cloud.google.com/gke-nodepool" for v in e["values"]]


@pytest.mark.parametrize(("name", "image", "pools"), [
    ("nccl-tcpx-installer", "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9", ["h100-train"]),
    ("nccl-rdma-installer", "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1", ["h200-train"]),
    ("device-injector", "gcr.io/gke-release/nri-device-injector@sha256:"
     "6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970", ["h100-train"]),
])
def test_each_family_s_installer_runs_pinned_on_its_pools_only(prod: Synthesis, name: str, image: str, pools: list[str]) -> None:
    daemon_set = objects(prod, "DaemonSet")[name]
    pod = daemon_set["spec"]["template"]["spec"]
    images = [c["image"] for c in pod.get("initContainers", []) + pod["containers"]]
    assert image in images and pools_of(daemon_set) == pools
    assert daemon_set["metadata"]["namespace"] == "kube-system"


def test_the_installers_validate_as_kubernetes_1_33_daemon_sets(prod: Synthesis) -> None:
    for obj in objects(prod, "DaemonSet").values():
        kubernetes_validate.validate(obj, "1.33", strict=True)


def test_the_rdma_installer_puts_the_plugin_where_the_pods_mount_it(prod: Synthesis) -> None:
    pod = objects(prod, "DaemonSet")["nccl-rdma-installer"]["spec"]["template"]["spec"]
    assert {v["hostPath"]["path"] for v in pod["volumes"]} == {"/home/kubernetes/bin/nvidia/lib64", "/home/kubernetes/bin/gib"}


def test_a_stack_without_gpudirect_pools_declares_no_gpudirect_objects(dev: Synthesis) -> None:
    kinds = {o["kind"] for o in dev.kubernetes_objects()}
    assert not {"Network", "GKENetworkParamSet", "DaemonSet"} & kinds


def test_an_a3_mega_pool_gets_eight_gpu_vpcs_and_the_tcpxo_installer_with_its_host_preparation() -> None:
    raw = platform("prod-gcp")
    raw["nodePools"][0].update(instanceType="a3-megagpu-8g", provisioning="spot")
    raw["nodePools"][0].pop("capacity", None)
    mega = synthesize(raw, "prod-gcp")
    assert len([n for n in networks(mega) if n.startswith("ml-prod-h100-train-gpu-")]) == 8
    installer = objects(mega, "DaemonSet")["nccl-tcpxo-installer"]
    init = installer["spec"]["template"]["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["host-preparation", "nccl-tcpxo-installer"]
    assert init[1]["image"] == "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15"
    assert pools_of(objects(mega, "DaemonSet")["device-injector"]) == ["h100-train"]
    kubernetes_validate.validate(installer, "1.33", strict=True)


def test_gpudirect_node_pools_are_deleted_before_they_are_replaced_and_others_are_not(prod: Synthesis) -> None:
    pools = {r["name"]: r["options"]["deleteBeforeReplace"] for r in prod.resources if r["type"] == "gcp:container/nodePool:NodePool"}
    assert pools["ml-prod-h100-train"] and pools["ml-prod-h200-train"]
    assert not pools["ml-prod-l4-eval"]


def test_adding_a_gpudirect_pool_before_another_leaves_the_other_s_subnet_ranges_unchanged(prod: Synthesis) -> None:
    raw = platform("prod-gcp")
    first = copy.deepcopy(next(p for p in raw["nodePools"] if p["name"] == "h100-train"))
    raw["nodePools"].insert(0, {**first, "name": "h100-extra"})
    grown = synthesize(raw, "prod-gcp")
    before, after = subnets(prod), subnets(grown)
    kept = {name: s["ipCidrRange"] for name, s in before.items()}
    assert kept and {name: after[name]["ipCidrRange"] for name in kept} == kept
    assert len(after) > len(before)


def test_two_gpudirect_pools_on_one_subnet_slot_are_refused_naming_the_field() -> None:
    raw = platform("prod-gcp")
    names = [p["name"] for p in raw["nodePools"]]
    for pool in raw["nodePools"]:
        if pool["name"] in ("h100-train", "h200-train"):
            pool["gpuSubnetSlot"] = 3
    [message] = messages_at(raw, f"platform.nodePools[{names.index('h200-train')}].gpuSubnetSlot")
    assert "slot 3, which pool h100-train takes" in message


def test_gpu_networks_carry_the_cluster_prefix_once_in_their_pulumi_names(prod: Synthesis) -> None:
    names = [r["name"] for r in prod.resources if r["type"] in (NETWORK, SUBNET, "gcp:compute/firewall:Firewall")]
    assert "ml-prod-h100-train-gpu-1" in names and "ml-prod-h100-train-gpu-1-internal" in names
    assert not [n for n in names if n.startswith("ml-prod-ml-prod-")]

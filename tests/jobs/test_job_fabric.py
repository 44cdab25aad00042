"""`gpu-platform job` and the fabric: the gate's mode and floor per pool, and the environment
NCCL's network plugin reads, as the trainer's own parser and libfabric would read them."""

from __future__ import annotations

import json
import re
from typing import Any

import kubernetes_validate
import pytest
import yaml
from test_job_render import container_of, env_of, job_of, render
from trainer import config as trainer_config
from trainer import fabric as trainer_fabric

from components.facts import catalog
from components.facts.fabric import FABRICS, FLOOR_FRACTION
from components.facts.gpudirect import GPUDIRECT
from components.jobs import fabric, renderer
from components.kubernetes import gpudirect_pod
from components.pools import DEFAULT_INTERFACE_ANNOTATION, INTERFACES_ANNOTATION, fabric_pools


def trainer_cfg(jobset: dict[str, Any]) -> trainer_config.TrainConfig:
    """The trainer's configuration as the pods parse it: what follows `-m trainer` in the args."""
    args = container_of(jobset)["args"]
    cfg = trainer_config.parse(args[args.index("trainer") + 1:])
    assert isinstance(cfg, trainer_config.TrainConfig)
    return cfg


def test_every_fast_interconnect_shape_has_a_fabric_floor() -> None:
    fast = {name for name, shape in catalog.INSTANCE_TYPES.items() if shape.fast_interconnect}
    assert fast == set(FABRICS)


def test_p5_floor_is_a_quarter_of_3200_gbps_in_gigabytes() -> None:
    assert FLOOR_FRACTION == 0.25
    assert FABRICS["p5.48xlarge"].floor_gbps == 100.0


def test_multi_node_job_on_efa_pool_enforces_the_gate_with_the_shape_floor() -> None:
    cfg = trainer_cfg(render("prod-aws", pool="h100-train", nodes=2, gpus_per_node=8, team="research"))
    assert cfg.fabric_check == "enforce"
    assert cfg.fabric_floor_gbps == FABRICS["p5.48xlarge"].floor_gbps


def test_single_node_job_skips_the_gate() -> None:
    cfg = trainer_cfg(render("prod-aws", pool="h100-train", nodes=1, gpus_per_node=8, team="research"))
    assert cfg.fabric_check == "off"


def test_partial_node_job_on_efa_pool_only_warns() -> None:
    """Without every GPU of the node the pod claims no EFA device: NCCL will use sockets, which
    the gate measures and reports without stopping the job."""
    cfg = trainer_cfg(render("prod-aws", pool="h100-train", nodes=2, gpus_per_node=4, team="research"))
    assert cfg.fabric_check == "warn" and cfg.fabric_floor_gbps is None


@pytest.mark.parametrize(("pool", "shape"), [("h100-train", "a3-highgpu-8g"), ("h200-train", "a3-ultragpu-8g")])
def test_gcp_multi_node_job_on_a_gpudirect_pool_enforces_the_gate_with_the_shape_floor(pool: str, shape: str) -> None:
    cfg = trainer_cfg(render("prod-gcp", pool=pool, nodes=2, gpus_per_node=8, team="research"))
    assert cfg.fabric_check == "enforce"
    assert cfg.fabric_floor_gbps == FABRICS[shape].floor_gbps


def test_partial_node_job_on_a_gpudirect_pool_only_warns() -> None:
    """GPUDirect wants every GPU and GPU NIC of the node: a 4-GPU pod gets no wiring, NCCL uses
    the primary NIC, and the gate reports it without stopping the job."""
    cfg = trainer_cfg(render("prod-gcp", pool="h100-train", nodes=2, gpus_per_node=4, team="research"))
    assert cfg.fabric_check == "warn" and cfg.fabric_floor_gbps is None


def test_a_users_fabric_flag_wins() -> None:
    jobset = render("prod-aws", pool="h100-train", nodes=2, gpus_per_node=8, team="research",
                    trainer_args=["--preset", "small", "--max-steps", "100", "--checkpoint-every", "50",
                                  "--global-batch-size", "64", "--seq-len", "512", "--seed", "1",
                                  "--data", "/data/datasets/corpus", "--fabric-check", "off"])
    assert trainer_cfg(jobset).fabric_check == "off"


def test_p5_job_sets_libfabric_efa_rdma_and_the_node_name() -> None:
    env = env_of(render("prod-aws", pool="h100-train", nodes=2, gpus_per_node=8, team="research"))
    assert env["FI_PROVIDER"]["value"] == "efa"
    assert env["FI_EFA_USE_DEVICE_RDMA"]["value"] == "1"
    assert env["FI_EFA_FORK_SAFE"]["value"] == "1"
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_single_node_job_carries_no_fabric_environment() -> None:
    env = env_of(render("prod-aws", pool="h100-train", nodes=1, gpus_per_node=8, team="research"))
    assert not {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NODE_NAME"} & set(env)


def pod_failure_action(job: dict[str, Any], exit_code: int, disrupted: bool) -> tuple[str, str] | None:
    """(action, the Job's failure message) for a failed pod, as the Job controller evaluates its
    podFailurePolicy: rules in order, the first match wins; FailJob's message is the one
    kubernetes pkg/controller/job/pod_failure_policy.go writes."""
    for index, rule in enumerate(job["podFailurePolicy"]["rules"]):
        codes = rule.get("onExitCodes")
        conditions = rule.get("onPodConditions")
        if (codes and codes["operator"] == "In" and exit_code in codes["values"]) or (conditions and disrupted):
            message = (f"Container trainer for pod research/train-node-0-0-abcde failed with exit code {exit_code} "
                       f"matching {rule['action']} rule at index {index}")
            return rule["action"], message
    return None


def jobset_action(jobset: dict[str, Any], reason: str, message: str) -> str:
    """The JobSet controller's first matching failurePolicy rule (RestartJobSet when none);
    message patterns are regular expressions searched in the Job's failure message."""
    for rule in jobset["spec"]["failurePolicy"]["rules"]:
        reasons, patterns = rule.get("onJobFailureReasons") or [], rule.get("onJobFailureMessagePatterns") or []
        if (not reasons or reason in reasons) and (not patterns or any(re.search(p, message) for p in patterns)):
            return str(rule["action"])
    return "RestartJobSet"


def test_a_stopped_fabric_gate_fails_the_jobset_without_a_restart() -> None:
    jobset = render("prod-aws", pool="h100-train", nodes=2, gpus_per_node=8, team="research")
    found = pod_failure_action(job_of(jobset), fabric.EXIT_FABRIC, disrupted=False)
    assert found is not None and found[0] == "FailJob"
    assert jobset_action(jobset, "PodFailurePolicy", found[1]) == "FailJobSet"


def test_a_disruption_still_restarts_the_jobset_for_free_and_a_crash_counts() -> None:
    jobset = render("prod-aws", pool="h100-train", nodes=2, gpus_per_node=8, team="research")
    found = pod_failure_action(job_of(jobset), 143, disrupted=True)
    assert found is not None and jobset_action(jobset, "PodFailurePolicy", found[1]) == "RestartJobSetAndIgnoreMaxRestarts"
    assert pod_failure_action(job_of(jobset), 1, disrupted=False) is None
    assert jobset_action(jobset, "BackoffLimitExceeded", "Job has reached the specified backoff limit") == "RestartJobSet"


def test_the_gate_s_marker_is_the_file_the_pod_s_entry_reads() -> None:
    jobset = render("prod-aws", pool="h100-train", nodes=2, gpus_per_node=8, team="research")
    assert env_of(jobset)[fabric.MARKER_ENV]["value"] == fabric.FABRIC_MARKER
    assert f'os.environ.get("{fabric.MARKER_ENV}"' in container_of(jobset)["command"][2]


# --- GKE GPUDirect: what multi-networking, the NRI injector, the kubelet and NCCL read ------------

def template_of(jobset: dict[str, Any]) -> dict[str, Any]:
    return job_of(jobset)["template"]


def gke_job(pool: str, nodes: int = 2) -> dict[str, Any]:
    return render("prod-gcp", pool=pool, nodes=nodes, gpus_per_node=8, team="research")


def declared_networks() -> set[str]:
    """The `Network` objects the GCP wing declares for prod-gcp's GPUDirect pools."""
    from test_job_render import spec
    return {subnet.network_object for pool in fabric_pools(spec("prod-gcp")) for _, subnet in pool.subnets}


@pytest.mark.parametrize(("pool", "interfaces"), [
    ("h100-train", [("eth1", "h100-train-vpc1"), ("eth2", "h100-train-vpc2"), ("eth3", "h100-train-vpc3"),
                    ("eth4", "h100-train-vpc4")]),
    ("h200-train", [(f"eth{i + 2}", f"h200-train-rdma-{i}") for i in range(8)]),
])
def test_a_two_node_gke_job_attaches_the_pool_s_gpu_networks(pool: str, interfaces: list[tuple[str, str]]) -> None:
    annotations = template_of(gke_job(pool))["metadata"]["annotations"]
    assert annotations[DEFAULT_INTERFACE_ANNOTATION] == "eth0"
    attached = [(i["interfaceName"], i["network"]) for i in json.loads(annotations[INTERFACES_ANNOTATION])]
    assert attached == [("eth0", "default"), *interfaces]
    assert {network for _, network in interfaces} <= declared_networks()


def test_a_tcpx_job_runs_the_receive_datapath_daemon_as_a_native_sidecar_with_its_gpu_devices() -> None:
    template = template_of(gke_job("h100-train"))
    [daemon] = template["spec"]["initContainers"]
    assert (daemon["name"], daemon["restartPolicy"], daemon["image"]) == (
        "tcpx-daemon", "Always", "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12")
    assert daemon["securityContext"]["capabilities"] == {"add": ["NET_ADMIN"]}
    assert "privileged" not in daemon["securityContext"]
    devices = yaml.safe_load(template["metadata"]["annotations"]["devices.gke.io/container.tcpx-daemon"])
    assert [d["path"] for d in devices][:8] == [f"/dev/nvidia{i}" for i in range(8)]


def test_the_tcpx_daemon_and_nccl_meet_on_a_socket_directory_of_the_pod() -> None:
    template = template_of(gke_job("h100-train"))
    pod = template["spec"]
    [daemon], trainer = pod["initContainers"], container_of(gke_job("h100-train"))
    socket = [v for v in pod["volumes"] if v["name"] == gpudirect_pod.TCPX_SOCKET_VOLUME]
    assert socket == [{"name": gpudirect_pod.TCPX_SOCKET_VOLUME, "emptyDir": {}}]
    for c in (daemon, trainer):
        assert {"name": gpudirect_pod.TCPX_SOCKET_VOLUME, "mountPath": "/run/tcpx"} in c["volumeMounts"]
    assert env_of(gke_job("h100-train"))["NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"]["value"] == "/run/tcpx"
    assert daemon["args"][daemon["args"].index("--uds_path") + 1] == "/run/tcpx"


@pytest.mark.parametrize(("pool", "mounts"), [
    ("h100-train", {("/home/kubernetes/bin/nvidia/lib64", "/usr/local/nvidia/lib64")}),
    ("h200-train", {("/home/kubernetes/bin/nvidia", "/usr/local/nvidia"), ("/home/kubernetes/bin/gib", "/usr/local/gib")}),
])
def test_the_trainer_reads_the_installed_plugin_from_the_host_read_only(pool: str, mounts: set[tuple[str, str]]) -> None:
    jobset = gke_job(pool)
    hosts = {v["name"]: v["hostPath"]["path"] for v in template_of(jobset)["spec"]["volumes"] if "hostPath" in v}
    trainer_mounts = {(hosts[m["name"]], m["mountPath"]) for m in container_of(jobset)["volumeMounts"] if m["name"] in hosts}
    assert trainer_mounts == mounts
    assert all(m.get("readOnly") for m in container_of(jobset)["volumeMounts"] if m["name"] in hosts)


def test_the_trainer_itself_keeps_the_restricted_security_context_on_gke_fabric_pools() -> None:
    assert container_of(gke_job("h200-train"))["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 10001, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_an_rdma_job_needs_no_sidecar_and_makes_nccl_use_gib_or_fail() -> None:
    jobset = gke_job("h200-train")
    assert "initContainers" not in template_of(jobset)["spec"]
    env = env_of(jobset)
    assert env["NCCL_NET"]["value"] == "gIB" and "gIB" in trainer_fabric.FABRIC
    assert env["NCCL_TUNER_CONFIG_PATH"]["value"] == "/usr/local/gib/configs/tuner_config_a3u.txtpb"
    assert env["LD_LIBRARY_PATH"]["value"] == "/usr/local/nvidia/lib64"


@pytest.mark.parametrize("shape", sorted(GPUDIRECT))
def test_every_gpudirect_family_s_plugin_is_a_transport_the_gate_recognises(shape: str) -> None:
    family = GPUDIRECT[shape]
    assert family.net in trainer_fabric.FABRIC and FABRICS[shape].network == family.net


def test_a_tcpx_job_carries_the_family_s_documented_nccl_environment() -> None:
    env = env_of(gke_job("h100-train"))
    assert {k: env[k]["value"] for k in GPUDIRECT["a3-highgpu-8g"].env} == GPUDIRECT["a3-highgpu-8g"].env
    assert env["NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"]["value"] == "eth1,eth2,eth3,eth4"


@pytest.mark.parametrize("pool", ["h100-train", "h200-train"])
def test_a_single_node_gke_job_carries_none_of_the_gpudirect_wiring(pool: str) -> None:
    jobset = gke_job(pool, nodes=1)
    template = template_of(jobset)
    annotations = template.get("metadata", {}).get("annotations", {})
    assert not [k for k in annotations if k.startswith(("networking.gke.io/", "devices.gke.io/"))]
    assert "initContainers" not in template["spec"]
    assert not [v for v in template["spec"]["volumes"] if "hostPath" in v]
    assert not [k for k in env_of(jobset) if k.startswith("NCCL_") or k == "LD_LIBRARY_PATH"]


def mega_spec() -> Any:
    """prod-gcp with its H100 pool on A3 Mega (GPUDirect-TCPXO), which no example stack uses."""
    from helpers import platform_of
    from k8s_support import spec_of

    platform = platform_of("prod-gcp")
    pool = platform["nodePools"][0]
    pool.update(instanceType="a3-megagpu-8g", provisioning="spot")
    pool.pop("capacity", None)
    return spec_of(platform)


def tcpxo_job() -> dict[str, Any]:
    return renderer.render(mega_spec(), renderer.JobRequest(
        pool="h100-train", nodes=2, gpus_per_node=8, team="research", tier="production",
        image="registry.invalid/trainer:1", trainer_args=["--preset", "tiny", "--max-steps", "1", "--checkpoint-every", "1",
                                                          "--global-batch-size", "16", "--seq-len", "128", "--seed", "0",
                                                          "--data", "/data/datasets/corpus"]))


def test_a_tcpxo_job_s_nccl_env_is_the_pinned_installer_release_s_list() -> None:
    from components.facts import gpudirect

    assert gpudirect.TCPXO.installer_image.endswith(":" + gpudirect.TCPXO_RELEASE) and gpudirect.TCPXO_RELEASE == "v1.0.15"
    env = {k: v["value"] for k, v in env_of(tcpxo_job()).items() if "value" in v}
    release = dict(line.split("=", 1) for line in gpudirect.TCPXO_NCCL_CONFIGS)
    assert {k: env[k].replace("/usr/local/nvidia/lib64/", "/usr/local/tcpxo/lib64/") for k in release} == release
    assert env["NCCL_NVLSTREE_MAX_CHUNKSIZE"] == "131072" and env["NCCL_NVLS_ENABLE"] == "1"
    assert "NCCL_ALGO" not in env and "NCCL_DYNAMIC_CHUNK_SIZE" not in env


def test_the_tcpxo_guest_config_and_tuner_are_read_where_the_trainer_mounts_the_installer_s_libraries() -> None:
    env = env_of(tcpxo_job())
    mounts = {m["mountPath"] for m in container_of(tcpxo_job())["volumeMounts"]}
    for key in ("NCCL_TUNER_CONFIG_PATH", "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE"):
        assert env[key]["value"].rsplit("/", 1)[0] in mounts


def test_a_tcpxo_job_runs_its_daemon_with_the_dma_buf_helper_and_reads_the_aperture_devices() -> None:
    jobset = tcpxo_job()
    template = template_of(jobset)
    [daemon] = template["spec"]["initContainers"]
    assert (daemon["name"], daemon["restartPolicy"]) == ("tcpxo-daemon", "Always")
    assert daemon["securityContext"]["capabilities"] == {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}
    devices = yaml.safe_load(template["metadata"]["annotations"]["devices.gke.io/container.tcpxo-daemon"])
    assert {"path": "/dev/dmabuf_import_helper"} in devices
    env = env_of(jobset)
    assert env["NCCL_FASTRAK_IFNAME"]["value"] == "eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8"
    assert env["NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"]["value"] == "/dev/aperture_devices"
    assert {"name": "aperture-devices", "mountPath": "/dev/aperture_devices", "readOnly": True} in container_of(jobset)["volumeMounts"]
    attached = json.loads(template["metadata"]["annotations"][INTERFACES_ANNOTATION])
    assert [i["network"] for i in attached][1:] == [f"h100-train-vpc{i}" for i in range(1, 9)]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-node-0-0", **template["metadata"]}, "spec": template["spec"]}
    kubernetes_validate.validate(pod, "1.33", strict=True)


def test_the_gpudirect_daemon_sidecar_states_its_requests_as_its_limits() -> None:
    [daemon] = template_of(tcpxo_job())["spec"]["initContainers"]
    assert daemon["resources"]["requests"] == daemon["resources"]["limits"] == {"cpu": "2000m", "memory": "4096Mi"}


def test_an_rdma_job_keeps_nccl_bootstrap_and_gloo_on_the_pod_network() -> None:
    env = env_of(gke_job("h200-train"))
    assert env["NCCL_SOCKET_IFNAME"]["value"] == env["GLOO_SOCKET_IFNAME"]["value"] == "eth0"


def test_the_tcpxo_daemon_holds_the_trainer_until_its_health_check_file_exists() -> None:
    [daemon] = template_of(tcpxo_job())["spec"]["initContainers"]
    assert {"name": "HEALTH_CHECK_LOG_FILE", "value": "/run/health-check"} in daemon["env"]
    assert daemon["startupProbe"]["exec"]["command"] == ["cat", "/run/health-check"]
    assert "_" not in daemon["startupProbe"]["exec"]["command"][1]


def test_the_tcpx_daemon_gets_no_startup_probe_google_does_not_document_one() -> None:
    [daemon] = template_of(gke_job("h100-train"))["spec"]["initContainers"]
    assert "startupProbe" not in daemon


@pytest.mark.parametrize(("pool", "library"), [("h100-train", "/usr/local/nvidia/lib64/libnccl-net.so"),
                                               ("h200-train", "/usr/local/gib/lib64/libnccl-net.so")])
def test_a_gpudirect_pod_waits_for_its_nccl_plugin_under_a_path_it_mounts(pool: str, library: str) -> None:
    jobset = gke_job(pool)
    assert env_of(jobset)["TRAINER_NCCL_PLUGIN"]["value"] == library
    assert any(library.startswith(m["mountPath"] + "/") for m in container_of(jobset)["volumeMounts"])

"""`gpu-platform job` and the fabric: the gate's mode and floor per pool, and the environment
NCCL's network plugin reads, as the trainer's own parser and libfabric would read them."""

from __future__ import annotations

from typing import Any

import re

import pytest

from test_job_render import container_of, env_of, job_of, render
from trainer import config as trainer_config

from components.facts import catalog
from components.facts.fabric import FABRICS, FLOOR_FRACTION
from components.jobs import fabric


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

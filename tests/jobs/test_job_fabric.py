"""`gpu-platform job` and the fabric: the gate's mode and floor per pool, and the environment
NCCL's network plugin reads, as the trainer's own parser and libfabric would read them."""

from __future__ import annotations

from typing import Any

from test_job_render import container_of, env_of, render
from trainer import config as trainer_config

from components.facts import catalog
from components.facts.fabric import FABRICS, FLOOR_FRACTION


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


def test_gcp_multi_node_job_warns_until_gpudirect_is_wired() -> None:
    cfg = trainer_cfg(render("prod-gcp", pool="h100-train", nodes=2, gpus_per_node=8, team="research"))
    assert cfg.fabric_check == "warn"


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

"""`gpu-platform job`: a multi-node torchrun JobSet rendered offline from a stack."""

from __future__ import annotations

from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from k8s_support import REPO, crd_schema

from components import jobs, naming
from components.kubernetes.queues import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from infra import cli, stackfile

IMAGE = "ghcr.io/acme/trainer:1.0.0"


def spec(stack: str):
    return stackfile.read(stack, REPO).spec()


def render(stack: str = "onprem", **changes: Any) -> dict[str, Any]:
    request = dict(pool="a100-train", nodes=2, gpus_per_node=8, team="research", tier="production", image=IMAGE)
    request.update(changes)
    return jobs.render(spec(stack), jobs.JobRequest(**request))


def problems(stack: str = "onprem", **changes: Any) -> list[str]:
    with pytest.raises(jobs.JobError) as caught:
        render(stack, **changes)
    return caught.value.problems


def pod_of(jobset: dict[str, Any]) -> dict[str, Any]:
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def container_of(jobset: dict[str, Any]) -> dict[str, Any]:
    return pod_of(jobset)["containers"][0]


def test_jobset_validates_against_the_upstream_crd_with_unknown_fields_as_errors() -> None:
    jobset = render()
    jsonschema.validate(jobset, crd_schema(jobset["apiVersion"], jobset["kind"]))


@pytest.mark.parametrize("stack", ["onprem", "dev-gcp"])
def test_each_node_job_validates_as_a_kubernetes_1_33_job(stack: str) -> None:
    jobset = render() if stack == "onprem" else render(stack, pool="a100-mig", nodes=1, gpus_per_node=1)
    template = jobset["spec"]["replicatedJobs"][0]["template"]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "node", "namespace": "research"}, **template}
    kubernetes_validate.validate(job, "1.33", strict=True)


def test_jobset_queues_in_the_team_namespace_at_the_tier() -> None:
    metadata = render(team="applied", tier="best-effort")["metadata"]
    assert metadata["namespace"] == naming.team_namespace("applied")
    assert metadata["labels"] == {QUEUE_NAME_LABEL: naming.local_queue_name("applied"), PRIORITY_CLASS_LABEL: "best-effort"}


def test_pods_carry_the_tier_as_priority_class() -> None:
    assert pod_of(render(tier="standard"))["priorityClassName"] == "standard"


def test_pods_reach_each_other_through_the_jobset_dns() -> None:
    jobset = render(name="llm")
    assert jobset["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": "llm", "publishNotReadyAddresses": True}
    command = container_of(jobset)["command"]
    assert "--rdzv-endpoint=llm-node-0-0.llm:29400" in command
    assert "--rdzv-backend=c10d" in command


def test_torchrun_spans_the_nodes_with_the_rank_from_the_completion_index() -> None:
    jobset = render(nodes=3, gpus_per_node=8)
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (job["parallelism"], job["completions"], job["completionMode"]) == (3, 3, "Indexed")
    command = container_of(jobset)["command"]
    assert command[:4] == ["torchrun", "--nnodes=3", "--nproc-per-node=8", f"--max-restarts={jobs.TORCHRUN_MAX_RESTARTS}"]
    assert "--node-rank=$(NODE_RANK)" in command
    env = {e["name"]: e for e in container_of(jobset)["env"]}
    assert env["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    )
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"]["value"] == "1"


def test_pods_land_on_the_pool_and_tolerate_its_taint() -> None:
    pod = pod_of(render())
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_gpu_requests_equal_limits() -> None:
    resources = container_of(render(gpus_per_node=4))["resources"]
    assert resources == {"requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}


def test_shared_memory_is_memory_backed() -> None:
    pod = pod_of(render())
    dshm = next(v for v in pod["volumes"] if v["name"] == "dshm")
    assert dshm["emptyDir"]["medium"] == "Memory"
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container_of(render())["volumeMounts"]


def test_trainer_runs_as_non_root_without_privilege_escalation() -> None:
    jobset = render()
    assert pod_of(jobset)["securityContext"]["runAsNonRoot"] is True
    security = container_of(jobset)["securityContext"]
    assert security["runAsNonRoot"] is True and security["allowPrivilegeEscalation"] is False


def test_pods_use_the_stack_s_trainer_account_and_bucket() -> None:
    jobset = render()
    assert pod_of(jobset)["serviceAccountName"] == naming.TRAINER_SERVICE_ACCOUNT
    env = {e["name"]: e.get("value") for e in container_of(jobset)["env"]}
    assert env["CHECKPOINT_BUCKET"] == naming.bucket_name(spec("onprem"))


def test_gke_jobs_mount_the_bucket_through_gcs_fuse() -> None:
    jobset = render("dev-gcp", pool="a100-mig", nodes=1, gpus_per_node=1)
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert template["metadata"]["annotations"] == {"gke-gcsfuse/volumes": "true"}
    data = next(v for v in template["spec"]["volumes"] if v["name"] == "data")
    assert data["csi"]["volumeAttributes"]["bucketName"] == naming.bucket_name(spec("dev-gcp"))
    # The non-root trainer owns the mount, or it could not write checkpoints.
    assert f"uid={jobs.TRAINER_UID},gid={jobs.TRAINER_UID}" in data["csi"]["volumeAttributes"]["mountOptions"]


def test_trainer_gets_checkpoint_metrics_and_peak_flops_unless_given() -> None:
    command = container_of(render(trainer_args=["--preset", "small", "--checkpoint-dir", "/data/mine"]))["command"]
    tail = command[command.index("train") + 1 :]
    assert tail[:4] == ["--preset", "small", "--checkpoint-dir", "/data/mine"]
    assert tail.count("--checkpoint-dir") == 1
    assert ["--peak-tflops", "312"] == tail[tail.index("--peak-tflops") : tail.index("--peak-tflops") + 2]
    assert "--metrics-file" in tail


def test_asking_beyond_the_team_s_quota_is_allowed_since_kueue_may_borrow() -> None:
    # research holds 16 A100s on onprem; 4 nodes x 8 GPUs borrow the rest.
    assert render(nodes=4, gpus_per_node=8)["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 4


def test_more_gpus_per_node_than_the_pool_has_is_an_error() -> None:
    assert problems(gpus_per_node=9) == ["--gpus-per-node: pool a100-train nodes offer 8 GPUs, asked for 9"]


def test_more_nodes_than_the_pool_s_maximum_is_an_error() -> None:
    assert problems(nodes=5) == ["--nodes: pool a100-train scales to 4 nodes, asked for 5"]


@pytest.mark.parametrize("stack", ["dev-gcp", "dev-aws"])
def test_more_than_one_gpu_on_a_shared_pool_is_an_error(stack: str) -> None:
    assert problems(stack, pool="l4-shared", nodes=1, gpus_per_node=2) == [
        "--gpus-per-node: pool l4-shared shares each GPU (time-slicing); a pod there may request 1 GPU"
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"pool": "h100"}, "--pool: no pool 'h100' in this stack; pools: a100-train, l40s-shared"),
        ({"team": "ops"}, "--team: no team 'ops' in this stack; teams: applied, research"),
        ({"tier": "urgent"}, "--tier: no tier 'urgent'; tiers: production, standard, best-effort, opportunistic"),
        ({"team": None}, "--team: required; teams: applied, research"),
        ({"image": None}, "--image: required (a trainer image reference); or set platform.trainer.image to an image reference"),
    ],
)
def test_unknown_pool_team_tier_or_missing_image_is_an_error(change: dict[str, Any], expected: str) -> None:
    assert problems(**change) == [expected]


def test_cli_prints_the_jobset(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["job", "onprem", "--pool", "l40s-shared", "--nodes", "2", "--gpus-per-node", "1", "--team", "applied",
         "--tier", "standard", "--name", "smoke", "--image", IMAGE, "--", "--preset", "tiny", "--max-steps", "10"]
    )
    assert code == 0
    jobset = yaml.safe_load(capsys.readouterr().out)
    assert jobset["metadata"]["name"] == "smoke"
    command = container_of(jobset)["command"]
    assert command[command.index("train") + 1 :][:4] == ["--preset", "tiny", "--max-steps", "10"]


def test_cli_reports_every_problem_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["job", "onprem", "--pool", "a100-train", "--nodes", "9", "--gpus-per-node", "16", "--team", "research",
         "--tier", "production", "--image", IMAGE]
    )
    assert code == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "onprem: --gpus-per-node: pool a100-train nodes offer 8 GPUs, asked for 16",
        "onprem: --nodes: pool a100-train scales to 4 nodes, asked for 9",
    ]


def test_multi_node_jobs_on_efa_nodes_claim_every_efa_interface() -> None:
    jobset = render("prod-aws", pool="h100-train", nodes=4, gpus_per_node=8, team="research")
    container = container_of(jobset)
    # p5.48xlarge: 32 network cards, one EFA interface each.
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert {"name": "FI_PROVIDER", "value": "efa"} in container["env"]


@pytest.mark.parametrize(("nodes", "gpus"), [(1, 8), (4, 4)])
def test_single_node_or_partial_node_jobs_leave_efa_alone(nodes: int, gpus: int) -> None:
    jobset = render("prod-aws", pool="h100-train", nodes=nodes, gpus_per_node=gpus, team="research")
    assert "vpc.amazonaws.com/efa" not in container_of(jobset)["resources"]["limits"]

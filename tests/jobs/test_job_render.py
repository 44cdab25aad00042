"""`gpu-platform job`: a multi-node torchrun JobSet rendered offline from a stack."""

from __future__ import annotations

from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from helpers import platform_of
from k8s_support import REPO, crd_schema, spec_of

from components import naming, node_resources
from components.jobs import grace, renderer, torchrun, volumes
from components.kubernetes.queues import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from components.pools import derive_pools
from components.spec import PlatformSpec, SpecError
from infra import cli, stackfile

IMAGE = "ghcr.io/acme/trainer:1.0.0"
TRAINER_ARGS = [
    "--preset", "small", "--max-steps", "100", "--checkpoint-every", "50", "--global-batch-size", "64",
    "--seq-len", "512", "--seed", "1", "--data", "/data/datasets/corpus",
]


def spec(stack: str) -> PlatformSpec:
    return stackfile.read(stack, REPO).spec()


def with_batch(args: list[str], batch: int) -> list[str]:
    args = list(args)
    args[args.index("--global-batch-size") + 1] = str(batch)
    return args


def request(**changes: Any) -> renderer.JobRequest:
    """A valid request on onprem's a100-train; without trainer_args, a batch of one per process."""
    fields: dict[str, Any] = dict(pool="a100-train", nodes=2, gpus_per_node=8, team="research", tier="production", image=IMAGE)
    fields.update(changes)
    fields.setdefault("trainer_args", with_batch(TRAINER_ARGS, fields["nodes"] * fields["gpus_per_node"]))
    return renderer.JobRequest(**fields)


def render(stack: str = "onprem", **changes: Any) -> dict[str, Any]:
    return renderer.render(spec(stack), request(**changes))


def problems(stack: str = "onprem", **changes: Any) -> list[str]:
    with pytest.raises(renderer.JobError) as caught:
        render(stack, **changes)
    return caught.value.problems


def job_of(jobset: dict[str, Any]) -> dict[str, Any]:
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]


def pod_of(jobset: dict[str, Any]) -> dict[str, Any]:
    return job_of(jobset)["template"]["spec"]


def container_of(jobset: dict[str, Any]) -> dict[str, Any]:
    return pod_of(jobset)["containers"][0]


def env_of(jobset: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container_of(jobset)["env"]}


def trainer_tail(jobset: dict[str, Any]) -> list[str]:
    args = container_of(jobset)["args"]
    return args[args.index("train") + 1 :]


# --- what consumers read: schemas ------------------------------------------------------------


@pytest.mark.parametrize(("stack", "pool", "nodes", "gpus"), [("onprem", "a100-train", 2, 8), ("prod-aws", "h100-train", 2, 8),
                                                             ("prod-gcp", "h100-train", 2, 8), ("prod-gcp", "h200-train", 2, 8)])
def test_a_two_node_jobset_validates_against_the_upstream_crd_with_unknown_fields_as_errors(
    stack: str, pool: str, nodes: int, gpus: int
) -> None:
    jobset = render(stack, pool=pool, nodes=nodes, gpus_per_node=gpus)
    jsonschema.validate(jobset, crd_schema(jobset["apiVersion"], jobset["kind"]))


@pytest.mark.parametrize(("stack", "pool", "nodes", "gpus"), [("onprem", "a100-train", 2, 8), ("dev-gcp", "a100-mig", 1, 1), ("prod-aws", "h100-train", 2, 8),
                                                             ("prod-gcp", "h100-train", 2, 8), ("prod-gcp", "h200-train", 2, 8)])
def test_each_node_job_validates_as_a_kubernetes_1_33_job(stack: str, pool: str, nodes: int, gpus: int) -> None:
    template = render(stack, pool=pool, nodes=nodes, gpus_per_node=gpus)["spec"]["replicatedJobs"][0]["template"]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "node", "namespace": "research"}, **template}
    kubernetes_validate.validate(job, "1.33", strict=True)


@pytest.mark.parametrize(("stack", "pool", "nodes", "gpus"), [("onprem", "a100-train", 2, 8), ("dev-gcp", "l4-shared", 1, 1), ("prod-aws", "h100-train", 2, 8),
                                                             ("prod-gcp", "h100-train", 2, 8), ("prod-gcp", "h200-train", 2, 8)])
def test_the_pod_template_validates_as_a_kubernetes_1_33_pod(stack: str, pool: str, nodes: int, gpus: int) -> None:
    template = job_of(render(stack, pool=pool, nodes=nodes, gpus_per_node=gpus))["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-node-0-0", **template["metadata"]}, "spec": template["spec"]}
    kubernetes_validate.validate(pod, "1.33", strict=True)


# --- queue, tier, pool ------------------------------------------------------------------------


def test_jobset_queues_in_the_team_namespace_at_the_tier() -> None:
    metadata = render(team="applied", tier="best-effort")["metadata"]
    assert metadata["namespace"] == naming.team_namespace("applied")
    assert metadata["labels"] == {QUEUE_NAME_LABEL: naming.local_queue_name("applied"), PRIORITY_CLASS_LABEL: "best-effort"}


def test_pods_carry_the_tier_as_priority_class() -> None:
    assert pod_of(render(tier="standard"))["priorityClassName"] == "standard"


def test_pods_land_on_the_pool_and_tolerate_its_taint() -> None:
    pod = pod_of(render())
    assert pod["nodeSelector"] == {"gpu-platform.io/pool": "a100-train"}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


# --- rendezvous -----------------------------------------------------------------------------


def test_pods_reach_each_other_through_the_jobset_dns() -> None:
    jobset = render(name="llm")
    assert jobset["spec"]["network"] == {"enableDNSHostnames": True, "subdomain": "llm", "publishNotReadyAddresses": True}


def test_torchrun_uses_a_c10d_rendezvous_on_pod_0_s_stable_name() -> None:
    args = container_of(render(name="llm"))["args"]
    assert "--rdzv-backend=c10d" in args
    assert f"--rdzv-endpoint=llm-node-0-0.llm:{torchrun.RDZV_PORT}" in args
    assert not any(a.startswith(("--master-addr", "--node-rank", "--rdzv-backend=static")) for a in args)


def test_the_rendezvous_id_is_the_job_s_name_and_its_jobset_uid() -> None:
    jobset = render(name="llm")
    assert "--rdzv-id=llm-$(JOBSET_UID)" in container_of(jobset)["args"]
    # The label JobSet puts on every pod (jobset v0.12.0 docs, "JobSet labels").
    assert env_of(jobset)["JOBSET_UID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['jobset.sigs.k8s.io/jobset-uid']"


def test_each_agent_publishes_its_pod_ip_not_a_dns_name() -> None:
    jobset = render(name="llm")
    assert "--local-addr=$(POD_IP)" in container_of(jobset)["args"]
    assert env_of(jobset)["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"


def test_only_the_pod_of_completion_index_0_hosts_the_rendezvous_store() -> None:
    jobset = render(nodes=3)
    job = job_of(jobset)
    assert (job["parallelism"], job["completions"], job["completionMode"]) == (3, 3, "Indexed")
    assert env_of(jobset)["NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    )
    assert 'is_host = "1" if os.environ["NODE_RANK"] == "0" else "0"' in container_of(jobset)["command"][2]


def test_a_whole_gpu_s_catalog_memory_sizes_the_default_micro_batch() -> None:
    args = container_of(render())["args"]
    assert args[args.index("--gpu-memory-gib") + 1] == "80"  # onprem a100-train: A100-80GB


def test_torchrun_spans_the_nodes_and_restarts_failed_workers() -> None:
    args = container_of(render(nodes=3, gpus_per_node=8))["args"]
    assert args[:3] == ["--nnodes=3", "--nproc-per-node=8", f"--max-restarts={torchrun.TORCHRUN_MAX_RESTARTS}"]
    assert args[args.index("-m") : args.index("-m") + 3] == ["-m", "trainer", "train"]


def test_the_container_waits_a_bounded_time_for_pod_0_s_name_then_becomes_torchrun() -> None:
    jobset = render()
    assert container_of(jobset)["command"] == ["python3", "-c", torchrun.WAIT_THEN_TORCHRUN]
    assert env_of(jobset)["RDZV_WAIT_SECONDS"]["value"] == str(torchrun.RDZV_WAIT_S)
    assert '"-m", "torch.distributed.run"' in torchrun.WAIT_THEN_TORCHRUN


# --- one pod per node -------------------------------------------------------------------------


def test_multi_node_pods_repel_each_other_on_the_hostname() -> None:
    affinity = pod_of(render(name="llm", nodes=2))["affinity"]
    assert affinity == {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": "llm"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }


def test_a_single_node_job_needs_no_anti_affinity() -> None:
    assert "affinity" not in pod_of(render(nodes=1))


@pytest.mark.parametrize("stack", ["dev-gcp", "dev-aws"])
def test_a_multi_node_job_on_a_shared_pool_is_refused_with_the_reason(stack: str) -> None:
    assert problems(stack, pool="l4-shared", nodes=2, gpus_per_node=1) == [
        "--nodes: pool l4-shared shares each GPU (time-slicing); a multi-node job would run NCCL between slices "
        "of GPUs other jobs use: use an unshared pool, or --nodes 1"
    ]


# --- restarts ---------------------------------------------------------------------------------


def test_a_disruption_fails_the_job_through_its_pod_failure_policy() -> None:
    jobset = render()
    job = job_of(jobset)
    assert job["backoffLimit"] == 0
    assert job["podFailurePolicy"]["rules"][0] == {
        "action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]
    }
    # Pod failure policies need pods that are never restarted in place.
    assert pod_of(jobset)["restartPolicy"] == "Never"


def test_the_jobset_restarts_after_a_disruption_without_counting_it() -> None:
    policy = render()["spec"]["failurePolicy"]
    assert policy["rules"][-1] == {
        "name": renderer.DISRUPTION_RULE, "action": "RestartJobSetAndIgnoreMaxRestarts", "onJobFailureReasons": ["PodFailurePolicy"]
    }
    assert policy["restartStrategy"] == "BlockingRecreate"


def test_real_failures_use_up_max_restarts_three_by_default() -> None:
    assert render()["spec"]["failurePolicy"]["maxRestarts"] == 3
    assert render(max_restarts=7)["spec"]["failurePolicy"]["maxRestarts"] == 7


def test_a_negative_restart_budget_is_an_error() -> None:
    assert problems(max_restarts=-1) == ["--max-restarts: at least 0, got -1"]


# --- graceful stop ----------------------------------------------------------------------------


@pytest.mark.parametrize(("preset", "seconds"), [("small", 80), ("1b", 120)])
def test_the_default_grace_period_fits_the_preset_s_checkpoint(preset: str, seconds: int) -> None:
    args = [a if a != "small" else preset for a in with_batch(TRAINER_ARGS, 16)]
    if preset == "1b":
        args[args.index("--seq-len") + 1] = "2048"
    jobset = render(trainer_args=args)
    assert pod_of(jobset)["terminationGracePeriodSeconds"] == seconds == grace.default_grace_period(preset)
    assert f"--shutdown-timeout={seconds - grace.SHUTDOWN_MARGIN_S}" in container_of(jobset)["args"]


def test_grace_period_sets_the_pod_s_and_torchrun_s_timeouts_together() -> None:
    jobset = render(grace_period=600)
    assert pod_of(jobset)["terminationGracePeriodSeconds"] == 600
    assert "--shutdown-timeout=590" in container_of(jobset)["args"]


def test_a_grace_period_too_short_for_torchrun_is_an_error() -> None:
    assert problems(grace_period=5) == [
        "--grace-period: at least 20 seconds (torchrun stops 10 s before the kubelet), got 5"
    ]


def test_the_1b_checkpoint_needs_more_than_the_30_second_defaults() -> None:
    assert grace.checkpoint_write_s("1b") > 30


# --- resources --------------------------------------------------------------------------------


def test_gpu_requests_equal_limits() -> None:
    resources = container_of(render(gpus_per_node=4))["resources"]
    assert resources == {"requests": {"nvidia.com/gpu": "4"}, "limits": {"nvidia.com/gpu": "4"}}


def test_a_pod_on_a_shared_node_gets_cpu_and_memory_in_proportion_to_its_gpu_slots() -> None:
    stack = spec("dev-aws")
    pool = next(p for p in derive_pools(stack) if p.name == "l4-shared")
    node = node_resources.job_allocatable(stack, pool, stack.node_pools[0])
    assert node is not None
    resources = container_of(render("dev-aws", pool="l4-shared", nodes=1, gpus_per_node=1))["resources"]
    assert resources["requests"]["cpu"] == f"{node.cpu_m // 4}m"
    assert resources["requests"]["memory"] == f"{node.memory_mib // 4}Mi"
    assert resources["limits"] == resources["requests"]


def test_a_whole_node_efa_pod_requests_the_efa_guide_s_huge_pages_as_request_and_limit() -> None:
    resources = container_of(render("prod-aws", pool="h100-train", nodes=2, gpus_per_node=8, team="research"))["resources"]
    assert resources["requests"]["hugepages-2Mi"] == "5120Mi"
    assert resources["limits"] == resources["requests"]


def test_a_whole_node_efa_pod_leaves_the_margin_below_the_node_without_its_huge_pages() -> None:
    stack = spec("prod-aws")
    pool = next(p for p in derive_pools(stack) if p.name == "h100-train")
    assert pool.instance_type is not None
    node = node_resources.allocatable("aws", pool.instance_type, efa=True)
    daemonsets = sum(
        (node_resources.DAEMONSET_REQUESTS[d] for d in node_resources.gpu_node_daemonsets(stack, pool, stack.node_pools[0])),
        node_resources.NOTHING,
    )
    expected = node - daemonsets - node_resources.JOB_MARGIN
    requests = container_of(render("prod-aws", pool="h100-train", nodes=2, gpus_per_node=8, team="research"))["resources"]["requests"]
    assert (requests["cpu"], requests["memory"]) == (f"{expected.cpu_m}m", f"{expected.memory_mib}Mi")
    without_hugepages = node_resources.allocatable("aws", pool.instance_type)
    assert without_hugepages.memory_mib - node.memory_mib == (110 * 192 + 1) * 2


def test_a_pod_that_claims_no_efa_requests_no_huge_pages() -> None:
    resources = container_of(render("prod-aws", pool="h100-train", nodes=1, gpus_per_node=1, team="research"))["resources"]
    assert "hugepages-2Mi" not in resources["requests"]


def test_on_gke_the_trainer_leaves_room_for_the_gcs_fuse_sidecar() -> None:
    stack = spec("dev-gcp")
    pool = next(p for p in derive_pools(stack) if p.name == "a100-mig")
    node = node_resources.job_allocatable(stack, pool, stack.node_pools[1])
    assert node is not None
    jobset = render("dev-gcp", pool="a100-mig", nodes=1, gpus_per_node=7)
    assert container_of(jobset)["resources"]["requests"]["cpu"] == f"{node.cpu_m - volumes.GCS_FUSE_SIDECAR.cpu_m}m"
    annotations = job_of(jobset)["template"]["metadata"]["annotations"]
    assert annotations[volumes.GCS_FUSE_CPU_REQUEST_ANNOTATION] == f"{volumes.GCS_FUSE_SIDECAR.cpu_m}m"
    assert annotations[volumes.GCS_FUSE_MEMORY_REQUEST_ANNOTATION] == f"{volumes.GCS_FUSE_SIDECAR.memory_mib}Mi"


def test_existing_clusters_state_no_node_sizes_so_jobs_request_only_gpus() -> None:
    assert set(container_of(render())["resources"]["requests"]) == {"nvidia.com/gpu"}


def test_shared_memory_is_memory_backed_and_a_quarter_of_the_trainer_s_memory() -> None:
    jobset = render("dev-aws", pool="l4-train", nodes=2, gpus_per_node=4)
    dshm = next(v for v in pod_of(jobset)["volumes"] if v["name"] == "dshm")
    memory_gi = int(container_of(jobset)["resources"]["limits"]["memory"].removesuffix("Mi")) // 1024
    assert dshm["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{memory_gi // 4}Gi"}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container_of(jobset)["volumeMounts"]


def mps_stack(cloud_stack: str, pool_index: int) -> PlatformSpec:
    raw = platform_of(cloud_stack)
    raw["nodePools"][pool_index]["sharing"] = {"mode": "mps", "replicas": 4}
    return spec_of(raw)


@pytest.mark.parametrize(("stack", "index", "host_ipc"), [("dev-aws", 0, False), ("dev-gcp", 0, True)])
def test_mps_pods_keep_the_mps_daemon_s_shared_memory(stack: str, index: int, host_ipc: bool) -> None:
    jobset = renderer.render(mps_stack(stack, index), request(pool="l4-shared", nodes=1, gpus_per_node=1))
    pod = pod_of(jobset)
    assert "dshm" not in {v["name"] for v in pod["volumes"]}
    assert "/dev/shm" not in {m["mountPath"] for m in container_of(jobset)["volumeMounts"]}
    assert pod.get("hostIPC", False) is host_ipc


# --- hardening --------------------------------------------------------------------------------


def test_trainer_runs_non_root_with_no_capabilities_under_the_runtime_s_seccomp_profile() -> None:
    jobset = render()
    pod_security = pod_of(jobset)["securityContext"]
    assert pod_security["runAsNonRoot"] is True and pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container_of(jobset)["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["capabilities"] == {"drop": ["ALL"]}


@pytest.mark.parametrize("stack", ["onprem", "prod-aws", "prod-gcp"])
def test_no_service_account_token_is_mounted(stack: str) -> None:
    pool = {"onprem": "a100-train", "prod-aws": "h100-train", "prod-gcp": "h100-train"}[stack]
    assert pod_of(render(stack, pool=pool))["automountServiceAccountToken"] is False


def test_pods_use_the_stack_s_trainer_account_and_bucket() -> None:
    jobset = render()
    assert pod_of(jobset)["serviceAccountName"] == naming.TRAINER_SERVICE_ACCOUNT
    assert env_of(jobset)["CHECKPOINT_BUCKET"]["value"] == naming.bucket_name(spec("onprem"))


def test_gke_jobs_mount_the_bucket_through_gcs_fuse() -> None:
    jobset = render("dev-gcp", pool="a100-mig", nodes=1, gpus_per_node=1)
    template = job_of(jobset)["template"]
    assert template["metadata"]["annotations"][volumes.GCS_FUSE_ANNOTATION] == "true"
    data = next(v for v in template["spec"]["volumes"] if v["name"] == "data")
    assert data["csi"]["volumeAttributes"]["bucketName"] == naming.bucket_name(spec("dev-gcp"))
    # The non-root trainer owns the mount, or it could not write checkpoints.
    assert f"uid={renderer.TRAINER_UID},gid={renderer.TRAINER_UID}" in data["csi"]["volumeAttributes"]["mountOptions"]


# --- trainer arguments and image ------------------------------------------------------------


def test_trainer_gets_checkpoint_metrics_and_peak_flops_unless_given() -> None:
    given = [*with_batch(TRAINER_ARGS, 16), "--checkpoint-dir", "/data/mine"]
    tail = trainer_tail(render(trainer_args=given))
    assert tail[: len(given)] == given
    assert tail.count("--checkpoint-dir") == 1
    assert ["--peak-tflops", "312"] == tail[tail.index("--peak-tflops") : tail.index("--peak-tflops") + 2]
    assert "--metrics-file" in tail


def test_no_trainer_arguments_names_every_required_flag() -> None:
    assert problems(trainer_args=[]) == [
        f"trainer argument {flag}: required"
        for flag in ("--data", "--preset", "--max-steps", "--checkpoint-every", "--global-batch-size", "--seq-len", "--seed")
    ]


def test_trainer_choices_ranges_and_unknown_flags_are_all_reported() -> None:
    args = [*with_batch(TRAINER_ARGS, 16)[2:], "--preset", "nosuch", "--lr", "-1", "--bogus", "x"]
    args[args.index("--max-steps") + 1] = "0"
    assert problems(trainer_args=args) == [
        "trainer argument --max-steps: expected a positive integer, got '0'",
        "trainer argument --preset: 'nosuch' is not one of 1b, large, medium, small, tiny",
        "trainer argument --lr: expected a positive number, got '-1'",
        "trainer argument --bogus: not a trainer flag",
        "trainer argument 'x': the trainer takes flags only (--name value)",
    ]


def test_a_batch_the_world_size_does_not_divide_is_an_error() -> None:
    assert problems(nodes=3, trainer_args=with_batch(TRAINER_ARGS, 20)) == [
        "trainer argument --global-batch-size 20 is not divisible by the 24 processes; use a multiple of 24"
    ]


def test_a_sequence_longer_than_the_preset_s_context_is_an_error() -> None:
    args = with_batch(TRAINER_ARGS, 16)
    args[args.index("--seq-len") + 1] = "4096"
    assert problems(trainer_args=args) == ["trainer argument --seq-len 4096 exceeds the 1024-token context of preset 'small'"]


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        (":v1", "':v1' is not an image reference"),
        ("my registry/x v1", "'my registry/x v1' is not an image reference"),
        ("ghcr.io/Acme/trainer:1", "'ghcr.io/Acme/trainer:1': the repository name must be lowercase"),
        ("ghcr.io/acme/trainer@sha256:abc", "is not an image reference"),
        ("ghcr.io/acme/trainer@md5:" + "a" * 32, "digest algorithm 'md5' is not one of sha256, sha512"),
    ],
)
def test_an_image_that_is_no_reference_is_an_error(image: str, expected: str) -> None:
    [problem] = problems(image=image)
    assert problem.startswith("--image: ") and expected in problem


@pytest.mark.parametrize(
    "image",
    ["trainer", "ghcr.io/acme/trainer:1.0.0", "localhost:5000/ml/trainer:v1", "123456789012.dkr.ecr.us-east-1.amazonaws.com/ml-dev/trainer:a1b2",
     "us-central1-docker.pkg.dev/p/images/trainer@sha256:" + "0" * 64, "[::1]:5000/trainer:x"],
)
def test_pullable_references_render(image: str) -> None:
    assert container_of(render(image=image))["image"] == image


def test_a_stack_s_trainer_image_is_checked_by_the_spec_with_the_job_s_grammar() -> None:
    raw = platform_of("onprem")
    raw["trainer"] = {"image": "registry/Trainer"}
    with pytest.raises(SpecError) as caught:
        spec_of(raw)
    assert caught.value.problems[0].message == (
        "expected `build` or an image reference: 'registry/Trainer': the repository name must be lowercase"
    )


# --- the request against the stack -----------------------------------------------------------


def test_asking_beyond_the_team_s_quota_is_allowed_since_kueue_may_borrow() -> None:
    # research holds 16 A100s on onprem; 4 nodes x 8 GPUs borrow the rest.
    assert job_of(render(nodes=4, gpus_per_node=8))["parallelism"] == 4


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


def test_multi_node_jobs_on_efa_nodes_claim_every_efa_interface() -> None:
    container = container_of(render("prod-aws", pool="h100-train", nodes=4, gpus_per_node=8, team="research"))
    # p5.48xlarge: 32 network cards, one EFA interface each.
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert {"name": "FI_PROVIDER", "value": "efa"} in container["env"]


@pytest.mark.parametrize(("nodes", "gpus"), [(1, 8), (4, 4)])
def test_single_node_or_partial_node_jobs_leave_efa_alone(nodes: int, gpus: int) -> None:
    jobset = render("prod-aws", pool="h100-train", nodes=nodes, gpus_per_node=gpus, team="research")
    assert "vpc.amazonaws.com/efa" not in container_of(jobset)["resources"]["limits"]


# --- the command line -------------------------------------------------------------------------


def test_cli_prints_the_jobset_as_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["job", "onprem", "--pool", "l40s-shared", "--nodes", "1", "--gpus-per-node", "1", "--team", "applied",
         "--tier", "standard", "--name", "smoke", "--image", IMAGE, "--max-restarts", "5", "--grace-period", "300",
         "--", "--preset", "tiny", "--max-steps", "10", "--checkpoint-every", "5", "--global-batch-size", "4",
         "--seq-len", "128", "--seed", "1", "--data", "/data/datasets/corpus"]
    )
    assert code == 0
    jobset = yaml.safe_load(capsys.readouterr().out)
    assert jobset["metadata"]["name"] == "smoke"
    assert jobset["spec"]["failurePolicy"]["maxRestarts"] == 5
    assert pod_of(jobset)["terminationGracePeriodSeconds"] == 300
    assert trainer_tail(jobset)[:2] == ["--preset", "tiny"]
    assert container_of(jobset)["command"][2] == torchrun.WAIT_THEN_TORCHRUN


def test_cli_reports_every_problem_one_line_each_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["job", "onprem", "--pool", "a100-train", "--nodes", "9", "--gpus-per-node", "16", "--team", "research",
         "--tier", "production", "--image", "my registry/x v1", "--", "--preset", "nosuch"]
    )
    assert code == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[:2] == [
        "onprem: --gpus-per-node: pool a100-train nodes offer 8 GPUs, asked for 16",
        "onprem: --nodes: pool a100-train scales to 4 nodes, asked for 9",
    ]
    assert lines[2].startswith("onprem: --image: 'my registry/x v1' is not an image reference")
    assert "onprem: trainer argument --preset: 'nosuch' is not one of 1b, large, medium, small, tiny" in lines
    assert "onprem: trainer argument --seed: required" in lines


def test_a_micro_batch_the_pool_s_gpus_cannot_hold_is_refused_before_submission() -> None:
    args = ["--preset", "1b", "--max-steps", "10", "--checkpoint-every", "5", "--global-batch-size", "512",
            "--seq-len", "2048", "--seed", "1", "--data", "/data/x", "--parallel", "fsdp", "--micro-batch-size", "32"]
    found = problems(trainer_args=args)  # 2 nodes x 8 A100-80GB of onprem's a100-train
    assert any(p.startswith("trainer argument --micro-batch-size 32: preset 1b at --seq-len 2048 needs an estimated")
               and "more than the 80 GiB of GPU memory" in p for p in found), found

"""A multi-node torchrun JobSet for a stack, rendered offline from the spec alone.

Everything the job needs (the pool's selector and taint, the team's namespace and queue, the
tier, the bucket, the trainer's service account) derives from the spec, so `gpu-platform job`
prints an object a team can `kubectl apply` without reading anything back from the cloud.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from components import naming
from components.aws.plan import efa_interfaces
from components.kubernetes.queues import (
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    queue_plan,
)
from components.kubernetes.tiers import priority_tiers
from components.naming import TRAINER_UID
from components.pools import GPU_RESOURCE, Pool, derive_pools
from components.spec import PlatformSpec

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
# Kubernetes sets this annotation on each pod of an Indexed Job (batch/v1 Job docs).
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
REPLICATED_JOB = "node"
RDZV_PORT = 29400
DATA_MOUNT = "/data"
# On aws and existing clusters the data volume is a claim each team namespace holds; on GKE
# the stack's bucket is mounted directly through the GCS FUSE CSI driver.
DATA_CLAIM = naming.DATA_CLAIM
GCS_FUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
GCS_FUSE_ANNOTATION = "gke-gcsfuse/volumes"
# Advertised by the EFA device plugin on EFA pools (aws-efa-k8s-device-plugin).
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# torchrun restarts the workers this many times before the JobSet recreates its pods.
TORCHRUN_MAX_RESTARTS = 3
JOBSET_MAX_RESTARTS = 2

_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")


class JobError(Exception):
    """A job request that does not fit the stack; one message per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class JobRequest:
    pool: str
    nodes: int
    gpus_per_node: int
    team: str | None
    tier: str
    name: str = "train"
    image: str | None = None
    trainer_args: list[str] = field(default_factory=list)


def _one_gpu_per_pod(pool: Pool) -> bool:
    """Shared GPUs go one slot per pod: GKE's sharing allows no more, and the NVIDIA plugin's
    configs here fail larger requests (failRequestsGreaterThanOne), since slots of one GPU
    would give a pod no more compute."""
    return pool.sharing_mode in ("time-slicing", "mps")


def _problems(spec: PlatformSpec, request: JobRequest) -> list[str]:
    pools = {p.name: p for p in derive_pools(spec)}
    plan = queue_plan(spec, list(pools.values()))
    teams = {t.team for t in plan.teams}
    tiers = [t.name for t in priority_tiers(spec)]
    problems: list[str] = []
    if not _NAME.match(request.name):
        problems.append(f"--name: expected a lowercase name of at most 40 characters, got {request.name!r}")
    pool = pools.get(request.pool)
    if pool is None:
        problems.append(f"--pool: no pool {request.pool!r} in this stack; pools: {', '.join(pools)}")
    else:
        if request.gpus_per_node > pool.slots_per_node:
            problems.append(
                f"--gpus-per-node: pool {pool.name} nodes offer {pool.slots_per_node} GPUs, asked for {request.gpus_per_node}"
            )
        if request.nodes > pool.max_nodes:
            problems.append(f"--nodes: pool {pool.name} scales to {pool.max_nodes} nodes, asked for {request.nodes}")
        if _one_gpu_per_pod(pool) and request.gpus_per_node > 1:
            problems.append(
                f"--gpus-per-node: pool {pool.name} shares each GPU ({pool.sharing_mode}); a pod there may request 1 GPU"
            )
    if request.team is None and len(teams) > 1:
        problems.append(f"--team: required; teams: {', '.join(sorted(teams))}")
    elif request.team is not None and request.team not in teams:
        problems.append(f"--team: no team {request.team!r} in this stack; teams: {', '.join(sorted(teams))}")
    if request.tier not in tiers:
        problems.append(f"--tier: no tier {request.tier!r}; tiers: {', '.join(tiers)}")
    if request.nodes < 1 or request.gpus_per_node < 1:
        problems.append("--nodes and --gpus-per-node: at least 1")
    if request.image is None and (spec.trainer.image is None or spec.trainer.image == "build"):
        hint = "`pulumi stack output trainerImage`" if spec.trainer.image == "build" else "a trainer image reference"
        problems.append(f"--image: required ({hint}); or set platform.trainer.image to an image reference")
    return problems


def _torchrun(request: JobRequest, host0: str, peak_tflops: float) -> list[str]:
    args = [
        "torchrun",
        f"--nnodes={request.nodes}",
        f"--nproc-per-node={request.gpus_per_node}",
        f"--max-restarts={TORCHRUN_MAX_RESTARTS}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={host0}:{RDZV_PORT}",
        f"--rdzv-id={request.name}",
        "--node-rank=$(NODE_RANK)",
        "-m",
        "trainer",
        "train",
    ]
    trainer_args = list(request.trainer_args)
    defaults = {
        "--checkpoint-dir": f"{DATA_MOUNT}/checkpoints/{request.name}",
        "--metrics-file": f"{DATA_MOUNT}/metrics/{request.name}.jsonl",
        "--peak-tflops": f"{peak_tflops:g}",
    }
    for flag, value in defaults.items():
        if not any(a == flag or a.startswith(f"{flag}=") for a in trainer_args):
            trainer_args += [flag, value]
    return args + trainer_args


def _data_volume(spec: PlatformSpec) -> dict[str, Any]:
    if spec.cloud == "gcp":
        return {
            "name": "data",
            "csi": {
                "driver": GCS_FUSE_DRIVER,
                # gcsfuse mounts as root with 0755 folders unless told the owner: the trainer
                # runs as TRAINER_UID and must write its checkpoints.
                "volumeAttributes": {
                    "bucketName": naming.bucket_name(spec),
                    "mountOptions": f"implicit-dirs,uid={TRAINER_UID},gid={TRAINER_UID}",
                },
            },
        }
    return {"name": "data", "persistentVolumeClaim": {"claimName": DATA_CLAIM}}


def _efa_interfaces(spec: PlatformSpec, pool: Pool, request: JobRequest) -> int:
    """EFA devices a pod claims: all of the node's, when it takes every GPU of an EFA node."""
    pool_spec = next(p for p in spec.node_pools if p.name == pool.name)
    if spec.cloud != "aws" or not pool_spec.efa or pool.instance_type is None:
        return 0
    if request.gpus_per_node < pool.gpus_per_node or request.nodes < 2:
        return 0
    return len(efa_interfaces(pool.instance_type.name))


def _shm_size(pool: Pool) -> str:
    """Shared memory for NCCL and data loader workers: a quarter of the node, capped at 256Gi."""
    memory = pool.instance_type.memory_gib if pool.instance_type else 64
    return f"{min(memory // 4, 256)}Gi"


def render(spec: PlatformSpec, request: JobRequest) -> dict[str, Any]:
    """The JobSet for `request`, or JobError listing everything that does not fit."""
    problems = _problems(spec, request)
    if problems:
        raise JobError(problems)
    pool = next(p for p in derive_pools(spec) if p.name == request.pool)
    plan = queue_plan(spec, derive_pools(spec))
    team = next(t for t in plan.teams if request.team in (None, t.team))
    image = request.image or spec.trainer.image
    assert image is not None
    devices = {GPU_RESOURCE: str(request.gpus_per_node)}
    env: list[dict[str, Any]] = []
    efa = _efa_interfaces(spec, pool, request)
    if efa:
        # NCCL reaches the other nodes over every EFA interface of the node (aws-ofi-nccl in the
        # image's trainer-efa target).
        devices[EFA_RESOURCE] = str(efa)
        env.append({"name": "FI_PROVIDER", "value": "efa"})
    # Pods reach each other as <jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>.
    host0 = f"{request.name}-{REPLICATED_JOB}-0-0.{request.name}"
    pod_annotations = {GCS_FUSE_ANNOTATION: "true"} if spec.cloud == "gcp" else {}
    container = {
        "name": "trainer",
        "image": image,
        "command": _torchrun(request, host0, pool.gpu.peak_bf16_tflops),
        "env": [
            {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"}}},
            # Restarted workers must not reuse the agent's store (pytorch/pytorch#135712).
            {"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "1"},
            {"name": "CHECKPOINT_BUCKET", "value": naming.bucket_name(spec)},
            *env,
        ],
        "ports": [{"name": "rdzv", "containerPort": RDZV_PORT}],
        "resources": {"requests": dict(devices), "limits": dict(devices)},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": TRAINER_UID,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "data", "mountPath": DATA_MOUNT}, {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    pod_spec = {
        "serviceAccountName": naming.TRAINER_SERVICE_ACCOUNT,
        "priorityClassName": request.tier,
        "restartPolicy": "Never",
        "nodeSelector": pool.selector,
        "tolerations": [{"key": pool.taint.key, "operator": "Exists", "effect": pool.taint.effect}],
        "securityContext": {"runAsNonRoot": True, "runAsUser": TRAINER_UID, "fsGroup": TRAINER_UID},
        "containers": [container],
        "volumes": [
            _data_volume(spec),
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": _shm_size(pool)}},
        ],
    }
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {
            "name": request.name,
            "namespace": team.namespace,
            "labels": {QUEUE_NAME_LABEL: team.local_queue, PRIORITY_CLASS_LABEL: request.tier},
        },
        "spec": {
            "network": {"enableDNSHostnames": True, "subdomain": request.name, "publishNotReadyAddresses": True},
            "failurePolicy": {"maxRestarts": JOBSET_MAX_RESTARTS},
            "replicatedJobs": [
                {
                    "name": REPLICATED_JOB,
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": request.nodes,
                            "completions": request.nodes,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": {
                                "metadata": {"annotations": pod_annotations} if pod_annotations else {},
                                "spec": pod_spec,
                            },
                        }
                    },
                }
            ],
        },
    }

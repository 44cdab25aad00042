"""A multi-node torchrun JobSet for a stack, rendered offline from the spec alone.

Everything the job needs (the pool's selector and taint, the team's namespace and queue, the
tier, the bucket, the trainer's service account, the node's share of CPU and memory) derives
from the spec, so `gpu-platform job` prints an object a team can `kubectl apply` without reading
anything back from the cloud. A request that renders is one that starts: the image is a pullable
reference, the trainer accepts its arguments, and the fit proof (components.checks.fit) holds the
largest and smallest job of every pool against what the stack declares.

The choices, with their upstream sources, are explained in docs/scheduling.md ("What `gpu-platform
job` renders"): a c10d torchrun rendezvous hosted by pod 0 after a bounded wait for its DNS record,
one pod per node, restarts after disruptions that do not use up the restart budget, and a grace
period sized for the preset's checkpoint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

from components import naming, node_resources, tenancy
from components.facts import image_ref
from components.facts.gpudirect import GpuDirect
from components.facts.karpenter import DO_NOT_DISRUPT_ANNOTATION
from components.jobs import fabric, flags, grace, placement, trainer_args
from components.jobs.torchrun import (
    JOBSET_UID_ENV,
    JOBSET_UID_LABEL,
    POD_IP_ENV,
    RDZV_PORT,
    RDZV_WAIT_S,
    WAIT_THEN_TORCHRUN,
    torchrun_args,
)
from components.jobs.volumes import DATA_MOUNT, GCS_FUSE_SIDECAR, data_volumes, pod_annotations
from components.kubernetes import gpudirect_pod
from components.kubernetes.pod_security import mps_through_gke
from components.kubernetes.queues import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL, TeamQueue, queue_plan
from components.kubernetes.tiers import priority_tiers
from components.naming import TRAINER_UID
from components.node_resources import EFA_RESOURCE, Requests
from components.observability.objects import TRAINER_METRICS_PORT, TRAINER_PORT_NAME
from components.pools import GPU_RESOURCE, Pool, derive_pools
from components.spec import NodePoolSpec, PlatformSpec
from components.spec.karpenter_rules import karpenter_provisions

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
# Kubernetes sets this annotation on each pod of an Indexed Job (batch/v1 Job docs).
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# JobSet labels every pod with its JobSet's name (jobset pkg/controllers/jobset_controller.go,
# labelAndAnnotateObject; api/jobset/v1alpha2 JobSetNameKey).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
HOSTNAME_TOPOLOGY = "kubernetes.io/hostname"
REPLICATED_JOB = "node"


# JobSet restarts after real failures (crashes, OOM kills, failed rendezvous); disruptions are free.
DEFAULT_MAX_RESTARTS = 3
DISRUPTION_RULE = "disruptions-do-not-count"
# A quarter of the trainer's memory for /dev/shm (NCCL, data loader workers), between these.
SHM_MIN_GI, SHM_MAX_GI = 1, 256
# Existing clusters do not state node memory: a quarter of a 64 GiB node.
SHM_UNKNOWN_NODE_GI = 16


_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?\Z")


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
    max_restarts: int = DEFAULT_MAX_RESTARTS
    # None: sized for the preset's checkpoint (components.jobs.grace).
    grace_period: int | None = None
    # Kueue topology placement (components.jobs.placement); None: the pool's default.
    topology: str | None = None
    # A fleet job (components.fleet.job): the same object must run on every worker MultiKueue may
    # copy it to, so it names the `training-data` claim every worker holds instead of the cloud's
    # own mount, claims no EFA devices, carries the GCS FUSE sidecar annotations (read by GKE's
    # webhook only) and names no bucket.
    portable: bool = False


def shared_gpus(pool: Pool) -> bool:
    """Time-sliced and MPS pools give a pod one slot of a GPU other pods use too: GKE's sharing
    allows no more, and the NVIDIA plugin's configs here fail larger requests
    (failRequestsGreaterThanOne), since slots of one GPU would give a pod no more compute."""
    return pool.sharing_mode in ("time-slicing", "mps")


def whole_gpu_memory_gib(pool: Pool) -> int | None:
    """The catalog's memory of the pool's GPU when a pod gets whole GPUs; None on a MIG slice or a
    shared GPU, which hold less (the trainer asks CUDA there)."""
    return pool.gpu.memory_gib if pool.sharing_mode == "none" else None


def _gke_family(spec: PlatformSpec, spec_pool: NodePoolSpec, pool: Pool, request: JobRequest) -> GpuDirect | None:
    """A portable (fleet) job carries no GPUDirect wiring: MultiKueue copies it as is to workers
    of either cloud, and GKE's interfaces and daemons mean nothing on EKS (docs/fleet.md)."""
    if request.portable:
        return None
    return fabric.gke_family(spec, spec_pool, pool, request.nodes, request.gpus_per_node)


def _spec_pool(spec: PlatformSpec, name: str) -> NodePoolSpec:
    return next(p for p in spec.node_pools if p.name == name)


def _image(spec: PlatformSpec, request: JobRequest) -> tuple[str, str | None]:
    """(where the image comes from, the reference)."""
    if request.image is not None:
        return "--image", request.image
    image = spec.trainer.image
    return "platform.trainer.image", None if image in (None, "build") else image


def with_platform_defaults(
    request: JobRequest, peak_tflops: float, gpu_memory_gib: int | None = None, fabric_flags: dict[str, str] | None = None
) -> list[str]:
    """The trainer arguments with what the platform fills in unless given: checkpoint and metrics
    files on the shared volume, the GPU's peak for MFU, its memory for the default micro-batch
    (trainer.memory) when a pod has a whole GPU, and the fabric gate's mode and floor
    (components.jobs.fabric)."""
    args = list(request.trainer_args)
    defaults = {
        "--checkpoint-dir": f"{DATA_MOUNT}/checkpoints/{request.name}",
        "--metrics-file": f"{DATA_MOUNT}/metrics/{request.name}.jsonl",
        "--peak-tflops": f"{peak_tflops:g}",
        **(fabric_flags or {}),
    }
    if gpu_memory_gib is not None:
        defaults["--gpu-memory-gib"] = str(gpu_memory_gib)
    for flag, value in defaults.items():
        if not any(a == flag or a.startswith(f"{flag}=") for a in args):
            args += [flag, value]
    return args


def _pool_problems(pool: Pool, request: JobRequest) -> list[str]:
    problems: list[str] = []
    if request.gpus_per_node > pool.slots_per_node:
        problems.append(
            f"--gpus-per-node: pool {pool.name} nodes offer {pool.slots_per_node} GPUs, asked for {request.gpus_per_node}"
        )
    if request.nodes > pool.max_nodes:
        problems.append(f"--nodes: pool {pool.name} scales to {pool.max_nodes} nodes, asked for {request.nodes}")
    if shared_gpus(pool) and request.gpus_per_node > 1:
        problems.append(
            f"--gpus-per-node: pool {pool.name} shares each GPU ({pool.sharing_mode}); a pod there may request 1 GPU"
        )
    if shared_gpus(pool) and request.nodes > 1:
        problems.append(
            f"--nodes: pool {pool.name} shares each GPU ({pool.sharing_mode}); a multi-node job would run NCCL "
            "between slices of GPUs other jobs use: use an unshared pool, or --nodes 1"
        )
    return problems


def _problems(spec: PlatformSpec, request: JobRequest) -> list[str]:
    pools = {p.name: p for p in derive_pools(spec)}
    plan = queue_plan(spec, list(pools.values()))
    teams = {t.team for t in plan.teams}
    tiers = [t.name for t in priority_tiers(spec)]
    texts = {"--name": request.name, "--image": request.image, "--pool": request.pool, "--team": request.team, "--tier": request.tier}
    problems = flags.flag_problems(request.max_restarts, request.grace_period, texts, request.trainer_args)
    if problems:
        return problems
    if not _NAME.match(request.name):
        problems.append(f"--name: expected a lowercase name of at most 40 characters, got {request.name!r}")
    pool = pools.get(request.pool)
    if pool is None:
        problems.append(f"--pool: no pool {request.pool!r} in this stack; pools: {', '.join(pools)}")
    else:
        problems += _pool_problems(pool, request) + placement.problems(spec, pool, request.topology)
    if request.team is None and len(teams) > 1:
        problems.append(f"--team: required; teams: {', '.join(sorted(teams))}")
    elif request.team is not None and request.team not in teams:
        problems.append(f"--team: no team {request.team!r} in this stack; teams: {', '.join(sorted(teams))}")
    if request.tier not in tiers:
        problems.append(f"--tier: no tier {request.tier!r}; tiers: {', '.join(tiers)}")
    sizes_valid = request.nodes >= 1 and request.gpus_per_node >= 1
    if not sizes_valid:
        problems.append("--nodes and --gpus-per-node: at least 1")
    if request.max_restarts < 0:
        problems.append(f"--max-restarts: at least 0, got {request.max_restarts}")
    if request.grace_period is not None and request.grace_period < grace.MIN_GRACE_PERIOD_S:
        problems.append(
            f"--grace-period: at least {grace.MIN_GRACE_PERIOD_S} seconds (torchrun stops "
            f"{grace.SHUTDOWN_MARGIN_S} s before the kubelet), got {request.grace_period}"
        )
    source, image = _image(spec, request)
    if image is None:
        hint = "`pulumi stack output trainerImage`" if spec.trainer.image == "build" else "a trainer image reference"
        problems.append(f"--image: required ({hint}); or set platform.trainer.image to an image reference")
    else:
        image_problem = image_ref.problem(image)
        if image_problem:
            problems.append(f"{source}: {image_problem}")
    peak = pool.gpu.peak_bf16_tflops if pool is not None else 1.0
    whole_gpu = whole_gpu_memory_gib(pool) if pool is not None else None
    world_size = request.nodes * request.gpus_per_node if sizes_valid else None
    problems += [
        f"trainer argument {problem}"
        for problem in trainer_args.problems(with_platform_defaults(request, peak, whole_gpu), world_size,
                                             request.gpus_per_node)
    ]
    return problems


def _efa_devices(pool: Pool, spec_pool: NodePoolSpec, request: JobRequest) -> int:
    """EFA devices a pod claims: all of the node's, when it takes every GPU of an EFA node."""
    if request.portable:
        return 0
    if request.gpus_per_node < pool.gpus_per_node or request.nodes < 2:
        return 0
    return node_resources.extended_resources(pool, spec_pool).get(EFA_RESOURCE, 0)


def _trainer_requests(spec: PlatformSpec, pool: Pool, spec_pool: NodePoolSpec, request: JobRequest) -> Requests | None:
    """The trainer's CPU and memory: the pod's share of what its node leaves to jobs, in proportion
    to the GPU slots it takes, less its sidecars (GCS FUSE's, injected; the GPUDirect daemon's).
    None where the spec does not state node sizes (existing clusters): the namespace's default
    requests apply."""
    node = node_resources.job_allocatable(spec, pool, spec_pool)
    if node is None:
        return None
    daemon = gpudirect_pod.daemon_requests(_gke_family(spec, spec_pool, pool, request))
    pod = node_resources.share(node, request.gpus_per_node, pool.slots_per_node) - daemon
    return pod - GCS_FUSE_SIDECAR if spec.cloud == "gcp" or request.portable else pod


def _shm_size(trainer: Requests | None) -> str:
    if trainer is None:
        return f"{SHM_UNKNOWN_NODE_GI}Gi"
    return f"{min(max(trainer.memory_mib // 4 // 1024, SHM_MIN_GI), SHM_MAX_GI)}Gi"


def _container(
    spec: PlatformSpec,
    pool: Pool,
    spec_pool: NodePoolSpec,
    request: JobRequest,
    image: str,
    trainer: Requests | None,
    grace_period: int,
    team: TeamQueue,
) -> dict[str, Any]:
    devices = {GPU_RESOURCE: str(request.gpus_per_node)}
    env: list[dict[str, Any]] = [
        {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"}}},
        {"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": JOBSET_UID_ENV, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOBSET_UID_LABEL}']"}}},
        {"name": "RDZV_WAIT_SECONDS", "value": str(RDZV_WAIT_S)},
        *([] if request.portable else [{"name": "CHECKPOINT_BUCKET", "value": naming.bucket_name(spec)}]),
        # Rank 0 serves its Prometheus metrics here (trainer.metrics_server, docs/observability.md).
        {"name": "TRAINER_METRICS_PORT", "value": str(TRAINER_METRICS_PORT)},
    ]
    if spec.scheduling.teams:
        # Where in the bucket the team's identity may write (components.tenancy).
        env.append({"name": "TEAM_PREFIX", "value": tenancy.team_prefix(team.team)})
    efa = _efa_devices(pool, spec_pool, request)
    if efa:
        # NCCL reaches the other nodes over every EFA interface of the node (aws-ofi-nccl in the
        # image's trainer-efa target).
        devices[EFA_RESOURCE] = str(efa)
    family = _gke_family(spec, spec_pool, pool, request)
    env += fabric.env(pool, request.nodes, efa, family)
    resources = dict(devices)
    hugepages = node_resources.hugepages_request_mib(spec, spec_pool, efa)
    if hugepages:
        # libfabric's EFA provider backs its buffers with the node's pre-allocated huge pages.
        resources[node_resources.HUGEPAGES_2MI_RESOURCE] = node_resources.memory_quantity(hugepages)
    if trainer is not None:
        resources |= {
            "cpu": node_resources.cpu_quantity(trainer.cpu_m),
            "memory": node_resources.memory_quantity(trainer.memory_mib),
        }
    mounts: list[dict[str, Any]] = [{"name": "data", "mountPath": DATA_MOUNT}]
    if any(volume["name"] == "datasets" for volume in data_volumes(spec, team, request.portable)):
        mounts.append({"name": "datasets", "mountPath": tenancy.DATASETS_MOUNT, "readOnly": True})
    if pool.sharing_mode != "mps":
        # With MPS the device plugin (or GKE's host IPC) provides /dev/shm: the MPS daemon's.
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    if family is not None:
        mounts += gpudirect_pod.gke_trainer_mounts(family)
    # Pods reach each other as <jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>.
    host0 = f"{request.name}-{REPLICATED_JOB}-0-0.{request.name}"
    typed = [flags.kubelet_literal(arg) for arg in request.trainer_args]
    args = with_platform_defaults(
        replace(request, trainer_args=typed),
        pool.gpu.peak_bf16_tflops,
        whole_gpu_memory_gib(pool),
        fabric.trainer_flags(pool, request.nodes, bool(efa) or family is not None),
    )
    return {
        "name": "trainer",
        "image": image,
        "command": ["python3", "-c", WAIT_THEN_TORCHRUN],
        "args": torchrun_args(request.nodes, request.gpus_per_node, host0, grace.shutdown_timeout(grace_period), args,
                              request.name),
        "env": env,
        "ports": [
            {"name": "rdzv", "containerPort": RDZV_PORT},
            {"name": TRAINER_PORT_NAME, "containerPort": TRAINER_METRICS_PORT},
        ],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": TRAINER_UID,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }


def _pod_spec(
    spec: PlatformSpec,
    pool: Pool,
    request: JobRequest,
    container: dict[str, Any],
    trainer: Requests | None,
    grace_period: int,
    team: TeamQueue,
) -> dict[str, Any]:
    volumes = data_volumes(spec, team, request.portable)
    if pool.sharing_mode != "mps":
        volumes.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": _shm_size(trainer)}})
    pod: dict[str, Any] = {
        "serviceAccountName": naming.TRAINER_SERVICE_ACCOUNT,
        # IRSA's webhook projects its own token volume and GKE Workload Identity answers on the
        # metadata server; the trainer never calls the Kubernetes API (docs/scheduling.md).
        "automountServiceAccountToken": False,
        "priorityClassName": request.tier,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": grace_period,
        "nodeSelector": pool.selector,
        "tolerations": [{"key": pool.taint.key, "operator": "Exists", "effect": pool.taint.effect}],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": TRAINER_UID,
            "fsGroup": TRAINER_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": volumes,
    }
    if request.nodes > 1:
        # One pod per node: the pods of one job never share a node's GPUs, NICs or memory.
        pod["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {JOBSET_NAME_LABEL: request.name}}, "topologyKey": HOSTNAME_TOPOLOGY}
                ]
            }
        }
    if mps_through_gke(spec, pool):
        pod["hostIPC"] = True
    family = _gke_family(spec, _spec_pool(spec, pool.name), pool, request)
    if family is not None:
        volumes += gpudirect_pod.gke_volumes(family)
        if family.daemon is not None:
            pod["initContainers"] = gpudirect_pod.gke_sidecars(family)
    return pod


def _team(spec: PlatformSpec, request: JobRequest) -> TeamQueue:
    plan = queue_plan(spec, derive_pools(spec))
    return next(t for t in plan.teams if request.team in (None, t.team))


def render(spec: PlatformSpec, request: JobRequest) -> dict[str, Any]:
    """The JobSet for `request`, or JobError listing everything that does not fit."""
    problems = _problems(spec, request)
    if problems:
        raise JobError(problems)
    pool = next(p for p in derive_pools(spec) if p.name == request.pool)
    spec_pool = _spec_pool(spec, pool.name)
    team = _team(spec, request)
    _, image = _image(spec, request)
    assert image is not None
    preset = trainer_args.preset(with_platform_defaults(request, pool.gpu.peak_bf16_tflops))
    assert preset is not None, "the trainer arguments parsed in _problems"
    grace_period = request.grace_period or grace.default_grace_period(preset)
    trainer = _trainer_requests(spec, pool, spec_pool, request)
    container = _container(spec, pool, spec_pool, request, image, trainer, grace_period, team)
    annotations = pod_annotations(spec, request.portable) | placement.topology_annotations(spec, pool, request.nodes, request.topology)
    family = _gke_family(spec, spec_pool, pool, request)
    if family is not None:
        annotations |= gpudirect_pod.gke_annotations(pool.name, family)
    if karpenter_provisions(spec, spec_pool):
        # No consolidation, drift or expiry takes the node while the pod runs (facts.karpenter).
        annotations[DO_NOT_DISRUPT_ANNOTATION] = "true"
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
            "failurePolicy": {
                "maxRestarts": request.max_restarts,
                # Every pod of the old attempt is gone before the new one starts, so a new pod
                # never reaches the old pod 0 under the same name.
                "restartStrategy": "BlockingRecreate",
                "rules": [
                    fabric.jobset_rule(1),
                    {
                        "name": DISRUPTION_RULE,
                        "action": "RestartJobSetAndIgnoreMaxRestarts",
                        "onJobFailureReasons": ["PodFailurePolicy"],
                    }
                ],
            },
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
                            # A pod lost to a drain, preemption or spot reclaim carries the
                            # DisruptionTarget condition: fail the Job with reason PodFailurePolicy,
                            # which the JobSet rule above restarts without counting.
                            "podFailurePolicy": {
                                "rules": [
                                    {
                                        "action": "FailJob",
                                        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                                    },
                                    # A stopped fabric gate (components.jobs.fabric): final.
                                    fabric.pod_failure_rule("trainer"),
                                ]
                            },
                            "template": {
                                "metadata": {"annotations": annotations} if annotations else {},
                                "spec": _pod_spec(spec, pool, request, container, trainer, grace_period, team),
                            },
                        }
                    },
                }
            ],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the container's entry script) as literal blocks, readable in review."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_Dumper.add_representer(str, _str)


def to_yaml(jobset: dict[str, Any]) -> str:
    return yaml.dump(jobset, Dumper=_Dumper, sort_keys=False)

"""Rules every stack follows: cluster, pools, instance types, sharing, the trainer image."""

from __future__ import annotations

from collections import Counter
from typing import Literal

from components.facts import catalog, limits
from components.spec.models import NodePoolSpec, PlatformSpec
from components.facts import image_ref
from components.spec.problems import MAX_NAME, ROOT, Problem, did_you_mean, dns_label_problems

# MIG instances exist only once something creates them on the node: GKE does for gpu_partition_size;
# elsewhere it is the GPU Operator's MIG manager (DESIGN: NVIDIA GPU Operator), which this platform
# does not install. Without it the device plugin advertises slots that never appear.
_NO_MIG_MANAGER = (
    "mig on {cloud} needs the GPU Operator's MIG manager to create the MIG instances, which this platform does not "
    "install: the pool would advertise GPU slots that never appear; use time-slicing or mps, or a GKE pool (GKE "
    "partitions GPUs itself)"
)


def platform_problems(spec: PlatformSpec) -> list[Problem]:
    problems = cluster_problems(spec) + trainer_problems(spec)
    names = Counter(pool.name for pool in spec.node_pools)
    for i, pool in enumerate(spec.node_pools):
        at = f"{ROOT}.nodePools[{i}]"
        problems += pool_name_problems(spec, pool, at, names)
        problems += pool_hardware_problems(spec, pool, at)
        if pool.max_nodes < pool.min_nodes:
            problems.append(
                Problem(f"{at}.maxNodes", f"must be >= minNodes ({pool.min_nodes}), got {pool.max_nodes}")
            )
        problems += sharing_problems(pool, at)
        if pool.sharing.mode == "mig" and spec.cloud != "gcp":
            problems.append(Problem(f"{at}.sharing.mode", _NO_MIG_MANAGER.format(cloud=spec.cloud)))
    if spec.cloud == "existing":
        problems += _existing_size_problems(spec)
    return problems


def _existing_size_problems(spec: PlatformSpec) -> list[Problem]:
    """Nodes of an existing cluster: a Kubernetes cluster holds at most 5,000 nodes
    ("Considerations for large clusters"), and no NVIDIA node more than 16 GPUs."""
    problems = [
        Problem(
            f"{ROOT}.nodePools[{i}].gpusPerNode",
            f"at most {limits.MAX_GPUS_PER_NODE} GPUs per node (the largest NVIDIA systems), got {pool.gpus_per_node}",
        )
        for i, pool in enumerate(spec.node_pools)
        if pool.gpus_per_node is not None and pool.gpus_per_node > limits.MAX_GPUS_PER_NODE
    ]
    total = sum(pool.max_nodes for pool in spec.node_pools)
    if total > limits.KUBERNETES_NODES_PER_CLUSTER:
        problems.append(
            Problem(
                f"{ROOT}.nodePools",
                f"the pools count {total} nodes; a Kubernetes cluster holds at most "
                f"{limits.KUBERNETES_NODES_PER_CLUSTER} (Kubernetes 'Considerations for large clusters')",
            )
        )
    return problems


def cluster_problems(spec: PlatformSpec) -> list[Problem]:
    at = f"{ROOT}.cluster"
    problems = dns_label_problems(spec.cluster.name, f"{at}.name")
    if spec.cluster.kubernetes_version not in catalog.SUPPORTED_KUBERNETES_VERSIONS:
        supported = ", ".join(catalog.SUPPORTED_KUBERNETES_VERSIONS)
        problems.append(
            Problem(
                f"{at}.kubernetesVersion",
                f"expected one of {supported}, got {spec.cluster.kubernetes_version!r}",
            )
        )
    if spec.cloud == "existing" and not spec.cluster.context:
        problems.append(
            Problem(f"{at}.context", "required for cloud: existing (the kubeconfig context to use)")
        )
    if spec.cloud == "existing" and spec.cluster.deletion_protection is not None:
        problems.append(
            Problem(f"{at}.deletionProtection", "only for cloud: aws or gcp; an existing cluster is not the stack's to delete")
        )
    if spec.cloud != "existing" and spec.cluster.context is not None:
        problems.append(
            Problem(f"{at}.context", f"only for cloud: existing; the {spec.cloud} wing builds its own kubeconfig")
        )
    return problems


def trainer_problems(spec: PlatformSpec) -> list[Problem]:
    image = spec.trainer.image
    at = f"{ROOT}.trainer.image"
    if image == "build" and spec.cloud == "existing":
        return [Problem(at, "`build` pushes to the stack's registry, which only aws and gcp stacks have; name an image")]
    if image is not None and image != "build":
        problem = image_ref.problem(image)
        if problem:
            return [Problem(at, f"expected `build` or an image reference: {problem}")]
    return []




def pool_name_problems(
    spec: PlatformSpec, pool: NodePoolSpec, at: str, names: Counter[str]
) -> list[Problem]:
    problems = dns_label_problems(pool.name, f"{at}.name")
    if names[pool.name] > 1:
        problems.append(Problem(f"{at}.name", f"duplicate pool name {pool.name!r}: pool names must be unique"))
    combined = f"{spec.cluster.name}-{pool.name}"
    cluster_ok = not dns_label_problems(spec.cluster.name, "")
    if cluster_ok and not problems and len(combined) > MAX_NAME:
        problems.append(
            Problem(
                f"{at}.name",
                f"'{combined}' (cluster name + pool name) is longer than {MAX_NAME} characters; shorten either",
            )
        )
    return problems


def pool_hardware_problems(spec: PlatformSpec, pool: NodePoolSpec, at: str) -> list[Problem]:
    if spec.cloud == "existing":
        return existing_pool_problems(pool, at)
    problems = [
        Problem(f"{at}.{key}", f"only for cloud: existing; on {spec.cloud} the instanceType decides it")
        for key, value in (("gpuModel", pool.gpu_model), ("nodeSelector", pool.node_selector))
        if value
    ]
    if pool.instance_type is None:
        return [*problems, Problem(f"{at}.instanceType", "required field is missing")]
    problem = instance_type_problem(pool.instance_type, spec.cloud)
    if problem:
        return [*problems, Problem(f"{at}.instanceType", problem)]
    shape = catalog.INSTANCE_TYPES[pool.instance_type]
    if pool.gpus_per_node is not None and pool.gpus_per_node not in shape.gpu_counts:
        counts = " or ".join(str(c) for c in shape.gpu_counts)
        problems.append(
            Problem(f"{at}.gpusPerNode", f"{pool.instance_type} carries {counts} GPUs, got {pool.gpus_per_node}")
        )
    return problems


def instance_type_problem(name: str, cloud: Literal["aws", "gcp"]) -> str | None:
    """Why `name` cannot back an NVIDIA pool on `cloud`, or None when it can."""
    if catalog.family(name) in catalog.NOT_NVIDIA:
        return f"{name} has {catalog.NOT_NVIDIA[catalog.family(name)]}; pick an NVIDIA GPU type"
    shape = catalog.INSTANCE_TYPES.get(name)
    if shape is None:
        hint = did_you_mean(name, catalog.instance_types(cloud))
        return f"{name!r} is not an NVIDIA GPU type in the {cloud} catalog{hint}"
    if shape.cloud != cloud:
        return f"{name} is a {shape.cloud} type, but this stack's cloud is {cloud}"
    return None


def existing_pool_problems(pool: NodePoolSpec, at: str) -> list[Problem]:
    problems: list[Problem] = []
    if pool.instance_type is not None:
        problems.append(
            Problem(f"{at}.instanceType", "not for cloud: existing; describe the nodes with gpuModel and gpusPerNode")
        )
    if pool.gpu_model is None:
        problems.append(Problem(f"{at}.gpuModel", f"required for cloud: existing; one of {', '.join(catalog.GPU_MODELS)}"))
    elif pool.gpu_model not in catalog.GPU_MODELS:
        hint = did_you_mean(pool.gpu_model, list(catalog.GPU_MODELS))
        problems.append(
            Problem(f"{at}.gpuModel", f"unknown GPU model {pool.gpu_model!r}{hint}; one of {', '.join(catalog.GPU_MODELS)}")
        )
    if pool.gpus_per_node is None:
        problems.append(Problem(f"{at}.gpusPerNode", "required for cloud: existing"))
    if not pool.node_selector:
        problems.append(Problem(f"{at}.nodeSelector", "required for cloud: existing: the labels that find these nodes"))
    if pool.min_nodes != pool.max_nodes:
        problems.append(
            Problem(f"{at}.maxNodes", f"existing nodes do not scale: set minNodes = maxNodes (the node count), got {pool.min_nodes} and {pool.max_nodes}")
        )
    if pool.capacity != "on-demand":
        problems.append(Problem(f"{at}.capacity", "existing nodes are not spot capacity: leave capacity unset"))
    return problems


def sharing_problems(pool: NodePoolSpec, at: str) -> list[Problem]:
    sharing = pool.sharing
    at = f"{at}.sharing"
    problems: list[Problem] = []
    if sharing.mode in ("time-slicing", "mps"):
        most = limits.MAX_MPS_CLIENTS_PER_GPU if sharing.mode == "mps" else limits.MAX_PODS_PER_NODE
        why = "CUDA MPS's limit of clients per GPU" if sharing.mode == "mps" else "kubelet's default limit of pods per node"
        if sharing.replicas is None:
            problems.append(Problem(f"{at}.replicas", f"required for mode {sharing.mode} (at least 2)"))
        elif sharing.replicas < 2:
            problems.append(Problem(f"{at}.replicas", f"expected at least 2 for mode {sharing.mode}, got {sharing.replicas}"))
        elif sharing.replicas > most:
            problems.append(Problem(f"{at}.replicas", f"at most {most} for mode {sharing.mode} ({why}), got {sharing.replicas}"))
    elif sharing.replicas is not None:
        problems.append(Problem(f"{at}.replicas", f"only for time-slicing and mps, not mode {sharing.mode}"))
    if sharing.mode != "mig":
        if sharing.profile is not None:
            problems.append(Problem(f"{at}.profile", f"only for mode mig, not mode {sharing.mode}"))
        return problems
    gpu = gpu_model_name(pool)
    if gpu is None:
        return problems
    profiles = catalog.GPU_MODELS[gpu].mig_profiles
    if not profiles:
        problems.append(Problem(f"{at}.mode", f"{gpu} GPUs have no MIG; use time-slicing or mps"))
    elif sharing.profile is None:
        problems.append(Problem(f"{at}.profile", f"required for mode mig; one of {', '.join(profiles)}"))
    elif sharing.profile not in profiles:
        problems.append(
            Problem(f"{at}.profile", f"{gpu} has no MIG profile {sharing.profile!r}; one of {', '.join(profiles)}")
        )
    return problems


def gpus_per_node(pool: NodePoolSpec) -> int:
    """Physical GPUs on one node of a valid pool: the stated count, else the instance type's."""
    shape = catalog.INSTANCE_TYPES.get(pool.instance_type) if pool.instance_type else None
    return pool.gpus_per_node or (shape.gpus_per_node if shape else 1)


def slots_per_gpu(pool: NodePoolSpec) -> int:
    """Schedulable `nvidia.com/gpu` per physical GPU of a valid pool: sharing replicas, MIG
    instances of the profile, or 1. The quota rules and components.pools count with it."""
    sharing = pool.sharing
    if sharing.mode in ("time-slicing", "mps"):
        return sharing.replicas or 1
    gpu = gpu_model_name(pool)
    if sharing.mode == "mig" and sharing.profile and gpu is not None:
        return catalog.GPU_MODELS[gpu].mig_profiles[sharing.profile]
    return 1


def gpu_model_name(pool: NodePoolSpec) -> str | None:
    """The pool's GPU model, from its instance type or (existing clusters) its gpuModel."""
    if pool.instance_type is not None:
        shape = catalog.INSTANCE_TYPES.get(pool.instance_type)
        return shape.gpu if shape else None
    return pool.gpu_model if pool.gpu_model in catalog.GPU_MODELS else None

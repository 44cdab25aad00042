"""The fit proof (`job-fits-pool`): every job `gpu-platform job` accepts can start.

For every pool, the largest job the renderer accepts there (all its nodes, every GPU slot of a
node) and the smallest (one node, one slot) are rendered with the real renderer, for every team,
and held against what the declared resources say, read the way their consumers read them:

- Kueue: the team's LocalQueue and ClusterQueue, a flavor of it whose node labels agree with the
  job's node selector (Kueue only compares the keys its flavors use), the resources Kueue
  accounts (quotaCheckStrategy of the controller configuration in the kueue release) covered,
  and nominal plus borrowable quota in the cohort at least the job's total. The admitted pods
  carry the flavor's labels and tolerations, as Kueue injects them.
- The nodes of the pool once scaled up from zero. AWS: the autoscaler's template node (instance
  type, then the ASG's node-template tags: resources, labels, taints; cluster-autoscaler
  cloudprovider/aws/aws_manager.go buildNodeFromTemplate) and the real node (node group labels
  and taints, the launch template's EFA interfaces, GPU slots from the device plugin config its
  label selects, CPU and memory after the kubelet's reserved share and the DaemonSets that run
  there). GKE: the node pool's machine type, accelerators and sharing, labels and taints, from
  which GKE builds both the autoscaler's template and the node (cluster-autoscaler
  cloudprovider/gce/templates.go BuildNodeFromTemplate). Existing clusters: the pool facts the
  stack declares (node selector, GPUs per node, maximum nodes); their CPU and memory are unknown.

- Kueue Topology-Aware Scheduling (components.checks.fit.topology): a flavor naming a Topology
  needs it declared, its levels' labels on the pool's nodes, and nodes Kueue can count.

Flex-start and queued GKE pools hold no standing nodes: their capacity is obtainable on request,
when GKE's Dynamic Workload Scheduler grants it, and the proof says so. A queued pool's nodes come
only through ProvisioningRequests, with GKE's `cloud.google.com/gke-queued` taint on them: its jobs
fit only through a Kueue admission check of class `queued-provisioning.gke.io` on their flavor,
and with a toleration of that taint.

Nothing here reads the spec's derivations of those resources (only the pool list and the job
renderer come from the spec), so a derivation bug in a wing or the layer shows up as a misfit.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from components import node_resources
from components.checks import quantities
from components.checks.declared import Resource, get, items, mapping
from components.checks.fit.cluster import Cluster, pod_requests
from components.checks.fit.kueue import Kueue
from components.checks.fit.nodes import HUGEPAGES_PREFIX, capacity_problems, node_candidates, queued_problems, view_problems
from components.checks.fit.shapes import PodShape, int_or_none, str_map
from components.checks.fit.topology import topology_problems
from components.jobs import renderer, volumes
from components.kubernetes.queues import QUEUE_NAME_LABEL, queue_plan
from components.kubernetes.tiers import priority_tiers
from components.node_resources import Requests
from components.pools import GPU_RESOURCE, Pool, derive_pools
from components.spec import PlatformSpec

# A reference and trainer arguments the proof's jobs render with: the smallest valid training run.
PROOF_IMAGE = "registry.invalid/gpu-platform/fit-proof:0"
PROOF_PRESET = "tiny"
PROOF_SEQ_LEN = 128


def proof_requests(spec: PlatformSpec, pool: Pool, team: str) -> list[renderer.JobRequest]:
    """The largest and the smallest job `gpu-platform job` accepts on `pool` for `team`."""
    if pool.max_nodes < 1:
        return []
    shared = renderer.shared_gpus(pool)
    largest = (1 if shared else pool.max_nodes, 1 if shared else pool.slots_per_node)
    shapes = [largest] if largest == (1, 1) else [largest, (1, 1)]
    tier = priority_tiers(spec)[0].name
    return [
        renderer.JobRequest(
            pool=pool.name,
            nodes=nodes,
            gpus_per_node=gpus,
            team=team,
            tier=tier,
            name="fit-proof",
            image=PROOF_IMAGE,
            trainer_args=[
                "--data", f"{volumes.DATA_MOUNT}/datasets/fit-proof", "--preset", PROOF_PRESET, "--max-steps", "1",
                "--checkpoint-every", "1", "--global-batch-size", str(nodes * gpus), "--seq-len", str(PROOF_SEQ_LEN),
                "--seed", "0",
            ],
        )
        for nodes, gpus in shapes
    ]


def pod_shape(jobset: Mapping[str, Any], defaults: Requests = node_resources.NOTHING) -> PodShape:
    """One pod of a rendered JobSet as the scheduler sizes it: its containers' and native
    sidecars' requests, with the namespace's LimitRange `defaults` for any that state none
    (components.checks.fit.cluster.pod_requests), plus the GCS FUSE sidecar GKE's webhook injects
    for the annotation."""
    job = get(jobset, "spec", "replicatedJobs", 0, "template", "spec")
    template = mapping(get(job, "template"))
    pod = mapping(get(template, "spec"))
    extended: dict[str, int] = {}
    sized = False
    for container in items(get(pod, "containers")):
        asked = mapping(get(container, "resources", "requests"))
        for name, value in asked.items():
            if name in ("cpu", "memory"):
                sized = True
            elif name.startswith(HUGEPAGES_PREFIX):
                extended[name] = extended.get(name, 0) + quantities.memory_mib(value)
            elif int_or_none(value) is not None:
                extended[name] = extended.get(name, 0) + (int_or_none(value) or 0)
    requests = pod_requests(pod, defaults)
    annotations = str_map(get(template, "metadata", "annotations"))
    if annotations.get(volumes.GCS_FUSE_ANNOTATION) == "true":
        requests = requests + Requests(
            quantities.cpu_millicores(annotations.get(volumes.GCS_FUSE_CPU_REQUEST_ANNOTATION)),
            quantities.memory_mib(annotations.get(volumes.GCS_FUSE_MEMORY_REQUEST_ANNOTATION)),
        )
    anti_affinity = items(get(pod, "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"))
    return PodShape(
        pods=int_or_none(get(job, "parallelism")) or 1,
        one_per_node=any(get(term, "topologyKey") == renderer.HOSTNAME_TOPOLOGY for term in anti_affinity),
        extended=extended,
        requests=requests if sized else None,
        node_selector=str_map(get(pod, "nodeSelector")),
        tolerations=[t for t in items(get(pod, "tolerations")) if isinstance(t, Mapping)],
        namespace=str(get(jobset, "metadata", "namespace")),
        queue=str(get(jobset, "metadata", "labels", QUEUE_NAME_LABEL)),
    )


def _totals(pod: PodShape) -> dict[str, int]:
    totals = {name: count * pod.pods for name, count in pod.extended.items()}
    if pod.requests is not None:
        totals |= {"cpu": pod.requests.cpu_m * pod.pods, "memory": pod.requests.memory_mib * pod.pods}
    return totals


def misfits(resources: Sequence[Resource], spec: PlatformSpec) -> list[tuple[str | None, str]]:
    """(resource key or None, message) for every way a job the renderer accepts would not run."""
    cluster = Cluster(resources)
    kueue = Kueue(resources, cluster)
    pools = derive_pools(spec)
    teams = [t.team for t in queue_plan(spec, pools).teams]
    found: dict[tuple[str | None, str], None] = {}
    for pool in pools:
        for team in teams:
            for request in proof_requests(spec, pool, team):
                shape = f"pool {pool.name}, job {request.nodes} node(s) x {request.gpus_per_node} GPU(s)"
                try:
                    jobset = renderer.render(spec, request)
                except renderer.JobError as exc:
                    for problem in exc.problems:
                        found[(None, f"{shape}: gpu-platform job refuses it: {problem}")] = None
                    continue
                for key, message in jobset_misfits(spec, resources, cluster, kueue, pool, jobset, request.nodes, f"{shape}, team {team}", shape):
                    found[(key, message)] = None
    return list(found)


def jobset_misfits(
    spec: PlatformSpec,
    resources: Sequence[Resource],
    cluster: Cluster,
    kueue: Kueue,
    pool: Pool,
    jobset: Mapping[str, Any],
    nodes: int,
    queue_shape: str,
    shape: str,
) -> list[tuple[str | None, str]]:
    """How one rendered JobSet would not run on the stack: Kueue's admission, then the nodes of
    `pool` it lands on (also the fleet's proof, components.checks.fleet_fit)."""
    found: dict[tuple[str | None, str], None] = {}
    pod = pod_shape(jobset, cluster.default_requests.get(str(get(jobset, "metadata", "namespace")), node_resources.NOTHING))
    problems, flavor, queue_key = kueue.admit(pod, _totals(pod))
    for problem in problems:
        found[(queue_key, f"{queue_shape}: {problem}")] = None
    if flavor is None:
        return list(found)
    admitted = pod.admitted(kueue.flavors[flavor])
    candidates = node_candidates(spec, resources, cluster, pool, admitted)
    if not candidates:
        selector = ", ".join(f"{k}={v}" for k, v in admitted.node_selector.items())
        found[(None, f"{shape}: no node group or node pool has nodes labelled {selector}")] = None
    quota = kueue.flavor_total(flavor, GPU_RESOURCE)
    cluster_queue = kueue.local_queues[(pod.namespace, pod.queue)]
    for problem in topology_problems(resources, kueue, pool, flavor, cluster_queue, nodes):
        found[(None, f"{shape}: {problem}")] = None
    for views in candidates:
        for view in views:
            problems = view_problems(view, admitted) + capacity_problems(view, flavor, quota)
            problems += queued_problems(view, kueue, cluster_queue, flavor)
            for problem in problems:
                found[(view.resource, f"{shape}: {problem}")] = None
    return list(found)

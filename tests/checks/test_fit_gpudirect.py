"""GKE GPUDirect's installers on the fit proof's nodes: the proof reads the declared DaemonSets as
the scheduler places them (tolerations, node affinity on GKE's pool label, init container
requests), and the renderer sizes the trainer for the same list."""

from __future__ import annotations

from helpers import REPO

from components import node_resources
from components.checks.declared import Resource
from components.checks.fit.cluster import DAEMON_SET, LIMIT_RANGE, Cluster, pod_requests
from components.checks.fit.shapes import Taint
from components.facts.gpudirect import TCPX
from components.gcp import gpudirect as gke_objects
from components.node_resources import Requests
from components.pools import NODE_POOL_LABEL, derive_pools, fabric_pools
from infra import stackfile

GPU_TAINT = [Taint("nvidia.com/gpu", "present", "NoSchedule")]


def cluster() -> Cluster:
    pools = fabric_pools(stackfile.read("prod-gcp", REPO).spec())
    return Cluster([Resource(DAEMON_SET, o["metadata"]["name"], o) for o in gke_objects.daemon_sets(pools)])


def test_an_installer_pod_reserves_its_init_container_s_request() -> None:
    pod = gke_objects.installer(TCPX, ["h100-train"])["spec"]["template"]["spec"]
    assert pod_requests(pod) == Requests(150, 0)


def test_the_tcpx_pool_s_nodes_run_its_installer_and_the_device_injector_only() -> None:
    running = cluster().daemonsets({NODE_POOL_LABEL: "h100-train"}, GPU_TAINT, None)
    assert running == {"nccl-tcpx-installer": Requests(150, 0), "device-injector": Requests(150, 0)}


def test_other_pools_run_none_of_them() -> None:
    assert cluster().daemonsets({NODE_POOL_LABEL: "l4-eval"}, GPU_TAINT, None) == {}


def test_the_renderer_leaves_room_for_the_same_daemon_sets() -> None:
    spec = stackfile.read("prod-gcp", REPO).spec()
    by_name = {p.name: p for p in derive_pools(spec)}
    spec_pools = {p.name: p for p in spec.node_pools}
    names = {pool: node_resources.gpu_node_daemonsets(spec, by_name[pool], spec_pools[pool]) for pool in by_name}
    assert {"nccl-tcpx-installer", "device-injector"} <= set(names["h100-train"])
    assert "nccl-rdma-installer" in names["h200-train"] and "device-injector" not in names["h200-train"]
    assert not {"nccl-tcpx-installer", "nccl-rdma-installer", "device-injector"} & set(names["l4-eval"])


def test_a_native_sidecar_adds_to_the_pod_s_requests_and_a_regular_init_container_only_peaks() -> None:
    def container(cpu: str, **extra: str) -> dict[str, object]:
        return {"name": cpu, "resources": {"requests": {"cpu": cpu, "memory": "1Mi"}}, **extra}

    pod = {"initContainers": [container("300m", restartPolicy="Always")], "containers": [container("1000m")]}
    assert pod_requests(pod) == Requests(1300, 2)
    pod["initContainers"].append(container("1200m"))  # runs after the sidecar started, beside it
    assert pod_requests(pod) == Requests(1500, 2)


def test_containers_stating_no_requests_get_the_limit_range_default_and_limits_stand_for_requests() -> None:
    limit_range = {"metadata": {"namespace": "team-a"},
                   "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "500m", "memory": "1Gi"}}]}}
    defaults = Cluster([Resource(LIMIT_RANGE, "defaults", limit_range)]).default_requests["team-a"]
    pod = {"initContainers": [{"name": "daemon", "restartPolicy": "Always"}],
           "containers": [{"name": "trainer", "resources": {"limits": {"cpu": "2", "memory": "2Gi"}}}]}
    assert pod_requests(pod, defaults) == Requests(2500, 3072)

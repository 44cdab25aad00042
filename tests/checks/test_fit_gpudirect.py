"""GKE GPUDirect's installers on the fit proof's nodes: the proof reads the declared DaemonSets as
the scheduler places them (tolerations, node affinity on GKE's pool label, init container
requests), and the renderer sizes the trainer for the same list."""

from __future__ import annotations

from helpers import REPO

from components import node_resources
from components.checks.declared import Resource
from components.checks.fit.cluster import DAEMON_SET, Cluster, pod_requests
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

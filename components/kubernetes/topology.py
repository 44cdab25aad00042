"""Kueue Topology-Aware Scheduling for multi-node pools: one `Topology` per cluster with the
levels its cloud labels nodes with (components.facts.topology), named by the ResourceFlavors of
the pools where Kueue can place by it.

TAS computes a job's placement from the free capacity of nodes that exist and are Ready; it
works with the autoscaler only through the ProvisioningRequest admission check, which has
nodes made first and places the job on them afterwards (Kueue v0.19.2 TAS docs, "Capacity
calculation" and "ClusterAutoscaler support"). A pool that scales from zero without that check
would leave a TAS job unadmitted forever: nothing ever creates the pods that would make the
autoscaler add nodes, and a job larger than the standing nodes would wait the same way. So a
flavor names the Topology only where the pool's nodes come through a ProvisioningRequest (GKE
queued provisioning) or all of them stand ready (minNodes = maxNodes).

Kueue makes a ResourceFlavor's nodeLabels, tolerations and topologyName immutable once
topologyName is set (kueue@v0.19.2 apis/kueue/v1beta2/resourceflavor_types.go, the
XValidation rules on ResourceFlavorSpec), and its finalizer holds a flavor while a ClusterQueue
names it. So a TAS flavor has its own name (`<pool>-tas`): a pool that starts or stops placing
by the Topology (e.g. queued provisioning -> a reservation) gets a new flavor, the ClusterQueues
move to it, and the old one is deleted once nothing names it, instead of an update Kueue's
webhook refuses or a delete that waits on the finalizer.
"""

from __future__ import annotations

from typing import Any

from components.facts import topology as facts
from components.pools import Pool
from components.spec import PlatformSpec

TOPOLOGY_NAME = "gpu-fabric"
# Pod template annotations Kueue reads per PodSet (kueue@v0.19.2 apis/kueue/v1beta2/topology_types.go).
REQUIRED_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
TAS_FLAVOR_SUFFIX = "-tas"


def multi_node_fabric(pool: Pool) -> bool:
    """A pool whose jobs can span nodes over a fast interconnect."""
    shape = pool.instance_type
    return shape is not None and shape.fast_interconnect and pool.max_nodes >= 2


def placeable(pool: Pool) -> bool:
    """Kueue TAS can place every job of this pool: all nodes stand ready, or come by ProvisioningRequest."""
    return multi_node_fabric(pool) and (pool.provisioning == "queued" or pool.min_nodes >= pool.max_nodes)


def topology_spec(spec: PlatformSpec) -> dict[str, Any] | None:
    """The cluster's Topology, or None where no pool spans nodes over a fabric."""
    if spec.cloud not in facts.LEVELS:
        return None
    return {"levels": [{"nodeLabel": label} for label in facts.LEVELS[spec.cloud]]}


def needs_topology(spec: PlatformSpec, pools: list[Pool]) -> bool:
    return topology_spec(spec) is not None and any(multi_node_fabric(p) for p in pools)


def flavor_topology(spec: PlatformSpec, pool: Pool) -> dict[str, str]:
    """The ResourceFlavor fields that make `pool` a TAS flavor (spec.topologyName), or none."""
    if topology_spec(spec) is None or not placeable(pool):
        return {}
    return {"topologyName": TOPOLOGY_NAME}


def flavor_name(spec: PlatformSpec, pool: Pool) -> str:
    """The ResourceFlavor's name: the pool's, with `-tas` where the flavor names the Topology."""
    return pool.name + TAS_FLAVOR_SUFFIX if flavor_topology(spec, pool) else pool.name

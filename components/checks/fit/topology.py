"""Kueue Topology-Aware Scheduling as the fit proof reads it: a flavor naming a Topology places
jobs only on Ready nodes that carry every level's label (kueue@v0.19.2 TAS docs, "Node topology
information" and "Capacity calculation").

- The Topology the flavor names must be declared.
- The pool's nodes must carry each level's label: kubernetes.io/hostname always; the cloud's
  levels only on the shapes the cloud labels (components.facts.topology), or the pool's own
  declared labels.
- Nodes Kueue has not seen cannot be counted: unless the flavor's admission checks ask for a
  ProvisioningRequest (then Kueue places the job after the nodes exist, "ClusterAutoscaler
  support"), a job needing more nodes than stand ready in the pool is never admitted, and the
  autoscaler, which reacts to pending pods, never adds the nodes.
"""

from __future__ import annotations

from typing import Sequence

from components.checks.declared import KUEUE_TYPE_PREFIX, Resource, get, items
from components.checks.fit.kueue import Kueue
from components.facts import topology as facts
from components.pools import Pool


def declared_levels(resources: Sequence[Resource]) -> dict[str, list[str]]:
    """Each declared Topology's node labels, broadest first."""
    return {
        str(get(r.props, "metadata", "name")): [str(get(level, "nodeLabel")) for level in items(get(r.props, "spec", "levels"))]
        for r in resources
        if r.type == f"{KUEUE_TYPE_PREFIX}Topology"
    }


def topology_problems(resources: Sequence[Resource], kueue: Kueue, pool: Pool, flavor: str, cluster_queue: str,
                      nodes: int) -> list[str]:
    name = get(kueue.flavors.get(flavor, {}), "topologyName")
    if not isinstance(name, str):
        return []
    levels = declared_levels(resources).get(name)
    if levels is None:
        return [f"flavor {flavor} names Topology {name}, which is not declared: Kueue would admit nothing there"]
    problems = []
    shape = pool.instance_type
    labelled = set(facts.LEVELS.get(shape.cloud, ())) if shape and shape.name in facts.LABELLED_TYPES.get(shape.cloud, ()) else set()
    labelled |= {facts.HOSTNAME, *pool.node_selector, *pool.selector}
    missing = [level for level in levels if level not in labelled]
    if missing:
        problems.append(
            f"flavor {flavor} places by Topology {name}, but nodes of pool {pool.name} "
            f"({shape.name if shape else 'existing'}) carry no {', '.join(missing)} label: Kueue finds no domain for them"
        )
    if not kueue.provisioning_classes(cluster_queue, flavor) and nodes > pool.min_nodes:
        problems.append(
            f"flavor {flavor} places by Topology {name}, which counts only Ready nodes, and admits without a "
            f"ProvisioningRequest check: a job of {nodes} node(s) on pool {pool.name} ({pool.min_nodes} standing) "
            "would never be admitted, so no pod would ever make the autoscaler add nodes"
        )
    return problems

"""Capacity rules: a pool asks for its nodes in a way its machine is sold by, and only in
combinations that can work (components.facts.capacity holds the table and its sources)."""

from __future__ import annotations

from components.facts import capacity, catalog
from components.spec.models import NodePoolSpec, PlatformSpec
from components.spec.problems import ROOT, Problem

# Ways whose nodes cannot be held standing: a Capacity Block's instances run only inside its
# window (EKS "Create a managed node group with Capacity Blocks for ML": create it with desired
# size 0), flex-start nodes at most 7 days, and queued node pools start empty (cluster-toolkit
# gke-node-pool: "autoscaling_total_min_nodes should be 0 when enable_queued_provisioning").
_NO_STANDING_NODES: tuple[capacity.Way, ...] = ("capacity-block", "flex-start", "queued")


def capacity_problems(spec: PlatformSpec) -> list[Problem]:
    problems: list[Problem] = []
    for i, pool in enumerate(spec.node_pools):
        at = f"{ROOT}.nodePools[{i}]"
        if spec.cloud == "existing":
            problems += [
                Problem(f"{at}.{key}", "existing nodes are already there: leave it unset")
                for field, key in (("provisioning", "provisioning"), ("reservation", "reservation"))
                if field in pool.model_fields_set
            ]
            continue
        problems += _pool_problems(spec, pool, at)
    return problems


def _pool_problems(spec: PlatformSpec, pool: NodePoolSpec, at: str) -> list[Problem]:
    problems: list[Problem] = []
    if "capacity" in pool.model_fields_set and pool.provisioning is not None:
        problems.append(
            Problem(f"{at}.capacity", "the older spelling of provisioning (on-demand or spot): keep only provisioning")
        )
    way = pool.way
    shape = catalog.INSTANCE_TYPES.get(pool.instance_type or "")
    offered = capacity.ways(shape.name, shape.cloud) if shape is not None and shape.cloud == spec.cloud else ()
    if offered and way not in offered:
        problems.append(Problem(f"{at}.{_asked_by(pool)}", _not_offered(pool, way, offered)))
    if way in capacity.RESERVED and pool.reservation is None:
        problems.append(Problem(f"{at}.reservation", f"required with provisioning: {way}: the reservation the nodes consume"))
    elif way == "spot" and pool.reservation is not None:
        problems.append(
            Problem(
                f"{at}.reservation",
                "spot capacity cannot consume a specific reservation (GKE refuses Spot VMs that target one, "
                "cluster-toolkit gke-node-pool; EC2 never runs Spot Instances in a Capacity Reservation): "
                "drop the reservation or set provisioning: reservation",
            )
        )
    elif way not in capacity.RESERVED and pool.reservation is not None:
        reserved = " or ".join(w for w in capacity.RESERVED if w in (offered or capacity.RESERVED))
        problems.append(
            Problem(f"{at}.reservation", f"only with provisioning: {reserved}; provisioning {way} consumes no reservation")
        )
    if way in _NO_STANDING_NODES and pool.min_nodes > 0:
        problems.append(
            Problem(
                f"{at}.minNodes",
                f"provisioning {way} gets nodes only on request ({capacity.DESCRIPTIONS[way]}): no node can be "
                f"held standing, set minNodes: 0, got {pool.min_nodes}",
            )
        )
    return problems


def _asked_by(pool: NodePoolSpec) -> str:
    """The key that chose the pool's way, for the problem's path."""
    if pool.provisioning is not None:
        return "provisioning"
    if "capacity" in pool.model_fields_set:
        return "capacity"
    return "reservation" if pool.reservation is not None else "provisioning"


def _not_offered(pool: NodePoolSpec, way: capacity.Way, offered: tuple[capacity.Way, ...]) -> str:
    default = " (the default)" if pool.provisioning is None and _asked_by(pool) == "provisioning" else ""
    return (
        f"pool {pool.name!r}: {pool.instance_type} is not sold as {way}{default}; "
        f"ways that work: {', '.join(offered)} (set provisioning)"
    )

"""How GPU capacity can be had, per instance family and cloud: the consumption options as data.

A pool names one way (its `provisioning`); the spec refuses a way its machine is not sold by,
and lists the ways that work. Each row names where the fact comes from (late 2026). Whether a
zone has capacity at a given hour is another matter: the AWS wing looks zones up at deploy
time (components.aws.plan.pool_zones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from components.facts.catalog import Cloud

Way = Literal["on-demand", "spot", "reservation", "capacity-block", "flex-start", "queued"]
WAYS: tuple[Way, ...] = ("on-demand", "spot", "reservation", "capacity-block", "flex-start", "queued")

# Ways whose nodes exist only while a request is granted (GKE's Dynamic Workload Scheduler):
# their capacity is obtainable on request, not standing.
ON_REQUEST: tuple[Way, ...] = ("flex-start", "queued")
# Ways that consume a named reservation (`reservation:` of the pool).
RESERVED: tuple[Way, ...] = ("reservation", "capacity-block")

# What each way means, for messages and docs.
DESCRIPTIONS: dict[Way, str] = {
    "on-demand": "on-demand capacity, when the zone has it",
    "spot": "spare capacity at a discount, reclaimed at any time",
    "reservation": "a capacity reservation the pool consumes (GCP: a Compute Engine reservation; AWS: an On-Demand Capacity Reservation)",
    "capacity-block": "an EC2 Capacity Block for ML: reserved instances for a fixed window",
    "flex-start": "GKE flex-start (Dynamic Workload Scheduler): nodes when capacity frees up, for at most 7 days",
    "queued": "GKE flex-start with queued provisioning: all nodes of a job at once, through Kueue",
}


@dataclass(frozen=True)
class Offer:
    """The ways instance types whose names start with `prefix` can be had on `cloud`."""

    cloud: Cloud
    prefix: str
    ways: tuple[Way, ...]


# EC2 purchasing options (EC2 User Guide, "Instance purchasing options"): On-Demand, Spot and
# On-Demand Capacity Reservations apply to every instance type. EC2 Capacity Blocks for ML reserve
# p6-b200, p5, p5e, p5en, p4d, p4de (and Trainium) instances only (EC2 User Guide, "How Capacity
# Blocks work"; "Work with Capacity Blocks", supported instance types and Regions).
_EC2: tuple[Way, ...] = ("on-demand", "spot", "reservation")
_EC2_BLOCKS: tuple[Way, ...] = (*_EC2, "capacity-block")
_AWS_OFFERS = tuple(
    Offer("aws", prefix, ways)
    for prefix, ways in (
        ("g4dn.", _EC2),
        ("g5.", _EC2),
        ("g6.", _EC2),
        ("g6e.", _EC2),
        ("p4d.", _EC2_BLOCKS),
        ("p4de.", _EC2_BLOCKS),
        ("p5.", _EC2_BLOCKS),
        ("p5e.", _EC2_BLOCKS),
        ("p5en.", _EC2_BLOCKS),
        ("p6-b200.", _EC2_BLOCKS),
    )
)

# Compute Engine. Flex-start VMs (and GKE's flex-start and queued provisioning on them) serve every
# accelerator-optimized machine type except A4X and G4 (Compute Engine "About Flex-start VMs");
# N1 with attached T4s is not accelerator-optimized. A3 Ultra and A4 are sold only through
# reservations (AI Hypercomputer future reservations, calendar mode), flex-start and Spot, not
# on-demand (AI Hypercomputer "Consumption options"; Cluster Director "Choose a consumption
# option"); cluster-toolkit's A3 Ultra GKE blueprint consumes a specific reservation. A3 Mega
# likewise lists no on-demand option there. a3-highgpu-1g, -2g and -4g are created only as Spot or
# Flex-start VMs (Compute Engine "GPU machine types", A3 High); a3-highgpu-8g and the A2 and G2
# types take every provisioning model.
_GCE_ALL: tuple[Way, ...] = ("on-demand", "spot", "reservation", "flex-start", "queued")
_GCE_NO_ON_DEMAND: tuple[Way, ...] = ("spot", "reservation", "flex-start", "queued")
_GCE_SPOT_OR_FLEX: tuple[Way, ...] = ("spot", "flex-start", "queued")
_GCE_NOT_ACCELERATOR_OPTIMIZED: tuple[Way, ...] = ("on-demand", "spot", "reservation")
_GCP_OFFERS = tuple(
    Offer("gcp", prefix, ways)
    for prefix, ways in (
        ("g2-", _GCE_ALL),
        ("a2-", _GCE_ALL),
        ("a3-highgpu-8g", _GCE_ALL),
        ("a3-highgpu-", _GCE_SPOT_OR_FLEX),
        ("a3-megagpu-", _GCE_NO_ON_DEMAND),
        ("a3-ultragpu-", _GCE_NO_ON_DEMAND),
        ("a4-highgpu-", _GCE_NO_ON_DEMAND),
        ("n1-", _GCE_NOT_ACCELERATOR_OPTIMIZED),
    )
)

OFFERS: tuple[Offer, ...] = (*_AWS_OFFERS, *_GCP_OFFERS)


def ways(instance_type: str, cloud: Cloud) -> tuple[Way, ...]:
    """The ways `instance_type` can be had on `cloud`: the longest matching prefix decides, so
    `a3-highgpu-8g` is told apart from the smaller A3 High types. Empty when unknown."""
    matches = [o for o in OFFERS if o.cloud == cloud and instance_type.startswith(o.prefix)]
    if not matches:
        return ()
    return max(matches, key=lambda o: len(o.prefix)).ways

"""The shape of a CPU instance or machine type name, for the system nodes (the GPU pools are
checked against the catalog instead, components.facts.catalog).

No offline table lists every type a cloud sells (they change monthly), so the system node types
are checked against each cloud's documented naming grammar: a typo or a shell fragment is
refused at spec time, and a well-formed name the cloud does not sell fails at deploy time.
"""

from __future__ import annotations

import re

from components.facts.catalog import INSTANCE_TYPES, Cloud

# AWS: `<family>.<size>`, the family a series, a generation digit and options (m6i, c7gn, u-6tb1),
# the size nano ... 48xlarge, metal or metal-24xl (docs.aws.amazon.com/ec2/latest/instancetypes/
# instance-type-names.html, "Amazon EC2 instance type naming conventions").
AWS_INSTANCE_TYPE = re.compile(
    r"[a-z][a-z0-9-]*[0-9][a-z0-9-]*\.(?:nano|micro|small|medium|large|xlarge|[0-9]+xlarge|metal(?:-[0-9]+xl)?)\Z"
)
# GCP: `<series>-<type>-<vCPUs>[-<suffix>]` (n2-standard-8, c3-standard-4-lssd), the shared-core
# e2-micro, e2-small, e2-medium, f1-micro, g1-small, and custom types `<series>-custom-<vCPUs>-<MiB>`
# (cloud.google.com/compute/docs/machine-resource, "Machine families resource and comparison
# guide"; .../instances/creating-instance-with-custom-machine-type).
GCP_MACHINE_TYPE = re.compile(
    r"(?:[a-z][a-z0-9]*[0-9][a-z0-9]*-(?:micro|small|medium|[a-z]+-[0-9]+[a-z]*(?:-[a-z0-9]+)*)"
    r"|(?:[a-z][a-z0-9]*-)?custom-[0-9]+-[0-9]+(?:-ext)?)\Z"
)

_SHAPES: dict[Cloud, tuple[re.Pattern[str], str]] = {
    "aws": (AWS_INSTANCE_TYPE, "an EC2 instance type like m6i.large (<family>.<size>)"),
    "gcp": (GCP_MACHINE_TYPE, "a Compute Engine machine type like e2-standard-4 (<series>-<type>-<vCPUs>)"),
}


def system_node_type_problem(cloud: Cloud, name: str) -> str | None:
    """Why `name` cannot be the system nodes' type on `cloud`, or None."""
    pattern, expected = _SHAPES[cloud]
    if not pattern.match(name):
        return f"expected {expected}, got {name!r}"
    known = INSTANCE_TYPES.get(name)
    # One GPU count: the GPUs are built into the shape (g6.xlarge, a3-highgpu-8g); N1 types
    # only carry GPUs attached to them, and serve as plain CPU nodes without.
    if known is not None and known.cloud == cloud and len(known.gpu_counts) == 1:
        return f"{name!r} is a GPU type; the system nodes run cluster services and stay off GPUs"
    return None

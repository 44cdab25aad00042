"""Which clusters can pull from a cloud's private registry without credentials of their own.

EKS nodes pull from ECR with their node role (`AmazonEC2ContainerRegistryReadOnly`, EKS user guide
"Amazon EKS node IAM role"); GKE nodes pull from Artifact Registry with their node service account
(GKE docs, "Pulling images from Artifact Registry"). Neither reaches the other cloud's private
registry without pull secrets the platform does not manage, so an image there runs only on that
cloud's workers. Hosts are matched as the image reference names them.
"""

from __future__ import annotations

import re
from typing import Final

from components.facts.catalog import Cloud

# Host patterns of each cloud's private registries (ECR private: <account>.dkr.ecr.<region>.
# amazonaws.com; Artifact Registry: <location>-docker.pkg.dev; Container Registry: *gcr.io).
PRIVATE_REGISTRIES: Final[dict[Cloud, tuple[re.Pattern[str], ...]]] = {
    "aws": (re.compile(r"^[0-9]{12}\.dkr\.ecr(-fips)?\.[a-z0-9-]+\.amazonaws\.com(\.cn)?\Z"),),
    "gcp": (re.compile(r"^[a-z0-9-]+-docker\.pkg\.dev\Z"), re.compile(r"^([a-z]+\.)?gcr\.io\Z")),
}


def registry_host(image: str) -> str:
    """The registry host of an image reference (`docker.io` for a bare name, as Docker reads it)."""
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def private_to(image: str) -> Cloud | None:
    """The cloud whose private registry holds the image, or None for any other registry."""
    host = registry_host(image)
    for cloud, patterns in PRIVATE_REGISTRIES.items():
        if any(p.match(host) for p in patterns):
            return cloud
    return None

"""Helpers the tests share: the repository, the upstream reference data, stack configs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from infra import stackfile

REPO = Path(__file__).resolve().parents[1]
# Facts read from the pinned upstream releases (chart keys and defaults, CRD schemas), carried
# with the project so that every clone runs every test; tests/data/README.md names each source.
REFERENCE = REPO / "tests" / "data"


def stack_config(stack: str) -> dict[str, Any]:
    """A deep copy of a checked-in stack's config, to vary in a test."""
    return copy.deepcopy(stackfile.read(stack, REPO).config)


def platform_of(stack: str) -> dict[str, Any]:
    return stack_config(stack)["gpu-platform:platform"]


def prod_aws_karpenter_config() -> dict[str, Any]:
    """prod-aws with `aws.provisioner: karpenter`: its EFA pools stay node groups, l4-eval becomes a
    NodePool (from zero: Karpenter keeps no idle nodes), and a reserved L40S pool is added."""
    config = stack_config("prod-aws")
    platform = config["gpu-platform:platform"]
    platform["aws"] = {"provisioner": "karpenter", "zones": ["us-east-1a", "us-east-1b", "us-east-1c"]}
    next(p for p in platform["nodePools"] if p["name"] == "l4-eval")["minNodes"] = 0
    platform["nodePools"].append(
        {
            "name": "l40s-reserved",
            "instanceType": "g6e.12xlarge",
            "maxNodes": 2,
            "provisioning": "reservation",
            "reservation": "cr-0123456789abcdef0",
            "zones": ["us-east-1a"],
        }
    )
    platform["scheduling"]["teams"][1]["quotas"]["l40s-reserved"] = 8
    return config


# A stack file of tiny_checkout.
TINY_STACK = "stacks/Pulumi.a.yaml"


def tiny_checkout(root: Path) -> Path:
    """The smallest tree the synthesis cache keys (infra.tools.synth_cache.INPUTS and a stack
    file): what the cache tests change one file of."""
    for rel, text in {
        "Pulumi.yaml": "name: gpu-platform\n",
        "components/spec.py": "LIMIT = 1\n",
        "infra/program.py": "def main(): ...\n",
        "training_images/Dockerfile": "FROM scratch\n",
        TINY_STACK: "config: {}\n",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root

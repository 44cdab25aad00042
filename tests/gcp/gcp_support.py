"""Support for the GCP wing's tests: stack specs to vary and synthesized variants."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from components.spec import PlatformSpec, Problem, SpecError, parse_spec
from infra import program, stackfile, synth

REPO = Path(__file__).resolve().parents[2]
REGION = "us-central1"
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"


def platform(stack: str = "dev-gcp") -> dict[str, Any]:
    """A checked-in stack's platform section, to vary in a test."""
    return copy.deepcopy(stackfile.read(stack, REPO).config["gpu-platform:platform"])


def spec_of(raw: dict[str, Any], region: str | None = REGION) -> PlatformSpec:
    return parse_spec(raw, "stacks/Pulumi.test.yaml", region)


def problems_of(raw: dict[str, Any], region: str | None = REGION) -> list[Problem]:
    """Every problem parse_spec reports for `raw` (none: an empty list)."""
    try:
        spec_of(raw, region)
    except SpecError as exc:
        return exc.problems
    return []


def messages_at(raw: dict[str, Any], path: str, region: str | None = REGION) -> list[str]:
    return [p.message for p in problems_of(raw, region) if p.path == path]


def synthesize(raw: dict[str, Any], stack: str = "dev-gcp") -> synth.Synthesis:
    """Run the real program on `raw` with `stack`'s provider config (resolved values)."""
    config = {**stackfile.read(stack, REPO).config, "gpu-platform:platform": raw}
    pulumi_config = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    return synth.run(program.main, stackfile.project_name(REPO), stack, pulumi_config)


def node_pool(synthesis: synth.Synthesis, pool: str) -> dict[str, Any]:
    """The GKE node pool of spec pool `pool` (resource `<cluster>-<pool>`), as recorded."""
    [found] = [r for r in synthesis.by_type(NODE_POOL) if r["inputs"]["name"] == pool]
    return found


def accelerator(synthesis: synth.Synthesis, pool: str) -> dict[str, Any]:
    [guest] = node_pool(synthesis, pool)["inputs"]["nodeConfig"]["guestAccelerators"]
    return guest


def cluster(synthesis: synth.Synthesis) -> dict[str, Any]:
    [found] = synthesis.by_type(CLUSTER)
    return found

"""The Pulumi program, top to bottom: spec, platform for the spec's cloud, outputs."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.gcp import GcpPlatform
from components.pools import Pool, derive_pools
from components.spec import CONFIG_KEY, CONFIG_NAMESPACE, PlatformSpec, SpecError, parse_spec, region_namespace


def main() -> None:
    spec = load_spec()
    for name, value in build_platform(spec).items():
        pulumi.export(name, value)


def load_spec() -> PlatformSpec:
    """The stack's spec; an invalid one stops the program before any resource is declared."""
    source = f"stacks/Pulumi.{pulumi.get_stack()}.yaml"
    raw = pulumi.Config(CONFIG_NAMESPACE).get_object(CONFIG_KEY)
    namespace = region_namespace(raw)
    region = pulumi.Config(namespace).get("region") if namespace else None
    try:
        return parse_spec(raw, source, region)
    except SpecError as exc:
        # RunError ends the program with the message alone, no traceback.
        raise pulumi.RunError(str(exc)) from None


def build_platform(spec: PlatformSpec) -> dict[str, Any]:
    pools = derive_pools(spec)
    outputs: dict[str, Any] = {
        "cloud": spec.cloud,
        "environment": spec.environment,
        "clusterName": spec.cluster.name,
        "gpuPools": {pool.name: pool_output(pool) for pool in pools},
    }
    provider: k8s.Provider | None = None
    if spec.cloud == "gcp":
        gcp_config = pulumi.Config("gcp")
        platform = GcpPlatform(
            spec.cluster.name,
            spec,
            pools,
            project=gcp_config.require("project"),
            region=gcp_config.require("region"),
        )
        provider = platform.provider
        outputs.update(platform.outputs)
    if spec.cloud == "existing":
        provider = k8s.Provider(
            f"{spec.cluster.name}-k8s",
            context=spec.cluster.context,
            enable_server_side_apply=True,
        )
    return outputs


def pool_output(pool: Pool) -> dict[str, Any]:
    """What a job author needs to target a pool: its selector, taint and GPU shape."""
    return {
        "gpuModel": pool.gpu.name,
        "gpusPerNode": pool.gpus_per_node,
        "maxNodes": pool.max_nodes,
        "nodeSelector": pool.selector,
        "taint": f"{pool.taint.key}={pool.taint.value}:{pool.taint.effect}",
        "sharing": pool.sharing_mode,
        "gpuSlotsPerNode": pool.slots_per_node,
    }

"""The Pulumi program, top to bottom: spec, platform for the spec's cloud, outputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.aws import AwsPlatform
from components.fleet.data import gcs_data_volume
from components.fleet.manager import FleetManager
from components.fleet.worker import KUBECONFIG_OUTPUT, QUEUES_OUTPUT, FleetWorker, queues_description
from components.gcp import GcpPlatform
from components.kubernetes import DataVolume, GpuLayer
from components.naming import resource_name
from components.observability.objects import RemoteWrite
from components.pools import Pool, derive_pools
from components.spec import (
    CONFIG_KEY,
    CONFIG_NAMESPACE,
    DeployTimeProblems,
    PlatformSpec,
    SpecError,
    parse_spec,
    region_namespace,
)
from components.spec.fleet import is_fleet, parse_fleet_spec
from components.trainer_image import CONTEXT_DIR, RegistryLogin, TrainerImage, context_of
from infra import stackfile

NO_TRAINER_CONTEXT = (
    f"platform.trainer.image: `build` builds {CONTEXT_DIR}/ of a gpu-platform checkout, and there is none"
    " here: run from a checkout, or set trainer.image to a pushed image"
)


class StackFileError(SpecError, pulumi.RunError):
    """A stack file problem found while the program runs: `pulumi up` prints it alone (a RunError
    ends the program without a traceback), and the offline CLI reports it as a SpecError (exit 2)."""


def main() -> None:
    """`pulumi up`: the checkout is the folder above the program (Pulumi runs it in infra/)."""
    run(context_of(stackfile.find_root(Path.cwd())))


def run(trainer_context: Path | None) -> None:
    """The program, given the trainer's build context (None outside a checkout)."""
    raw = pulumi.Config(CONFIG_NAMESPACE).get_object(CONFIG_KEY)
    if is_fleet(raw):
        run_fleet(raw)
        return
    spec = load_spec()
    try:
        outputs = build_platform(spec, trainer_context)
    except DeployTimeProblems as exc:
        raise StackFileError(stack_source(), exc.problems) from None
    for name, value in outputs.items():
        pulumi.export(name, value)


def main_fleet() -> None:
    """A manager stack's program on its own (offline synthesis runs it so)."""
    run_fleet(pulumi.Config(CONFIG_NAMESPACE).get_object(CONFIG_KEY))


def run_fleet(raw: Any) -> None:
    """A fleet manager stack (`cloud: fleet`, docs/fleet.md): Kueue and MultiKueue on an existing
    cluster, over the workers its stack file names."""
    try:
        spec = parse_fleet_spec(raw, stack_source())
    except SpecError as exc:
        raise pulumi.RunError(str(exc)) from None
    provider = k8s.Provider(f"{spec.cluster.name}-k8s", context=spec.cluster.context, enable_server_side_apply=True)
    manager = FleetManager(spec.cluster.name, spec, provider)
    pulumi.export("cloud", spec.cloud)
    pulumi.export("environment", spec.environment)
    pulumi.export("clusterName", spec.cluster.name)
    pulumi.export("workers", list(spec.fleet.workers))
    pulumi.export("dispatchOrder", manager.order)
    pulumi.export("dispatchOrderPerGpuModel", manager.per_model)


def stack_source() -> str:
    return f"stacks/Pulumi.{pulumi.get_stack()}.yaml"


def load_spec() -> PlatformSpec:
    """The stack's spec; an invalid one stops the program before any resource is declared."""
    source = stack_source()
    raw = pulumi.Config(CONFIG_NAMESPACE).get_object(CONFIG_KEY)
    namespace = region_namespace(raw)
    region = pulumi.Config(namespace).get("region") if namespace else None
    try:
        return parse_spec(raw, source, region)
    except SpecError as exc:
        # RunError ends the program with the message alone, no traceback.
        raise pulumi.RunError(str(exc)) from None


def build_platform(spec: PlatformSpec, trainer_context: Path | None = None) -> dict[str, Any]:
    pools = derive_pools(spec)
    outputs: dict[str, Any] = {
        "cloud": spec.cloud,
        "environment": spec.environment,
        "clusterName": spec.cluster.name,
        "gpuPools": {pool.name: pool_output(pool) for pool in pools},
    }
    cluster = build_cluster(spec, pools)
    outputs.update(cluster.outputs)
    # The same GPU layer on every cluster: it only needs a provider and the pool facts.
    layer = GpuLayer(
        resource_name(spec, "gpu"),
        spec=spec,
        pools=pools,
        provider=cluster.provider,
        trainer_annotations=cluster.trainer_annotations,
        dcgm_exporter=not cluster.collects_dcgm,
        data_volume=cluster.data_volume,
        remote_write=cluster.remote_write,
        opts=pulumi.ResourceOptions(depends_on=cluster.ready),
    )
    outputs.update(layer.exports)
    if spec.fleet.worker:
        # What a fleet manager reads of this stack (components.fleet.worker).
        worker = FleetWorker(
            resource_name(spec, "fleet-worker"),
            admin_kubeconfig=cluster.outputs["kubeconfig"],
            opts=pulumi.ResourceOptions(provider=cluster.provider, depends_on=[layer]),
        )
        outputs[KUBECONFIG_OUTPUT] = worker.kubeconfig
        outputs[QUEUES_OUTPUT] = queues_description(spec, pools)
    if spec.trainer.image == "build" and cluster.registry is not None:
        if trainer_context is None:
            raise pulumi.RunError(NO_TRAINER_CONTEXT)
        image = TrainerImage(
            resource_name(spec, "trainer"),
            registry=cluster.registry,
            context=trainer_context,
            efa=any(pool.efa for pool in spec.node_pools),
        )
        outputs["trainerImage"] = image.ref
    return outputs


@dataclass
class Cluster:
    """What the Kubernetes GPU layer needs of any cloud's cluster: a provider, what to wait
    for, and the stack exports the cloud adds."""

    provider: k8s.Provider
    ready: list[pulumi.Resource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    # Per team namespace: bind its `trainer` Kubernetes account to the team's cloud identity.
    trainer_annotations: dict[str, dict[str, pulumi.Input[str]]] = field(default_factory=dict)
    # The cloud runs its own DCGM collector (GKE's managed DCGM package, managed collection only).
    collects_dcgm: bool = False
    # Where `trainer.image: build` pushes; None on existing clusters.
    registry: RegistryLogin | None = None
    # The shared file system behind each team's `training-data` claim (jobs' /data); None where
    # jobs mount the bucket (GKE) or the operator provides the claim (existing clusters).
    data_volume: DataVolume | None = None
    # Where the in-cluster Prometheus remote writes (AWS with observability.prometheus: amp).
    remote_write: RemoteWrite | None = None


def build_cluster(spec: PlatformSpec, pools: list[Pool]) -> Cluster:
    """The cluster for the spec's cloud (built by its wing, or an existing one)."""
    if spec.cloud == "existing":
        provider = k8s.Provider(
            f"{spec.cluster.name}-k8s",
            context=spec.cluster.context,
            enable_server_side_apply=True,
        )
        return Cluster(provider)
    if spec.cloud == "aws":
        platform = AwsPlatform(spec.cluster.name, spec, pools, region=pulumi.Config("aws").require("region"))
        return Cluster(
            platform.provider,
            platform.ready,
            platform.outputs,
            trainer_annotations={ns: dict(a) for ns, a in platform.trainer_annotations.items()},
            registry=platform.registry,
            data_volume=platform.data_volume,
            remote_write=platform.remote_write,
        )
    gcp_config = pulumi.Config("gcp")
    platform = GcpPlatform(
        spec.cluster.name,
        spec,
        pools,
        project=gcp_config.require("project"),
        region=gcp_config.require("region"),
    )
    return Cluster(
        platform.provider,
        platform.ready,
        platform.outputs,
        trainer_annotations={ns: dict(a) for ns, a in platform.trainer_annotations.items()},
        # GKE's DCGM package feeds only managed collection; with the chart NVIDIA's exporter runs
        # (components.observability.objects.managed_components leaves the package off then).
        collects_dcgm=spec.monitoring.dcgm and spec.observability.backend(spec.cloud) == "managed",
        registry=platform.registry,
        # Fleet jobs name one claim on every worker; here it is the bucket (components.fleet.data).
        data_volume=gcs_data_volume(spec) if spec.fleet.worker else None,
    )


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

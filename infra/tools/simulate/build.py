"""The StackModel of a synthesized stack: its pools, queues, tiers, autoscaler and Kueue settings,
read from the objects as their consumers read them (infra.tools.simulate.model holds what that means).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from infra.tools.simulate import read_nodepools, read_nodes, read_queues
from infra.tools.simulate.model import PREEMPTION_S, ModelError, Overrides, StackModel
from infra.tools.simulate.objects import Objects
from infra.tools.simulate.state import MAX_ADMISSIONS_PER_JOB


def stack_model(
    stack: str, resources: Sequence[Mapping[str, Any]], outputs: Mapping[str, Any], overrides: Overrides | None = None
) -> StackModel:
    """The model of what `resources` (a synthesis's records) deploy. Raises ModelError."""
    overrides = overrides or Overrides()
    objects = Objects(resources)
    cloud = str(outputs.get("cloud", ""))
    if cloud not in ("aws", "gcp", "existing"):
        raise ModelError(f"outputs.cloud: expected aws, gcp or existing, got {cloud!r}")
    # Flavors whose nodes come from Karpenter NodePools are read by read_nodepools.
    kept, node_pools = read_nodepools.split(objects, resources)
    pools = read_nodes.pool_models(Objects(kept), outputs, cloud, overrides)
    pools += tuple(read_nodepools.pool_model(objects, flavor, p, overrides) for flavor, p in node_pools.items())
    pools = tuple(sorted(pools, key=lambda p: p.name))
    names = [p.name for p in pools]
    queues = read_queues.cluster_queues(objects, names)
    autoscaler = read_nodepools.autoscaler(objects, read_nodes.aws_autoscaler) if cloud == "aws" else read_nodes.gke_autoscaler(objects) if cloud == "gcp" else None
    kueue = read_queues.kueue_config(objects)
    parameters: dict[str, Any] = {
        "scale_up_s": {p.name: p.scale_up_s for p in pools if p.autoscaled},
        "spot_interruptions_per_node_day": {p.name: p.interruptions_per_node_day for p in pools if p.spot},
        "autoscaler": None
        if autoscaler is None
        else {
            "scale_down_unneeded_s": autoscaler.unneeded_s,
            "scale_down_delay_after_add_s": autoscaler.delay_after_add_s,
            "expendable_pods_priority_cutoff": autoscaler.expendable_below,
            "packing": "most allocated" if autoscaler.pack_most_allocated else "least allocated",
            "source": autoscaler.source,
        },
        "karpenter_node_pools": {flavor: read_nodepools.describe(p) for flavor, p in node_pools.items()},
        "admission_checks_not_simulated": {q.name: list(q.admission_checks) for q in queues if q.admission_checks},
        "kueue": {
            "pods_ready_timeout_s": kueue.pods_ready_timeout_s,
            "recovery_timeout_s": kueue.recovery_timeout_s,
            "requeue_backoff_base_s": kueue.backoff_base_s,
            "requeue_backoff_max_s": kueue.backoff_max_s,
            "requeue_timestamp": kueue.requeue_timestamp,
            "preemption_wait_s": PREEMPTION_S,
        },
        "max_admissions_per_job": MAX_ADMISSIONS_PER_JOB,
    }
    if kueue.fair_sharing is not None:
        # Only where it is on, so summary.json of every other stack stays as it was.
        parameters["kueue"]["fair_sharing"] = {
            "preemption_strategies": list(kueue.fair_sharing),
            "weights": {q.name: q.fair_weight for q in queues},
        }
    return StackModel(
        stack=stack,
        cloud=cloud,
        pools=pools,
        queues=queues,
        cohorts=read_queues.cohort_quotas(objects, queues, names),
        teams=read_queues.team_queues(objects, queues),
        tiers=read_queues.priority_tiers(objects),
        autoscaler=autoscaler,
        kueue=kueue,
        parameters=parameters,
    )

"""A cluster stack as a MultiKueue worker: the access a manager needs, and what it reads of us.

MultiKueue's manager creates Workloads and jobs in a worker through a kubeconfig (Kueue v0.19.2
docs, "Setup a MultiKueue environment"): here a ServiceAccount in Kueue's namespace with exactly
the role that page documents for the kinds we dispatch (components.facts.multikueue), its
long-lived token Secret, and a kubeconfig of the cluster's endpoint and that token, exported as
a secret stack output (`fleetKubeconfig`). `fleetQueues` describes the worker's queues for the
manager: it mirrors the namespaces and LocalQueues, sums the quotas and orders the workers by
price (components.fleet.manager).
"""

from __future__ import annotations

import base64
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.facts import charts, multikueue
from components.kubernetes.queues import local_queue_names, queue_plan
from components.kubernetes.tiers import priority_tiers
from components.pools import Pool
from components.spec import PlatformSpec

KUBECONFIG_OUTPUT = "fleetKubeconfig"
QUEUES_OUTPUT = "fleetQueues"
# The description's format, so a manager can refuse one it does not understand.
DESCRIPTION_VERSION = 1


def usd_per_gpu_hour(pool: Pool) -> float | None:
    """The catalog's reference on-demand price of one of the pool's GPUs for an hour."""
    node = pool.usd_per_node_hour
    return None if node is None else round(node / pool.gpus_per_node, 4)


def queues_description(spec: PlatformSpec, pools: list[Pool]) -> dict[str, Any]:
    """What a manager needs of this worker, as plain data (the `fleetQueues` output)."""
    plan = queue_plan(spec, pools)
    return {
        "version": DESCRIPTION_VERSION,
        "cloud": spec.cloud,
        "cluster": spec.cluster.name,
        "kueueNamespace": charts.KUEUE.namespace,
        "pools": {
            pool.name: {
                "gpuModel": pool.gpu.name,
                "gpusPerNode": pool.gpus_per_node,
                "slotsPerNode": pool.slots_per_node,
                "maxNodes": pool.max_nodes,
                "maxSlots": pool.max_slots,
                "sharing": pool.sharing_mode,
                "usdPerGpuHour": usd_per_gpu_hour(pool),
            }
            for pool in pools
        },
        "teams": {
            team.team: {
                "namespace": team.namespace,
                "clusterQueue": team.cluster_queue,
                "localQueues": local_queue_names(team),
                "quota": dict(team.nominal),
            }
            for team in plan.teams
        },
        # The manager declares the same WorkloadPriorityClasses: jobs name them in their label.
        "priorityTiers": [
            {"name": t.name, "value": t.value, "description": t.description} for t in priority_tiers(spec)
        ],
        # Capacity no team holds: any team may borrow it (components.kubernetes.queues).
        "sharedQuota": dict(plan.shared),
    }


def worker_kubeconfig(admin_kubeconfig: str, token: str) -> str:
    """The cluster's server and CA from the stack's own kubeconfig, with the worker account's token
    instead of the admin's exec credentials: what the documented script writes."""
    admin = yaml.safe_load(admin_kubeconfig)
    cluster = admin["clusters"][0]
    name = str(cluster["name"])
    user = f"{name}-{multikueue.WORKER_SERVICE_ACCOUNT}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": dict(cluster["cluster"])}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name,
    }
    return yaml.safe_dump(config, sort_keys=False)


class MissingWorkerToken(pulumi.RunError):
    """The token Secret came back without a token: a kubeconfig without one would let the manager
    connect as nobody, and MultiKueue would only report the cluster inactive."""


def _decoded(data: Any, preview: bool) -> str:
    """`data.token` of a token Secret, as the API returns it (base64). A preview has no token yet
    (the Secret is not created); after an apply an empty one is an error, not an empty kubeconfig."""
    value = (data or {}).get("token") or ""
    if value:
        return base64.b64decode(value).decode()
    if preview:
        return ""
    raise MissingWorkerToken(
        f"Secret {charts.KUEUE.namespace}/{multikueue.WORKER_TOKEN_SECRET} has no data.token: the token controller "
        "did not fill it (is the ServiceAccount there, and the kube-controller-manager's token controller on?); "
        "the fleetKubeconfig output is not written without one"
    )


class FleetWorker(pulumi.ComponentResource):
    """The manager's way in: ServiceAccount, ClusterRole, binding, token Secret, kubeconfig."""

    def __init__(
        self,
        name: str,
        admin_kubeconfig: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("gpu-platform:fleet:FleetWorker", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespace = charts.KUEUE.namespace
        account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=multikueue.WORKER_SERVICE_ACCOUNT, namespace=namespace),
            opts=child,
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-role",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=multikueue.WORKER_ROLE),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(api_groups=rule["apiGroups"], resources=rule["resources"], verbs=rule["verbs"])
                for rule in multikueue.WORKER_RULES
            ],
            opts=child,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=multikueue.WORKER_BINDING),
            role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=multikueue.WORKER_ROLE),
            subjects=[k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=multikueue.WORKER_SERVICE_ACCOUNT, namespace=namespace)],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role, account]),
        )
        # A long-lived token: the token controller fills `data.token` of a Secret of this type that
        # names the account (Kubernetes docs, "Manually create a long-lived API token for a
        # ServiceAccount"). Rotation: docs/fleet.md.
        token = k8s.core.v1.Secret(
            f"{name}-token",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=multikueue.WORKER_TOKEN_SECRET,
                namespace=namespace,
                annotations={"kubernetes.io/service-account.name": multikueue.WORKER_SERVICE_ACCOUNT},
            ),
            type="kubernetes.io/service-account-token",
            opts=pulumi.ResourceOptions(parent=self, depends_on=[account]),
        )
        self.kubeconfig: pulumi.Output[str] = pulumi.Output.secret(
            pulumi.Output.all(admin_kubeconfig, token.data).apply(
                lambda a: worker_kubeconfig(a[0], _decoded(a[1], pulumi.runtime.is_dry_run()))
            )
        )
        self.register_outputs({"kubeconfig": self.kubeconfig})

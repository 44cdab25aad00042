"""What Karpenter is given, as plain data: which pools it provisions, their EC2NodeClass and
NodePool, and the controller's Helm values. Pure functions of the spec and the pool facts, so
each decision is tested directly; components/aws/karpenter.py maps them onto resources.

Field names are the v1 CRDs' of the pinned release (aws/karpenter-provider-aws@v1.14.1
pkg/apis/crds/karpenter.sh_nodepools.yaml and karpenter.k8s.aws_ec2nodeclasses.yaml).
"""

from __future__ import annotations

from typing import Any

import pulumi

from components.aws import plan
from components.facts import karpenter as facts
from components.pools import GPU_RESOURCE, Pool
from components.spec import NodePoolSpec, PlatformSpec

# The controller's service account, which its IRSA role trusts.
SERVICE_ACCOUNT = "karpenter"
NAMESPACE = "kube-system"


def uses_karpenter(spec: PlatformSpec) -> bool:
    return spec.cloud == "aws" and spec.aws_settings.provisioner == "karpenter"


def weight(pool: Pool) -> int:
    """NodePool weight: where several NodePools could serve a pod, Karpenter takes the highest
    (karpenter.sh docs "NodePools", spec.weight): reserved before spot before on-demand, the
    priority expander's order for node groups."""
    return plan.pool_priority(pool)


def capacity_types(pool: Pool) -> list[str]:
    """karpenter.sh/capacity-type values the pool's nodes may have. A reservation or Capacity
    Block pool launches into its reservation only (`reserved`), as its node group's
    capacity-reservations-only target does."""
    if pool.reserved:
        return [facts.RESERVED]
    return [facts.SPOT] if pool.spot else [facts.ON_DEMAND]


def node_class(
    spec_pool: NodePoolSpec, pool: Pool, cluster_name: str, node_role: pulumi.Input[str], ami_alias: str | None = None
) -> dict[str, Any]:
    """The EC2NodeClass spec of a pool: AL2023 NVIDIA by alias (the spec's pin, else latest), IMDSv2 only with one hop (pods
    cannot borrow the node's role), an encrypted gp3 root volume, RAID0 over NVMe instance store,
    the pool's reservation, and subnets and security groups found by the discovery tag."""
    assert pool.instance_type is not None, "AWS pools have a catalog instance type"
    discovery = [{"tags": {facts.DISCOVERY_TAG: cluster_name}}]
    spec: dict[str, Any] = {
        "role": node_role,
        "amiSelectorTerms": [{"alias": ami_alias or facts.AMI_ALIAS[spec_pool.ami_type]}],
        "subnetSelectorTerms": discovery,
        "securityGroupSelectorTerms": discovery,
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 1,
            "httpTokens": "required",
        },
        "blockDeviceMappings": [
            {
                "deviceName": facts.ROOT_DEVICE,
                "ebs": {
                    "volumeSize": f"{spec_pool.root_volume_gib}Gi",
                    "volumeType": "gp3",
                    "iops": facts.ROOT_IOPS,
                    "throughput": facts.ROOT_THROUGHPUT_MIBS,
                    "encrypted": True,
                    "deleteOnTermination": True,
                },
            }
        ],
        "tags": {"Name": f"{cluster_name}-{pool.name}"},
    }
    if pool.instance_type.instance_store[0] > 0:
        # The catalog's instance store column, as for the node groups' nodeadm user data
        # (components.aws.user_data): RAID0 over the NVMe disks becomes the node's ephemeral storage,
        # containerd and the kubelet (pkg/apis/v1/ec2nodeclass.go InstanceStorePolicy).
        spec["instanceStorePolicy"] = "RAID0"
    if pool.reserved and spec_pool.reservation is not None:
        spec["capacityReservationSelectorTerms"] = [{"id": spec_pool.reservation}]
    return spec


def node_pool(spec_pool: NodePoolSpec, pool: Pool, node_class_name: str) -> dict[str, Any]:
    """The NodePool spec of a pool: its one instance type and capacity type, its labels and the GPU
    taint, limits of the pool's maximum nodes and GPU slots, and no disruption of a node while a pod runs there."""
    assert pool.instance_type is not None, "AWS pools have a catalog instance type"
    requirements: list[dict[str, Any]] = [
        {"key": facts.INSTANCE_TYPE_LABEL, "operator": "In", "values": [pool.instance_type.name]},
        {"key": facts.CAPACITY_TYPE_LABEL, "operator": "In", "values": capacity_types(pool)},
    ]
    if spec_pool.zones:
        requirements.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(spec_pool.zones)})
    taint = pool.taint
    return {
        "weight": weight(pool),
        # Karpenter counts a node's resources against limits from its NodeClaim (the instance
        # type's physical GPUs) while it launches, then from the node's own status once initialized
        # (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/state/statenode.go Capacity): a
        # time-sliced node then counts its device plugin's slots. `nodes` is the exact bound across
        # scheduling passes; the GPU limit in slots bounds one pass, in which the scheduler
        # subtracts each new NodeClaim's instance-type capacity, which carries no `nodes`
        # (scheduling/scheduler.go subtractMax).
        "limits": {facts.NODES_LIMIT: str(pool.max_nodes), GPU_RESOURCE: str(pool.max_slots)},
        "disruption": {
            # Only empty nodes go: utilization consolidation would evict training pods.
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": facts.CONSOLIDATE_AFTER,
            "budgets": [{"nodes": facts.DISRUPTION_BUDGET_NODES}],
        },
        "template": {
            "metadata": {"labels": plan.node_labels(pool, spec_pool)},
            "spec": {
                "nodeClassRef": {"group": facts.NODE_CLASS_GROUP, "kind": "EC2NodeClass", "name": node_class_name},
                "requirements": requirements,
                "taints": [{"key": taint.key, "value": taint.value, "effect": taint.effect}],
                "expireAfter": facts.EXPIRE_AFTER,
            },
        },
    }


def controller_values(cluster_name: str, queue_name: pulumi.Input[str], role_arn: pulumi.Input[str]) -> dict[str, Any]:
    """Helm values of the karpenter chart (keys per tests/data/charts/karpenter-1.14.1.keys.json):
    the cluster and its interruption queue, the IRSA role, on the system node group. The chart's
    own affinity keeps it off nodes it provisions (karpenter.sh/nodepool DoesNotExist) and spreads
    its two replicas over hosts."""
    return {
        "settings": {"clusterName": cluster_name, "interruptionQueue": queue_name},
        "serviceAccount": {"name": SERVICE_ACCOUNT, "annotations": {"eks.amazonaws.com/role-arn": role_arn}},
        "nodeSelector": {plan.SYSTEM_ROLE_LABEL: plan.SYSTEM_ROLE},
        # Requests as the getting-started guide sets them (controller.resources 1 CPU, 1Gi).
        "controller": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi"}}},
    }

"""Karpenter facts: API names, labels, tags, event rules and the overhead model of the pinned
release (charts.KARPENTER, aws/karpenter-provider-aws v1.14.1), each with the source it is read from.

v1.14.1 supports Kubernetes 1.30 to 1.36 (website/content/en/v1.14/upgrading/compatibility.md,
compatibility matrix), which covers every version in catalog.SUPPORTED_KUBERNETES_VERSIONS.
"""

from __future__ import annotations

from typing import Any

from components.facts import aws as aws_facts
from components.facts.aws import AmiType

# The CRDs the karpenter chart installs (pkg/apis/crds at v1.14.1), served and stored at v1.
NODE_POOL_API = "karpenter.sh/v1"
NODE_CLASS_API = "karpenter.k8s.aws/v1"
NODE_CLASS_GROUP = "karpenter.k8s.aws"

# Managed policies Karpenter's node role holds beyond a node group's (aws_facts.NODE_ROLE_POLICIES):
# SSM Session Manager reaches its nodes, which have no SSH key (website/content/en/v1.14/
# getting-started/getting-started-with-karpenter/cloudformation.yaml KarpenterNodeRole
# ManagedPolicyArns; its AmazonEKS_CNI_Policy the platform gives the vpc-cni add-on's IRSA role).
NODE_ROLE_EXTRA_POLICIES = ("AmazonSSMManagedInstanceCore",)

# Well-known labels Karpenter puts on its nodes and reads in NodePool requirements
# (kubernetes-sigs/karpenter pkg/apis/v1/labels.go; aws/karpenter-provider-aws pkg/apis/v1/labels.go).
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
NODE_POOL_LABEL = "karpenter.sh/nodepool"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
INSTANCE_FAMILY_LABEL = "karpenter.k8s.aws/instance-family"
# The NodePool limit on its node count (kubernetes-sigs/karpenter@v1.14.1 pkg/utils/resources
# resources.go `Node`). Every node counts 1 (pkg/controllers/state/statenode.go Capacity), and the
# scheduler refuses a new NodeClaim once none remain (pkg/controllers/provisioning/scheduling/
# scheduler.go addToNewNodeClaim, "node limits have been exhausted").
NODES_LIMIT = "nodes"
# Capacity types Karpenter launches (karpenter.sh/capacity-type values).
ON_DEMAND = "on-demand"
SPOT = "spot"
RESERVED = "reserved"

# A pod with this annotation is never voluntarily disrupted: no consolidation, drift or
# expiration takes its node while it runs (kubernetes-sigs/karpenter pkg/apis/v1/labels.go,
# DoNotDisruptAnnotationKey; karpenter.sh docs "Disruption", "Pod-Level Controls").
DO_NOT_DISRUPT_ANNOTATION = "karpenter.sh/do-not-disrupt"

# Subnets and security groups the EC2NodeClasses select carry this tag, valued with the cluster
# name (website getting-started-with-karpenter: "Add tags to subnets and security groups").
DISCOVERY_TAG = "karpenter.sh/discovery"

# The AMI alias of each EKS AMI type a Karpenter pool may use; the alias picks the NVIDIA variant
# for GPU instance types itself (pkg/providers/amifamily/al2023.go resolves the standard, nvidia
# and neuron variants). `latest`: the newest EKS-optimized AMI of the cluster's version, as managed
# node groups take it; a new release drifts idle nodes only, since running training pods carry
# DO_NOT_DISRUPT_ANNOTATION. Bottlerocket is left out: an EC2NodeClass's blockDeviceMappings
# replace the family's defaults, and Bottlerocket needs its OS volume and data volume both.
AMI_ALIAS: dict[AmiType, str] = {
    "AL2023_x86_64_NVIDIA": "al2023@latest",
    "AL2023_ARM_64_NVIDIA": "al2023@latest",
}
# A pinned alias names an AMI release by date (website/content/en/v1.14/concepts/nodeclasses.md,
# amiSelectorTerms alias `family@version`, version `latest` or `vYYYYMMDD`; Karpenter advises
# against `latest` in production). AL2023 only, as AMI_ALIAS.
PINNED_AMI_ALIAS_PATTERN = r"al2023@v\d{8}"
# AL2023's root volume device (pkg/providers/amifamily/al2023.go EphemeralBlockDevice).
ROOT_DEVICE = "/dev/xvda"

# gp3 root volume performance: the node groups' figures (facts.aws GP3_IOPS, GP3_THROUGHPUT_MIBS).
ROOT_IOPS = aws_facts.GP3_IOPS
ROOT_THROUGHPUT_MIBS = aws_facts.GP3_THROUGHPUT_MIBS

# The EventBridge rules whose events Karpenter reads from its interruption queue
# (website/content/en/v1.14/getting-started/getting-started-with-karpenter/cloudformation.yaml:
# ScheduledChangeRule, SpotInterruptionRule, RebalanceRule, InstanceStateChangeRule,
# CapacityReservationInterruptionRule). Name -> event pattern.
INTERRUPTION_RULES: dict[str, dict[str, Any]] = {
    "scheduled-change": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "instance-state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "capacity-reservation-interruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
    },
}
# The queue keeps a message 5 minutes: an older interruption notice is past acting on (same file,
# KarpenterInterruptionQueue MessageRetentionPeriod).
QUEUE_RETENTION_SECONDS = 300

# Karpenter's model of a node's allocatable resources before it launches one
# (pkg/providers/instancetype/types.go at v1.14.1): memory capacity less VM_MEMORY_OVERHEAD_PERCENT
# (`memory`; chart settings.vmMemoryOverheadPercent, default 0.075), kube-reserved memory of
# 11 MiB per pod + 255 MiB and the CPU tiers of `kubeReservedResources` (the same tiers as the EKS
# AMI), no system-reserved unless the EC2NodeClass sets it, and the 100Mi memory.available hard
# eviction threshold (`evictionThreshold`).
VM_MEMORY_OVERHEAD_PERCENT = 0.075
KUBE_RESERVED_MEMORY_PER_POD_MIB = 11
KUBE_RESERVED_MEMORY_BASE_MIB = 255
EVICTION_HARD_MEMORY_MIB = 100

# Scale-up and scale-down profile (kubernetes-sigs/karpenter, chart settings batchIdleDuration 1s
# and batchMaxDuration 10s: pending pods are batched for 1-10 s before a NodeClaim is created;
# karpenter.sh docs "Disruption": with consolidationPolicy WhenEmpty a node goes once it has been
# empty for `consolidateAfter`).
BATCH_IDLE_SECONDS = 1
BATCH_MAX_SECONDS = 10
# An empty GPU node stays this long, so the next job of a queue (or a restarted gang) finds it warm;
# the cluster-autoscaler's scale-down-unneeded-time of the node-group pools, for the same reason.
CONSOLIDATE_AFTER = "15m"
# At most this share of a NodePool's nodes is disrupted at once (NodePool disruption.budgets).
DISRUPTION_BUDGET_NODES = "10%"
# Nodes live until replaced for drift or emptiness: a node never expires under a training job
# (NodePool template.spec.expireAfter; the default is 720h).
EXPIRE_AFTER = "Never"

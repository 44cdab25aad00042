"""The clouds' and Kubernetes' documented limits that bound a stack's numbers.

A stack file could otherwise ask for 10**30 nodes and synthesize it: the spec rules hold every
node count, GPU count and quota under these figures, each with where it is documented.
"""

from __future__ import annotations

# Amazon EKS service quotas (EKS user guide, "Amazon EKS service quotas"): "Managed node groups
# per cluster" 30 and "Nodes per managed node group" 450, both per-account defaults that AWS
# raises on request. The stack's system node group counts against the first.
EKS_NODE_GROUPS_PER_CLUSTER = 30
EKS_NODES_PER_NODE_GROUP = 450
# EKS CreateNodegroup API, NodegroupScalingConfig.maxSize: "Valid Range: Minimum value of 1".
EKS_MIN_MAX_NODES = 1

# GKE quotas and limits page: "Nodes per node pool zone" 1,000. A node pool's total maximum
# spreads over its zones, so a pool may reach 1,000 nodes per zone it runs in.
GKE_NODES_PER_POOL_ZONE = 1_000
# GKE "Plan for large clusters": Standard clusters reach 15,000 nodes, and 65,000 from 1.31 for
# AI workloads (past 5,000 only with Cloud Customer Care raising the cluster's quota).
GKE_NODES_PER_CLUSTER = 65_000

# Kubernetes "Considerations for large clusters": no more than 5,000 nodes per cluster. Bounds the
# node count of pools on an existing cluster.
KUBERNETES_NODES_PER_CLUSTER = 5_000
# The largest NVIDIA node carries 16 GPUs (DGX-2 / HGX-2); bounds gpusPerNode of existing nodes.
MAX_GPUS_PER_NODE = 16
# kubelet's default maxPods is 110 (KubeletConfiguration), and GKE Standard's limit per node:
# a GPU time-sliced for more pods than a node can run never hands out its extra slots.
MAX_PODS_PER_NODE = 110
# CUDA MPS on Volta and newer: at most 48 client CUDA contexts per GPU (NVIDIA "Multi-Process
# Service" documentation, limitations of Volta MPS).
MAX_MPS_CLIENTS_PER_GPU = 48
# GKE shares one GPU between at most 48 pods, time-sharing and MPS alike (GKE "GPU time-sharing"
# and "multi-instance ... MPS" pages, max-shared-clients-per-gpu).
GKE_MAX_SHARED_CLIENTS_PER_GPU = 48
# Counts without a tighter documented limit (autoscaling totals, policy thresholds) are bounded
# to what a Kubernetes int32 field holds, far above any real cluster.
INT32_MAX = 2**31 - 1
# int64 fields of the Kubernetes API (terminationGracePeriodSeconds is `*int64`, k8s.io/api
# core/v1 types.go PodSpec).
INT64_MAX = 2**63 - 1

"""AWS facts the wing builds from: pinned versions, chart pins, key names and hardware details.

Each table names where its values come from. Bump a pin here, nowhere else; the tests check
that every supported Kubernetes minor has an entry in each per-minor table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# EKS managed node group AMI types with NVIDIA drivers (EKS CreateNodegroup API, amiType).
AmiType = Literal[
    "AL2023_x86_64_NVIDIA",
    "AL2023_ARM_64_NVIDIA",
    "BOTTLEROCKET_x86_64_NVIDIA",
    "BOTTLEROCKET_ARM_64_NVIDIA",
]
# Bottlerocket NVIDIA AMIs run their own NVIDIA device plugin; AL2023 NVIDIA AMIs ship none.
BOTTLEROCKET_AMI_TYPES: tuple[AmiType, ...] = ("BOTTLEROCKET_x86_64_NVIDIA", "BOTTLEROCKET_ARM_64_NVIDIA")
ARM64_AMI_TYPES: tuple[AmiType, ...] = ("AL2023_ARM_64_NVIDIA", "BOTTLEROCKET_ARM_64_NVIDIA")


# The autoscaler simulates the scheduler of its own Kubernetes minor, so its image minor must
# match the cluster's (kubernetes/autoscaler README, "Releases"). Latest patch per minor from the
# project's GitHub releases (registry.k8s.io/autoscaling/cluster-autoscaler tags), late 2026.
CLUSTER_AUTOSCALER_IMAGE_TAGS: dict[str, str] = {
    "1.31": "v1.31.2",
    "1.32": "v1.32.7",
    "1.33": "v1.33.5",
    "1.34": "v1.34.3",
    "1.35": "v1.35.0",
}

# EKS add-on versions per Kubernetes minor, from the EKS user guide's add-on version tables and
# `aws eks describe-addon-versions` (late 2026). vpc-cni and aws-ebs-csi-driver publish one
# version for every supported minor; coredns and kube-proxy follow the minor.
# aws-efs-csi-driver v3.3.0-eksbuild.1: the latest add-on build as of mid 2026 (public add-on
# bumps, e.g. zalando-incubator/kubernetes-on-aws#11666); like the EBS driver it publishes one
# build for all supported minors, but that it lists every minor here is not confirmed.
ADDON_VERSIONS: dict[str, dict[str, str]] = {
    "1.31": {
        "vpc-cni": "v1.21.1-eksbuild.3",
        "kube-proxy": "v1.31.7-eksbuild.7",
        "coredns": "v1.11.4-eksbuild.22",
        "aws-ebs-csi-driver": "v1.56.0-eksbuild.1",
        "aws-efs-csi-driver": "v3.3.0-eksbuild.1",
    },
    "1.32": {
        "vpc-cni": "v1.21.1-eksbuild.3",
        "kube-proxy": "v1.32.3-eksbuild.7",
        "coredns": "v1.11.4-eksbuild.22",
        "aws-ebs-csi-driver": "v1.56.0-eksbuild.1",
        "aws-efs-csi-driver": "v3.3.0-eksbuild.1",
    },
    "1.33": {
        "vpc-cni": "v1.21.1-eksbuild.3",
        "kube-proxy": "v1.33.3-eksbuild.6",
        "coredns": "v1.12.3-eksbuild.1",
        "aws-ebs-csi-driver": "v1.56.0-eksbuild.1",
        "aws-efs-csi-driver": "v3.3.0-eksbuild.1",
    },
    "1.34": {
        "vpc-cni": "v1.21.1-eksbuild.3",
        "kube-proxy": "v1.34.0-eksbuild.2",
        "coredns": "v1.12.3-eksbuild.1",
        "aws-ebs-csi-driver": "v1.56.0-eksbuild.1",
        "aws-efs-csi-driver": "v3.3.0-eksbuild.1",
    },
    "1.35": {
        "vpc-cni": "v1.21.1-eksbuild.3",
        "kube-proxy": "v1.35.0-eksbuild.2",
        "coredns": "v1.13.2-eksbuild.3",
        "aws-ebs-csi-driver": "v1.56.0-eksbuild.1",
        "aws-efs-csi-driver": "v3.3.0-eksbuild.1",
    },
}

# Service accounts of the add-ons that call AWS APIs (IRSA), namespace kube-system: the
# VPC CNI's `aws-node` DaemonSet and the EBS CSI controller (EKS add-on documentation). The EFS
# add-on puts its one service account role on both its controller's and its node plugin's
# accounts (EKS user guide, add-ons-aws-efs-csi-driver; aws/containers-roadmap#2820: no separate
# node role), but only the node plugin's is trusted: its identity is what every `iam` mount
# presents (components.aws.efs), and the file system policy lets that role mount every team's
# access point, so no other pod should hold it. The controller never asks for credentials here:
# it calls AWS only in CreateVolume and DeleteVolume (aws-efs-csi-driver@v3.3.0
# pkg/driver/controller.go), that is for dynamically provisioned volumes, and this platform
# provisions statically with `Retain`; the SDK resolves credentials lazily (pkg/cloud/cloud.go
# NewCloud: LoadDefaultConfig, no STS call at start), so its untrusted annotation fails nothing.
# Dynamic provisioning would need the controller trusted and AmazonEFSCSIDriverPolicy attached.
ADDON_SERVICE_ACCOUNTS: dict[str, tuple[str, ...]] = {
    "vpc-cni": ("aws-node",),
    "aws-ebs-csi-driver": ("ebs-csi-controller-sa",),
    "aws-efs-csi-driver": ("efs-csi-node-sa",),
}

# The EFS CSI driver's name in PersistentVolumes (kubernetes-sigs/aws-efs-csi-driver README).
# Static provisioning only, so the add-on's role holds no IAM policy: the AmazonEFSCSIDriverPolicy
# the EKS add-on page asks for serves the controller's dynamic provisioning of access points. The
# role exists for IAM mount authorization: the file system policy allows it, and only it, to mount
# (components.aws.efs). efs-utils (aws/efs-utils src/efs_utils_common/aws_credentials.py
# get_aws_security_credentials) takes the IRSA web identity the node plugin's container carries
# before the instance profile, so `iam` mounts present this role, not the node role. The helper
# only calls DescribeMountTargets when the mount target's DNS name does not resolve
# (kubernetes-sigs/aws-efs-csi-driver#489): the VPC needs DNS support and hostnames.
EFS_CSI_DRIVER = "efs.csi.aws.com"
# The service account of the driver's node DaemonSet (aws-efs-csi-driver@v3.3.0
# charts/aws-efs-csi-driver/values.yaml node.serviceAccount.name; the pod runs hostNetwork: true,
# templates/node-daemonset.yaml), whose role the file system policy allows.
EFS_CSI_NODE_SERVICE_ACCOUNT = "efs-csi-node-sa"
# NFSv4 (EFS user guide, "Security groups for mount targets": TCP 2049).
NFS_PORT = 2049
# What NFS clients do on EFS, read-only mount first, then write, then root (EFS user guide,
# "Using IAM to control access to file systems", client actions).
EFS_CLIENT_ACTIONS = ("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite", "elasticfilesystem:ClientRootAccess")
# The condition keys EFS evaluates for NFS clients (same page: aws:SecureTransport, aws:SourceIp,
# elasticfilesystem:AccessPointArn, elasticfilesystem:AccessedViaMountTarget; "no other condition
# keys are enforced"). A policy therefore cannot name a principal in a condition (aws:PrincipalArn
# is not evaluated): who may mount is said only by an Allow's Principal.
SECURE_TRANSPORT_KEY = "aws:SecureTransport"
EFS_ACCESS_POINT_KEY = "elasticfilesystem:AccessPointArn"
EFS_VIA_MOUNT_TARGET_KEY = "elasticfilesystem:AccessedViaMountTarget"
# The efs-utils mount option for IAM authorization ("Use the CSI Node Pod's IAM identity") and the
# driver's volume attribute that could turn TLS off, which team volumes do not set and the
# tenancy rule refuses at "false" (aws-efs-csi-driver@v3.3.0 docs/parameters.md,
# pkg/driver/node.go NodePublishVolume: encryptInTransit defaults to true).
EFS_MOUNT_OPTION_IAM = "iam"
EFS_ENCRYPT_IN_TRANSIT = "encryptInTransit"
# AWS managed policies granting the EFS client actions to whoever holds them (IAM, AWS managed
# policies AmazonElasticFileSystemClientFullAccess, ...ClientReadWriteAccess, ...ClientReadOnlyAccess).
EFS_CLIENT_MANAGED_POLICY_PREFIX = "AmazonElasticFileSystemClient"
# The VPC CNI add-on's configuration value that starts its network policy agent, so NetworkPolicy
# objects are enforced at all (EKS user guide, cni-network-policy-configure: configuration values
# `{"enableNetworkPolicy": "true"}`, VPC CNI 1.14 or later, kernel 5.10 or later).
VPC_CNI_CONFIGURATION: dict[str, str] = {"enableNetworkPolicy": "true"}

# AWS managed policies (IAM console, "AWS managed"), by name; ARNs are built per partition.
CLUSTER_ROLE_POLICIES = ("AmazonEKSClusterPolicy",)
NODE_ROLE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")
ADDON_ROLE_POLICIES: dict[str, str] = {
    "vpc-cni": "AmazonEKS_CNI_Policy",
    "aws-ebs-csi-driver": "service-role/AmazonEBSCSIDriverPolicy",
}
# EKS access policy for cluster administrators (EKS access entries documentation).
CLUSTER_ADMIN_ACCESS_POLICY = "AmazonEKSClusterAdminPolicy"

# Every control-plane log type (EKS CreateCluster API, logging.clusterLogging.types).
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")

# The device holding images and scratch: AL2023 has one root volume; Bottlerocket keeps the OS
# on /dev/xvda and containers on the data volume /dev/xvdb (Bottlerocket EKS AMI layout).
DATA_DEVICE: dict[AmiType, str] = {
    "AL2023_x86_64_NVIDIA": "/dev/xvda",
    "AL2023_ARM_64_NVIDIA": "/dev/xvda",
    "BOTTLEROCKET_x86_64_NVIDIA": "/dev/xvdb",
    "BOTTLEROCKET_ARM_64_NVIDIA": "/dev/xvdb",
}

# gp3 volume performance where a node's images and scratch live on EBS (EC2 User Guide / EBS User
# Guide, "General Purpose SSD volumes": gp3 gives 3000 IOPS and 125 MiB/s at any size, up to 16000
# IOPS and 1000 MiB/s provisioned, at most 500 IOPS per GiB and 0.25 MiB/s per provisioned IOPS).
# Pulls of 10-20 GiB images and checkpoint staging want more than the baseline.
GP3_IOPS = 6000
GP3_THROUGHPUT_MIBS = 500

# Network cards of EFA instance types with more than one (EC2 User Guide, "Network cards" and
# "Maximize network bandwidth ... with EFA"); one EFA interface per card gives full bandwidth.
# Types not listed have one card.
EFA_NETWORK_CARDS: dict[str, int] = {
    "p4d.24xlarge": 4,
    "p4de.24xlarge": 4,
    "p5.48xlarge": 32,
    "p5e.48xlarge": 32,
    "p5en.48xlarge": 16,
    "p6-b200.48xlarge": 8,
    "g6e.48xlarge": 4,
}

# EFA nodes reserve 110 huge pages of 2 MiB per vCPU plus one at boot, which libfabric's EFA
# provider uses for its bounce buffers; the kubelet advertises them as hugepages-2Mi. The EFA
# installer's reserve script (efa-config, as quoted in bottlerocket-os/bottlerocket-core-kit#141)
# counts 110 MB per libfabric endpoint, two endpoints per CPU, over the 2 MiB page size, plus one
# page; Bottlerocket reserves the same without the extra page (bottlerocket-core-kit
# sources/api/corndog/src/main.rs, HUGEPAGES_2MB_PER_CORE = 110 x num_cpus). A p5.48xlarge
# (192 vCPUs) reports hugepages-2Mi: 42242Mi = 110 x 192 + 1 pages
# (shimomut/sagemaker-solutions hyperpod_k8s/README.md, `kubectl describe node`). The EKS user guide's
# flat "5128 2MiB Huge Pages" (https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html) is
# a quarter of that on a 192-vCPU type. AL2023 installs the EFA installer with --minimal
# (awslabs/amazon-eks-ami templates/al2023/provisioners/install-efa.sh); whether that keeps the
# per-vCPU reservation no public source shows, so the larger figure is modelled on both AMI families:
# more huge pages leave less memory counted for pods, which only errs on the side of fitting.
EFA_HUGEPAGES_2MI_PER_VCPU = 110
EFA_HUGEPAGES_2MI_EXTRA = 1
HUGEPAGE_2MI_MIB = 2
# What a pod that uses EFA requests of them, request = limit, as the guide's example pods do
# (`hugepages-2Mi: 5120Mi`, 2560 pages; its prose says 5210Mi): below what the smallest EFA type
# of the catalog reserves (32 vCPUs, 3521 pages).
EFA_HUGEPAGES_REQUEST_MIB = 5120

# The autoscaler's AWS provider treats nodes carrying this label as GPU nodes (its GPULabel):
# it waits for their GPUs to register instead of judging a fresh node empty.
ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
# Node label put on EFA pools, for the EFA device plugin's nodeSelector.
EFA_LABEL = "gpu-platform.io/efa"

# Cluster-autoscaler AWS tag names (cluster-autoscaler/cloudprovider/aws/README.md).
AUTOSCALER_ENABLED_TAG = "k8s.io/cluster-autoscaler/enabled"
AUTOSCALER_CLUSTER_TAG_PREFIX = "k8s.io/cluster-autoscaler/"
NODE_TEMPLATE_PREFIX = "k8s.io/cluster-autoscaler/node-template/"

# Subnet tags load balancers look for (AWS Load Balancer Controller subnet discovery).
PUBLIC_ELB_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
CLUSTER_TAG_PREFIX = "kubernetes.io/cluster/"

# The audience IRSA tokens carry (EKS IAM roles for service accounts).
IRSA_AUDIENCE = "sts.amazonaws.com"

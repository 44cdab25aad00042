"""Node topology labels each cloud puts on GPU nodes, for Kueue Topology-Aware Scheduling.

Kueue TAS (kubernetes-sigs/kueue@v0.19.2 site/content/en/docs/concepts/topology_aware_scheduling.md)
reads the placement hierarchy from node labels "set up by a cloud provider", levels ordered from
the broadest to the narrowest, kubernetes.io/hostname last (the Topology CRD's validation).

- GKE labels A3 and A4 nodes with cloud.google.com/gce-topology-block, -subblock and -host
  (GKE docs, "Topology-aware scheduling" / Google's A3 Mega and A3 Ultra NCCL test guides, which
  run on Kueue TAS with these levels).
- EKS: the AWS cloud controller manager, which EKS runs in its control plane, sets
  topology.k8s.aws/network-node-layer-1..N when a node initializes, from EC2
  DescribeInstanceTopology's NetworkNodes, top layer first (kubernetes/cloud-provider-aws@v1.32.0
  pkg/providers/v1/instances_v2.go, well_known_labels.go LabelNetworkNodePrefix; its e2e test
  tests/e2e/nodes.go checks them on p3dn). No AMI setting or add-on is needed; only instance
  types DescribeInstanceTopology supports get them (EC2 user guide, "Amazon EC2 instance
  topology": p3dn, p4d, p4de, p5, p5e, p5en, p6-b200, g6e, trn1, trn2, ...).
"""

from __future__ import annotations

HOSTNAME = "kubernetes.io/hostname"

GKE_BLOCK = "cloud.google.com/gce-topology-block"
GKE_SUBBLOCK = "cloud.google.com/gce-topology-subblock"
GKE_HOST = "cloud.google.com/gce-topology-host"
AWS_LAYER = "topology.k8s.aws/network-node-layer-{}"

LEVELS: dict[str, tuple[str, ...]] = {
    "gcp": (GKE_BLOCK, GKE_SUBBLOCK, GKE_HOST, HOSTNAME),
    "aws": (AWS_LAYER.format(1), AWS_LAYER.format(2), AWS_LAYER.format(3), HOSTNAME),
}

# The level a multi-node job prefers (or requires) by default: GKE's block, the domain of nodes
# Google places together; on EC2 the layer-3 network node, the one instances share with their
# closest peers (EC2 "Amazon EC2 instance topology": instances under the same layer-3 node are
# closest). Kueue falls back to broader levels for a preferred one.
BLOCK_LEVEL: dict[str, str] = {"gcp": GKE_BLOCK, "aws": AWS_LAYER.format(3)}

# Instance types whose nodes the cloud labels with every level above (sources in the docstring).
LABELLED_TYPES: dict[str, frozenset[str]] = {
    "gcp": frozenset({"a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g"}),
    "aws": frozenset({
        "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
        "p6-b200.48xlarge", "g6e.8xlarge", "g6e.12xlarge", "g6e.16xlarge", "g6e.24xlarge", "g6e.48xlarge",
    }),
}

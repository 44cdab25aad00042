"""What a GPU node's launch template tells nodeadm, the AL2023 node bootstrapper: put containerd,
the kubelet and pod logs on the instance's NVMe instance store, striped as one RAID0 array.

Without it p5/p5en nodes (8 x 3.84 TB NVMe) pull multi-GiB images, write emptyDir scratch and
logs to the EBS root volume and leave the local disks idle.

nodeadm reads `NodeConfig` (apiVersion node.eks.aws/v1alpha1) from MIME multipart user data parts
of content type `application/node.eks.aws` (awslabs/amazon-eks-ami nodeadm/README.md,
"Configuration"; nodeadm/api/v1alpha1/nodeconfig_types.go: spec.instance.localStorage, strategy
one of RAID0, RAID10, Mount; mountPath defaults to /mnt/k8s-disks/). With a launch template and no
AMI of its own, an EKS managed node group merges this user data with its own part holding the
cluster's coordinates, so the user data must be MIME multipart and carries no cluster details (EKS
user guide, "Customize managed nodes with launch templates",
https://docs.aws.amazon.com/eks/latest/userguide/launch-templates.html, "Amazon EKS AMIs" user data:
AL2023 NodeConfig in MIME multi-part).

Bottlerocket does not run nodeadm (its user data is TOML settings): its pools keep their EBS data
volume and get gp3 performance set explicitly instead (components.aws.nodes).
"""

from __future__ import annotations

import base64
from typing import Any

import yaml

from components.facts import aws as aws_facts
from components.facts import catalog

NODEADM_CONTENT_TYPE = "application/node.eks.aws"
NODECONFIG_API_VERSION = "node.eks.aws/v1alpha1"
NODECONFIG_KIND = "NodeConfig"
LOCAL_STORAGE_STRATEGY = "RAID0"
# A fixed boundary keeps the user data, and so the launch template version, stable between runs.
MIME_BOUNDARY = "GPUPLATFORM"


def uses_instance_store(instance_type: catalog.InstanceType, ami_type: aws_facts.AmiType) -> bool:
    """nodeadm can put the node's storage on its instance store: an AL2023 AMI on a type with NVMe disks."""
    return instance_type.instance_store[0] > 0 and ami_type not in aws_facts.BOTTLEROCKET_AMI_TYPES


def node_config() -> dict[str, Any]:
    """The NodeConfig part: local storage only; EKS adds the cluster's own part."""
    return {
        "apiVersion": NODECONFIG_API_VERSION,
        "kind": NODECONFIG_KIND,
        "spec": {"instance": {"localStorage": {"strategy": LOCAL_STORAGE_STRATEGY}}},
    }


def mime_user_data(config: dict[str, Any]) -> str:
    """One MIME multipart/mixed document with `config` as its nodeadm part (RFC 2046 framing, CRLF
    free as cloud-init and nodeadm accept it)."""
    body = yaml.safe_dump(config, sort_keys=False)
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\n'
        "\n"
        f"--{MIME_BOUNDARY}\n"
        f"Content-Type: {NODEADM_CONTENT_TYPE}\n"
        "\n"
        "---\n"
        f"{body}"
        "\n"
        f"--{MIME_BOUNDARY}--\n"
    )


def launch_template_user_data(instance_type: catalog.InstanceType, ami_type: aws_facts.AmiType) -> str | None:
    """Base64 user data for the launch template (EC2 takes it encoded), or None where nodeadm has
    no instance store to use."""
    if not uses_instance_store(instance_type, ami_type):
        return None
    return base64.b64encode(mime_user_data(node_config()).encode()).decode()

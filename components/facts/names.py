"""What each target accepts as a name: one rule per kind of name the platform writes, with the
upstream page or source that states it.

The spec checks user fields and the names the wings derive from them against these rules, and the
naming property test checks every name in the synthesized artifacts against them too. Patterns
are anchored with `\\Z`, not `$`, which would also accept a trailing newline.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Callable, Literal

NameKind = Literal[
    "dns-label",
    "dns-subdomain",
    "label-key",
    "label-value",
    "eks-cluster",
    "eks-node-group",
    "eks-node-group-prefix",
    "iam-role",
    "iam-role-autonamed",
    "iam-policy",
    "s3-bucket",
    "gcs-bucket",
    "gce-name",
    "gke-cluster",
    "gke-node-pool",
    "gsa-account-id",
    "artifact-registry-repository",
    "ecr-repository",
]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_RFC1035 = r"[a-z]([-a-z0-9]*[a-z0-9])?"
_EKS = r"[0-9A-Za-z][A-Za-z0-9_-]*"
_IAM = r"[\w+=,.@-]+"
# Pulumi autonames an IAM role `<logical name>-<7 hex digits>` and refuses a logical name too
# long for that (pulumi/pulumi sdk/go/common/resource/urn.go NewUniqueHex, randlen 7).
PULUMI_AUTONAME_SUFFIX = len("-") + 7
# An EKS node group named by prefix gets a 26-character unique suffix (terraform-provider-aws
# internal/service/eks/node_group.go: name_prefix length 63 - id.UniqueIDSuffixLength).
EKS_NODE_GROUP_PREFIX_SUFFIX = 26


@dataclass(frozen=True)
class NameRule:
    """A name target: its grammar, its length bounds, what to tell a user, and where it is stated."""

    pattern: re.Pattern[str]
    min_length: int
    max_length: int
    expected: str
    source: str
    extra: Callable[[str], str | None] | None = None


def _s3_extra(name: str) -> str | None:
    if ".." in name:
        return "no two adjacent periods"
    if _is_ip(name):
        return "not formatted as an IP address"
    if name.startswith(("xn--", "sthree-", "amzn-s3-demo-")):
        return "no xn--, sthree- or amzn-s3-demo- prefix"
    if name.endswith(("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")):
        return "no -s3alias, --ol-s3, .mrap, --x-s3 or --table-s3 suffix"
    return None


def _gcs_extra(name: str) -> str | None:
    if _is_ip(name):
        return "not formatted as an IP address"
    if name.startswith("goog") or "google" in name or "g00gle" in name:
        return "no goog prefix and no google in the name"
    if any(len(part) > 63 for part in name.split(".")):
        return "each dot-separated part at most 63 characters"
    return None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _label_key_extra(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and not (0 < len(prefix) <= 253 and RULES["dns-subdomain"].pattern.match(prefix)):
        return "a prefix that is a DNS-1123 subdomain of at most 253 characters"
    if not (len(name) <= 63 and re.match(_QUALIFIED + r"\Z", name)):
        return "a name part of at most 63 characters"
    return None


_K8S = "kubernetes/apimachinery pkg/util/validation/validation.go"

RULES: dict[NameKind, NameRule] = {
    "dns-label": NameRule(
        re.compile(_LABEL + r"\Z"), 1, 63,
        "a DNS-1123 label: lowercase letters, digits and '-', starting and ending alphanumeric",
        f"{_K8S} IsDNS1123Label",
    ),
    "dns-subdomain": NameRule(
        re.compile(_LABEL + r"(\." + _LABEL + r")*\Z"), 1, 253,
        "a DNS-1123 subdomain: DNS-1123 labels joined by '.'",
        f"{_K8S} IsDNS1123Subdomain",
    ),
    "label-key": NameRule(
        re.compile(r"(" + _LABEL + r"(\." + _LABEL + r")*/)?" + _QUALIFIED + r"\Z"), 1, 253 + 1 + 63,
        "a label key: an optional DNS subdomain prefix and '/', then letters, digits, '-', '_' or '.'"
        " starting and ending alphanumeric",
        f"{_K8S} IsQualifiedName",
        _label_key_extra,
    ),
    "label-value": NameRule(
        re.compile(r"(" + _QUALIFIED + r")?\Z"), 0, 63,
        "a label value: empty, or letters, digits, '-', '_' or '.' starting and ending alphanumeric",
        f"{_K8S} IsValidLabelValue",
    ),
    "eks-cluster": NameRule(
        re.compile(_EKS + r"\Z"), 1, 100,
        "an EKS cluster name: letters, digits, '-' and '_', starting alphanumeric",
        "EKS API Reference, CreateCluster: name (pattern ^[0-9A-Za-z][A-Za-z0-9\\-_]*, length 1-100)",
    ),
    "eks-node-group": NameRule(
        re.compile(_EKS + r"\Z"), 1, 63,
        "an EKS node group name: letters, digits, '-' and '_', starting alphanumeric",
        "EKS API Reference, CreateNodegroup: nodegroupName (at most 63 characters)",
    ),
    "eks-node-group-prefix": NameRule(
        re.compile(_EKS + r"\Z"), 1, 63 - EKS_NODE_GROUP_PREFIX_SUFFIX,
        "an EKS node group name prefix (the provider appends a 26-character suffix)",
        "terraform-provider-aws internal/service/eks/node_group.go name_prefix",
    ),
    "iam-role": NameRule(
        re.compile(_IAM + r"\Z"), 1, 64,
        "an IAM role name: letters, digits and +=,.@_-",
        "IAM API Reference, CreateRole: RoleName (pattern [\\w+=,.@-]+, length 1-64)",
    ),
    "iam-role-autonamed": NameRule(
        re.compile(_IAM + r"\Z"), 1, 64 - PULUMI_AUTONAME_SUFFIX,
        "an IAM role's Pulumi name (Pulumi appends '-' and 7 hex digits to make the role name)",
        "IAM API Reference, CreateRole: RoleName; pulumi/pulumi resource.NewUniqueHex",
    ),
    "iam-policy": NameRule(
        re.compile(_IAM + r"\Z"), 1, 128,
        "an IAM policy name: letters, digits and +=,.@_-",
        "IAM API Reference, PutRolePolicy: PolicyName (pattern [\\w+=,.@-]+, length 1-128)",
    ),
    "s3-bucket": NameRule(
        re.compile(r"[a-z0-9][a-z0-9.-]*[a-z0-9]\Z"), 3, 63,
        "an S3 bucket name: lowercase letters, digits, '.' and '-', starting and ending alphanumeric",
        "docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html (general purpose buckets)",
        _s3_extra,
    ),
    "gcs-bucket": NameRule(
        re.compile(r"[a-z0-9][a-z0-9._-]*[a-z0-9]\Z"), 3, 222,
        "a Cloud Storage bucket name: lowercase letters, digits, '-', '_' and '.', starting and ending"
        " alphanumeric (at most 63 characters without dots)",
        "cloud.google.com/storage/docs/buckets#naming",
        lambda name: _gcs_extra(name) or (None if "." in name or len(name) <= 63 else "at most 63 characters without dots"),
    ),
    "gce-name": NameRule(
        re.compile(_RFC1035 + r"\Z"), 1, 63,
        "a Compute Engine name: lowercase letters, digits and '-', starting with a letter and ending alphanumeric",
        "cloud.google.com/compute/docs/naming-resources (RFC 1035)",
    ),
    "gke-cluster": NameRule(
        re.compile(_RFC1035 + r"\Z"), 1, 40,
        "a GKE cluster name: lowercase letters, digits and '-', starting with a letter",
        "GKE API Reference, projects.locations.clusters: Cluster.name (at most 40 characters)",
    ),
    "gke-node-pool": NameRule(
        re.compile(_RFC1035 + r"\Z"), 1, 40,
        "a GKE node pool name: lowercase letters, digits and '-', starting with a letter",
        "GKE API Reference, projects.locations.clusters.nodePools: NodePool.name (at most 40 characters)",
    ),
    "gsa-account-id": NameRule(
        re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])\Z"), 6, 30,
        "a service account id: lowercase letters, digits and '-', starting with a letter",
        "IAM API Reference, projects.serviceAccounts.create: accountId (^[a-z]([-a-z0-9]*[a-z0-9])$, 6-30)",
    ),
    "artifact-registry-repository": NameRule(
        re.compile(_RFC1035 + r"\Z"), 1, 63,
        "an Artifact Registry repository id: lowercase letters, digits and '-', starting with a letter",
        "cloud.google.com/artifact-registry/docs/repositories/create-repos (repository names)",
    ),
    "ecr-repository": NameRule(
        re.compile(r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*\Z"), 2, 256,
        "an ECR repository name: lowercase path components of letters and digits, joined by '.', '_' or '-'",
        "ECR API Reference, CreateRepository: repositoryName (length 2-256)",
    ),
}


def name_problem(kind: NameKind, name: str) -> str | None:
    """Why `name` is not a valid `kind` name (the expected form and its bounds), or None."""
    rule = RULES[kind]
    bounds = f"{rule.min_length}-{rule.max_length} characters"
    if not rule.min_length <= len(name) <= rule.max_length or not rule.pattern.match(name):
        return f"expected {rule.expected}, {bounds}"
    reason = rule.extra(name) if rule.extra else None
    return f"expected {rule.expected}, {bounds}; {reason}" if reason else None

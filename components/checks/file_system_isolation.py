"""`team-file-system-isolated`: no pod reaches the shared EFS file system except through its own
team's claim, read from the declared resources as each consumer reads them.

Four consumers hold it together (docs/tenancy.md, "The file system"):
- EFS evaluates the file system policy: without one it applies its default, full access for any
  anonymous client that reaches a mount target (EFS user guide, "Default EFS file system policy").
  Every principal is denied without TLS and outside the teams' access points; only the EFS CSI
  add-on's role is allowed; nothing is allowed to anyone ("*"); no IAM document of the stack grants
  the client actions besides (an allow in either an identity or the file system policy suffices).
- The EFS CSI driver builds each team volume's mount (aws-efs-csi-driver@v3.3.0 pkg/driver/node.go
  NodePublishVolume): an access point in the volume handle, `iam` among the mount options, and
  `tls`, which it adds for an access point or while encryptInTransit is not false.
- The VPC CNI enforces NetworkPolicy only with its agent on (`enableNetworkPolicy`, EKS user guide,
  cni-network-policy-configure); then every pod of a namespace holding a team volume is under an
  egress policy, and no egress rule there allows TCP to the NFS port.
- Pod Security Admission keeps team pods off the host network, where no NetworkPolicy applies:
  the namespace enforces `baseline` or `restricted` (both refuse hostNetwork).
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from components.checks.declared import (
    EFS_FILE_SYSTEM,
    EKS_ADDON,
    IAM_POLICY,
    IAM_ROLE,
    IAM_ROLE_POLICY,
    IAM_ROLE_POLICY_ATTACHMENT,
    UNKNOWN,
    Resource,
    as_list,
    get,
    items,
    mapping,
    statements,
)
from components.facts import aws as aws_facts
from components.kubernetes.pod_security import ENFORCE_LABEL

Finding = tuple[str | None, str]

EFS_FILE_SYSTEM_POLICY = "aws:efs/fileSystemPolicy:FileSystemPolicy"
PERSISTENT_VOLUME = "kubernetes:core/v1:PersistentVolume"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
EFS_CSI_ADDON = "aws-efs-csi-driver"
VPC_CNI_ADDON = "vpc-cni"
# Levels of Pod Security Admission that refuse hostNetwork (Pod Security Standards, baseline
# "Host Namespaces"; restricted includes baseline).
_NO_HOST_NETWORK = ("baseline", "restricted")
_ANYONE = "*"
_AP_EQUALS = ("StringEquals", "ArnEquals", "StringLike", "ArnLike")
_AP_NOT_EQUALS = ("StringNotEquals", "ArnNotEquals", "StringNotLike", "ArnNotLike")
_ACCESS_POINT_ARN = re.compile(r"^arn:aws[a-z-]*:elasticfilesystem:[^:]*:[^:]*:access-point/(.+)$")


def file_system_isolation(resources: Sequence[Resource]) -> list[Finding]:
    file_systems = [r for r in resources if r.type == EFS_FILE_SYSTEM]
    if not file_systems:
        return []
    volumes = [r for r in resources if r.type == PERSISTENT_VOLUME and get(r.props, "spec", "csi", "driver") == aws_facts.EFS_CSI_DRIVER]
    access_points = {point for v in volumes if (point := _access_point(v)) not in (None, UNKNOWN)}
    mount_role = _addon_role(resources)
    out: list[Finding] = []
    for file_system in file_systems:
        out += _policy_findings(file_system, resources, mount_role, access_points)
    out += _identity_grants(resources, mount_role)
    for volume in volumes:
        out += _volume_findings(volume)
    out += _network_findings(resources, volumes)
    return out


# --- the file system policy, as EFS evaluates it ----------------------------------------------


def _addon_role(resources: Sequence[Resource]) -> Any:
    """The role the EFS CSI add-on gives its controller and node plugin (None: no role)."""
    for r in resources:
        if r.type == EKS_ADDON and get(r.props, "addonName") == EFS_CSI_ADDON:
            return get(r.props, "serviceAccountRoleArn")
    return None


def _policy_findings(file_system: Resource, resources: Sequence[Resource], mount_role: Any, access_points: set[str]) -> list[Finding]:
    policies = [r for r in resources if r.type == EFS_FILE_SYSTEM_POLICY and file_system.key in r.depends_on]
    if not policies:
        return [
            (
                file_system.key,
                "no file system policy: EFS applies its default, full access for any anonymous client that reaches a "
                "mount target (a pod with a userspace NFS client included)",
            )
        ]
    out: list[Finding] = []
    for policy in policies:
        if get(policy.props, "policy") == UNKNOWN:
            continue
        document = statements(get(policy.props, "policy"))
        denies = [s for s in document if get(s, "Effect") == "Deny" and _for_anyone(s) and _client_actions(s)]
        if not any(_denies_without_tls(s) for s in denies):
            out.append((policy.key, "no statement denies every principal the client actions without TLS (Bool aws:SecureTransport false)"))
        if not any(_denies_outside_access_points(s) for s in denies):
            out.append((policy.key, "no statement denies every principal the client actions outside an access point (elasticfilesystem:AccessPointArn)"))
        for statement in document:
            if get(statement, "Effect") == "Allow":
                out += [(policy.key, problem) for problem in _allow_problems(statement, mount_role, access_points)]
    return out


def _principals(statement: Any) -> list[Any]:
    principal = get(statement, "Principal")
    if principal == _ANYONE:
        return [_ANYONE]
    return as_list(get(principal, "AWS"))


def _for_anyone(statement: Any) -> bool:
    return _ANYONE in _principals(statement)


def _client_actions(statement: Any) -> bool:
    """The statement covers every client action (by name or by wildcard)."""
    actions = [a for a in as_list(get(statement, "Action")) if isinstance(a, str)]
    covered = {a for a in aws_facts.EFS_CLIENT_ACTIONS if a in actions or "*" in actions or "elasticfilesystem:*" in actions}
    return covered == set(aws_facts.EFS_CLIENT_ACTIONS)


def _condition(statement: Any, operator: str, key: str) -> list[Any]:
    return as_list(get(mapping(get(statement, "Condition")).get(operator), key))


def _denies_without_tls(statement: Any) -> bool:
    return "false" in [str(v).lower() for v in _condition(statement, "Bool", aws_facts.SECURE_TRANSPORT_KEY)]


def _denies_outside_access_points(statement: Any) -> bool:
    """A deny when the access point is absent (Null ... true) or not one listed (a negated
    operator on a key the request lacks is true, so it covers the absent case too)."""
    absent = "true" in [str(v).lower() for v in _condition(statement, "Null", aws_facts.EFS_ACCESS_POINT_KEY)]
    return absent or any(_condition(statement, op, aws_facts.EFS_ACCESS_POINT_KEY) for op in _AP_NOT_EQUALS)


def _allow_problems(statement: Any, mount_role: Any, access_points: set[str]) -> list[str]:
    sid = get(statement, "Sid") or "?"
    problems: list[str] = []
    principals = _principals(statement)
    if _ANYONE in principals:
        problems.append(f"statement {sid} allows anyone (Principal \"*\"), anonymous clients included")
    elif mount_role not in (None, UNKNOWN) and any(p not in (mount_role, UNKNOWN) for p in principals):
        problems.append(f"statement {sid} allows {', '.join(str(p) for p in principals)}, not only the EFS CSI driver's role {mount_role}")
    elif mount_role is None:
        problems.append(f"statement {sid} allows a principal, but the EFS CSI add-on has no role: its `iam` mounts present the node's instance role")
    actions = [a for a in as_list(get(statement, "Action")) if isinstance(a, str)]
    if "elasticfilesystem:ClientRootAccess" in actions or any(a.endswith("*") for a in actions):
        problems.append(f"statement {sid} allows root access ({', '.join(actions)}): only ClientMount and ClientWrite")
    if "true" not in [str(v).lower() for v in _condition(statement, "Bool", aws_facts.SECURE_TRANSPORT_KEY)]:
        problems.append(f"statement {sid} does not require TLS (Bool aws:SecureTransport true)")
    allowed = [v for op in _AP_EQUALS for v in _condition(statement, op, aws_facts.EFS_ACCESS_POINT_KEY)]
    if not allowed:
        problems.append(f"statement {sid} does not require an access point (elasticfilesystem:AccessPointArn): it allows the file system's root")
    foreign = [str(arn) for arn in allowed if _access_point_id(arn) not in access_points and arn != UNKNOWN]
    if foreign:
        problems.append(f"statement {sid} allows access points no team volume uses ({', '.join(foreign)})")
    return problems


def _access_point_id(arn: Any) -> str | None:
    match = _ACCESS_POINT_ARN.match(arn) if isinstance(arn, str) else None
    return match.group(1) if match else None


def _identity_grants(resources: Sequence[Resource], mount_role: Any) -> list[Finding]:
    """IAM documents of the stack granting a client action: an allow there suffices, whatever
    the file system policy allows (EFS user guide: "either an IAM identity policy or a file system
    resource policy")."""
    out: list[Finding] = []
    for r in resources:
        documents: list[Any] = []
        if r.type in (IAM_POLICY, IAM_ROLE_POLICY):
            documents.append(get(r.props, "policy"))
        elif r.type == IAM_ROLE:
            documents += [get(p, "policy") for p in items(get(r.props, "inlinePolicies"))]
        elif r.type == IAM_ROLE_POLICY_ATTACHMENT:
            arn = get(r.props, "policyArn")
            if isinstance(arn, str) and arn.rsplit("/", 1)[-1].startswith(aws_facts.EFS_CLIENT_MANAGED_POLICY_PREFIX):
                out.append((r.key, f"attaches {arn.rsplit('/', 1)[-1]}: its holder mounts the training file system past the file system policy's allow-list"))
        for document in documents:
            for statement in statements(document):
                actions = [a for a in as_list(get(statement, "Action")) if isinstance(a, str)]
                granted = [a for a in actions if a in aws_facts.EFS_CLIENT_ACTIONS or a in ("*", "elasticfilesystem:*", "elasticfilesystem:Client*")]
                if get(statement, "Effect") == "Allow" and granted:
                    out.append((r.key, f"grants {', '.join(granted)}: its holder mounts the training file system past the file system policy's allow-list"))
    return out


# --- team volumes, as the EFS CSI driver mounts them ------------------------------------------


def _access_point(volume: Resource) -> str | None:
    """The access point of a volume handle `<fs-id>[:<subpath>[:<fsap-id>]]` (driver parseVolumeId)."""
    handle = get(volume.props, "spec", "csi", "volumeHandle")
    if handle == UNKNOWN:
        return UNKNOWN
    parts = handle.split(":") if isinstance(handle, str) else []
    return parts[2] if len(parts) > 2 and parts[2] else None


def driver_mount_options(volume: Resource) -> list[str]:
    """The options the driver passes to the mount helper for this volume (NodePublishVolume):
    `accesspoint=` and `tls` for an access point, `tls` while encryptInTransit is not false, then
    the PV's mountOptions lowercased."""
    options: list[str] = []
    point = _access_point(volume)
    if point not in (None, UNKNOWN):
        options += [f"accesspoint={point}", "tls"]
    if _encrypt_in_transit(volume) and "tls" not in options:
        options.append("tls")
    for option in items(get(volume.props, "spec", "mountOptions")):
        if isinstance(option, str) and option.lower() not in options:
            options.append(option.lower())
    return options


def _encrypt_in_transit(volume: Resource) -> bool:
    """The driver's reading of the attribute: absent is true (NodePublishVolume starts from
    `encryptInTransit := true`, then strconv.ParseBool of any key matching case-insensitively)."""
    attributes = mapping(get(volume.props, "spec", "csi", "volumeAttributes"))
    value = next((v for k, v in attributes.items() if k.lower() == aws_facts.EFS_ENCRYPT_IN_TRANSIT.lower()), "true")
    return str(value).lower() not in ("false", "0", "f")


def _volume_findings(volume: Resource) -> list[Finding]:
    if _access_point(volume) == UNKNOWN or get(volume.props, "spec", "mountOptions") == UNKNOWN:
        return []
    options = driver_mount_options(volume)
    out: list[Finding] = []
    if _access_point(volume) is None:
        out.append((volume.key, "the volume handle names no access point: it mounts the file system's root, every team's directory"))
    if aws_facts.EFS_MOUNT_OPTION_IAM not in options:
        out.append((volume.key, "no `iam` mount option: the mount is anonymous, which the file system policy refuses, or open to anyone without one"))
    if "tls" not in options:
        out.append((volume.key, "the driver mounts without `tls`: NFS in clear text, which the file system policy refuses"))
    if not _encrypt_in_transit(volume):
        out.append((volume.key, "volumeAttributes.encryptInTransit is false: TLS hangs on the access point alone"))
    return out


# --- the network path from pods, as the VPC CNI enforces NetworkPolicy ------------------------


def _network_findings(resources: Sequence[Resource], volumes: list[Resource]) -> list[Finding]:
    namespaces = sorted({ns for v in volumes if isinstance(ns := get(v.props, "spec", "claimRef", "namespace"), str) and ns != UNKNOWN})
    if not namespaces:
        return []
    out: list[Finding] = []
    cni = [r for r in resources if r.type == EKS_ADDON and get(r.props, "addonName") == VPC_CNI_ADDON]
    for addon in cni:
        if not _network_policy_enabled(get(addon.props, "configurationValues")):
            out.append((addon.key, "enableNetworkPolicy is not true in the add-on's configuration values: no NetworkPolicy is enforced, NFS is open to every pod"))
    for namespace in namespaces:
        out += _namespace_findings(resources, namespace)
    return out


def _network_policy_enabled(configuration: Any) -> bool:
    if configuration == UNKNOWN:
        return True
    try:
        values = json.loads(configuration) if isinstance(configuration, str) else {}
    except json.JSONDecodeError:
        return False
    return str(mapping(values).get("enableNetworkPolicy")).lower() == "true"


def _namespace_findings(resources: Sequence[Resource], namespace: str) -> list[Finding]:
    policies = [r for r in resources if r.type == NETWORK_POLICY and get(r.props, "metadata", "namespace") == namespace]
    out: list[Finding] = []
    isolating = [p for p in policies if _isolates_every_pod(p)]
    if not isolating:
        out.append((None, f"namespace {namespace!r} holds a team volume but no NetworkPolicy puts the egress of all its pods under policy: they reach NFS (TCP {aws_facts.NFS_PORT}) on the mount targets"))
    for policy in policies:
        for i, rule in enumerate(items(get(policy.props, "spec", "egress"))):
            if _reaches_addresses(rule) and _allows_tcp(rule, aws_facts.NFS_PORT):
                out.append((policy.key, f"egress rule {i} allows TCP {aws_facts.NFS_PORT} (NFS): pods reach the mount targets"))
    for r in resources:
        if r.type == NAMESPACE and get(r.props, "metadata", "name") == namespace:
            level = get(r.props, "metadata", "labels", ENFORCE_LABEL)
            if level not in (*_NO_HOST_NETWORK, UNKNOWN):
                out.append((r.key, f"Pod Security enforces {level or 'nothing'}: a hostNetwork pod escapes every NetworkPolicy and reaches NFS"))
    return out


def _isolates_every_pod(policy: Resource) -> bool:
    """Selects every pod of its namespace (empty podSelector) for egress (networking.k8s.io/v1:
    policyTypes defaults to Ingress, plus Egress when the policy has egress rules)."""
    spec = get(policy.props, "spec")
    selector = get(spec, "podSelector")
    if mapping(get(selector, "matchLabels")) or items(get(selector, "matchExpressions")):
        return False
    types = get(spec, "policyTypes")
    return "Egress" in items(types) if types is not None else get(spec, "egress") is not None


def _reaches_addresses(rule: Any) -> bool:
    """Whether a rule's peers may include a mount target: none (anywhere) or an ipBlock; pod and
    namespace selectors match pods only."""
    peers = items(get(rule, "to"))
    return not peers or any(get(peer, "ipBlock") is not None for peer in peers)


def _allows_tcp(rule: Any, port: int) -> bool:
    """A rule's ports allow TCP `port`: no ports (all), or an entry of protocol TCP (the default)
    whose port is absent, equal, or a range holding it; named ports resolve against pods only."""
    ports = get(rule, "ports")
    if not items(ports):
        return True
    for entry in items(ports):
        if (get(entry, "protocol") or "TCP") != "TCP":
            continue
        first, last = get(entry, "port"), get(entry, "endPort")
        if first is None:
            return True
        if isinstance(first, int) and (first == port or (isinstance(last, int) and first <= port <= last)):
            return True
    return False

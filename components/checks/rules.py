"""The policy rules as pure functions over resources as the Pulumi engine receives them.

A `Resource` is a type token, a name, its input properties (camelCase, as recorded by the offline
synth and as CrossGuard hands them to a policy pack) and the few resource options rules read. The
same functions run in `gpu-platform check` and `gpu-platform review` (over a synthesis) and in the
CrossGuard pack under policy/ (over a real preview), so a rule cannot pass offline and fail in a
real preview, or the other way round.

Each rule takes every resource of the stack and a `Context` (limits and waivers from the spec) and
returns violations; rules of scope "resource" judge one resource at a time, so the pack can run
them per resource. Values unknown during a preview (`UNKNOWN`) never count as a violation: a rule
only reports what it can see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any, Callable, Iterable, Mapping, Sequence

from components import tenancy
from components.checks import fit, isolation
from components.checks.declared import (
    GCS_BUCKET_IAM_MEMBER,
    IAM_ROLE,
    IAM_ROLE_POLICY,
    UNKNOWN,
    Resource,
)
from components.checks.declared import as_list as _as_list
from components.checks.declared import get as _get
from components.checks.declared import items as _items
from components.checks.declared import mapping as _mapping
from components.checks.declared import node_group_instance_types
from components.checks.declared import statements as _iam_statements
from components.facts import catalog
from components.facts.rule_catalog import RULES, RULES_BY_ID
from components.naming import DEFAULT_TEAM, TRAINER_SERVICE_ACCOUNT
from components.pools import GPU_TAINT_KEY, POOL_LABEL
from components.spec import PlatformSpec

# Type tokens of the resources rules read (pulumi-aws 7, pulumi-gcp 10, pulumi-kubernetes 4).
EKS_CLUSTER = "aws:eks/cluster:Cluster"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
S3_BUCKET = "aws:s3/bucket:Bucket"
EFS_FILE_SYSTEM = "aws:efs/fileSystem:FileSystem"
S3_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
S3_ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
S3_BUCKET_ACL = "aws:s3/bucketAcl:BucketAcl"
S3_BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
IAM_POLICY = "aws:iam/policy:Policy"
IAM_ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
GKE_CLUSTER = "gcp:container/cluster:Cluster"
GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
GCS_BUCKET = "gcp:storage/bucket:Bucket"
GCS_BUCKET_IAM_BINDING = "gcp:storage/bucketIAMBinding:BucketIAMBinding"
GCP_PROJECT_IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
GCP_PROJECT_IAM_BINDING = "gcp:projects/iAMBinding:IAMBinding"
PRIORITY_CLASS = "kubernetes:scheduling.k8s.io/v1:PriorityClass"

# The API server rejects user PriorityClasses above this and names starting with `system-`
# (kubernetes/pkg/apis/scheduling: HighestUserDefinablePriority, SystemPriorityClassPrefix).
MAX_USER_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_PREFIX = "system-"
# cluster-autoscaler --expendable-pods-priority-cutoff default: pods below it never trigger
# scale-up (cluster-autoscaler FAQ).
AUTOSCALER_PRIORITY_CUTOFF = -10
ANYWHERE = "0.0.0.0/0"

# Both NodeGroup taints and GKE node pool taints spell the effect this way.
NO_SCHEDULE = "NO_SCHEDULE"
PUBLIC_S3_ACLS = ("public-read", "public-read-write", "authenticated-read")
PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
# Primitive roles: every permission of (nearly) every service in the project.
GCP_PRIMITIVE_ROLES = ("roles/owner", "roles/editor")
ADMIN_POLICY_SUFFIX = ":policy/AdministratorAccess"
# Actions that only read; AWS scopes many of them to no resource, so `Resource: "*"` is normal.
READ_ONLY_VERBS = ("Describe", "Get", "List")
PUBLIC_ACCESS_BLOCK_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
WORKLOAD_KINDS = ("Pod", "Job", "CronJob", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "JobSet")


@dataclass(frozen=True)
class Context:
    """What rules need from the spec: the environment, the limits and the waivers."""

    environment: str
    max_nodes_per_pool: int
    max_gpus: int
    allow_spot: bool
    overrides: Mapping[str, str] = field(default_factory=dict)
    # The stack's spec, for rules that render what it lets teams submit (job-fits-pool);
    # None in contexts built by hand, where such rules have nothing to render.
    spec: PlatformSpec | None = None
    # The day rules judge dates against (kubernetes-standard-support).
    today: date = field(default_factory=date.today)


def context_of(spec: PlatformSpec) -> Context:
    policy = spec.policy
    return Context(
        environment=spec.environment,
        max_nodes_per_pool=policy.max_nodes_per_pool,
        max_gpus=policy.max_gpus,
        allow_spot=policy.spot_allowed(spec.environment),
        overrides={o.rule: o.reason for o in policy.overrides},
        spec=spec,
    )


@dataclass(frozen=True)
class Violation:
    rule: str
    # `type::name` of the offending resource; None: the stack as a whole.
    resource: str | None
    message: str


@dataclass(frozen=True)
class Finding:
    """A violation with the level it counts at for this stack."""

    violation: Violation
    level: str  # mandatory | advisory | overridden
    reason: str = ""

    @property
    def rule(self) -> str:
        return self.violation.rule

    @property
    def blocking(self) -> bool:
        return self.level == "mandatory"

    @property
    def message(self) -> str:
        """The message with its level in front, as check and review print it."""
        if self.level == "overridden":
            return f"overridden ({self.reason}): {self.violation.message}"
        return f"{self.level}: {self.violation.message}"


def from_synthesis(records: Iterable[Mapping[str, Any]]) -> list[Resource]:
    """Resources from the records of infra.synth (resources.json)."""
    return [
        Resource(
            type=r["type"],
            name=r["name"],
            props=r["inputs"],
            protect=bool(r["options"].get("protect")),
            ignore_changes=tuple(r["options"].get("ignoreChanges", ())),
            depends_on=tuple(r["options"].get("dependsOn", ())),
        )
        for r in records
        if r["custom"]
    ]


# --- helpers over engine-shaped values ---------------------------------------------------


def _truthy(value: Any) -> bool:
    """A boolean input; AWS launch templates send EBS flags as the strings "true"/"false"."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def _unknown(value: Any) -> bool:
    return value == UNKNOWN


def _true_or_unknown(value: Any) -> bool:
    return _truthy(value) or _unknown(value)


# --- GPU pools: EKS node groups and GKE node pools alike ---------------------------------


@dataclass(frozen=True)
class PoolView:
    """A GPU pool as the pool rules see it, whether an EKS node group or a GKE node pool."""

    resource: Resource
    gpus_per_node: int
    min_nodes: int | None
    max_nodes: int | None
    # None when the taints are unknown during a preview.
    tainted: bool | None


def _catalog_gpus(instance_type: Any) -> int:
    shape = catalog.INSTANCE_TYPES.get(instance_type) if isinstance(instance_type, str) else None
    return shape.gpus_per_node if shape else 0


def _has_gpu_taint(taints: Any) -> bool | None:
    if _unknown(taints):
        return None
    return any(
        _get(t, "key") == GPU_TAINT_KEY and _get(t, "effect") == NO_SCHEDULE for t in _items(taints)
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _eks_pool(res: Resource, resources: Sequence[Resource]) -> PoolView | None:
    props = res.props
    types = node_group_instance_types(res, resources)
    gpus = max((_catalog_gpus(t) for t in types), default=0)
    ami = _get(props, "amiType")
    labelled = POOL_LABEL in _mapping(_get(props, "labels"))
    if not (gpus or labelled or (isinstance(ami, str) and "NVIDIA" in ami)):
        return None
    return PoolView(
        resource=res,
        gpus_per_node=gpus,
        min_nodes=_int(_get(props, "scalingConfig", "minSize")),
        max_nodes=_int(_get(props, "scalingConfig", "maxSize")),
        tainted=_has_gpu_taint(_get(props, "taints")),
    )


def _gke_pool(res: Resource) -> PoolView | None:
    props = res.props
    node_config = _mapping(_get(props, "nodeConfig"))
    accelerators = _items(_get(node_config, "guestAccelerators"))
    gpus = sum(_int(_get(a, "count")) or 0 for a in accelerators) or _catalog_gpus(
        _get(node_config, "machineType")
    )
    labelled = POOL_LABEL in _mapping(_get(node_config, "labels"))
    if not (gpus or accelerators or labelled):
        return None
    low, high = _gke_node_range(props)
    return PoolView(
        resource=res,
        gpus_per_node=gpus,
        min_nodes=low,
        max_nodes=high,
        tainted=_has_gpu_taint(_get(node_config, "taints")),
    )


def _gke_node_range(props: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """Pool-wide min and max nodes: total* counts, or per-zone counts times the pool's zones."""
    autoscaling = _get(props, "autoscaling")
    if autoscaling is None:
        fixed = _int(_get(props, "nodeCount"))
        return fixed, fixed
    total_min = _int(_get(autoscaling, "totalMinNodeCount"))
    total_max = _int(_get(autoscaling, "totalMaxNodeCount"))
    if total_min is not None or total_max is not None:
        return total_min, total_max
    zones = len(_items(_get(props, "nodeLocations"))) or 1
    per_min = _int(_get(autoscaling, "minNodeCount"))
    per_max = _int(_get(autoscaling, "maxNodeCount"))
    return (
        None if per_min is None else per_min * zones,
        None if per_max is None else per_max * zones,
    )


def gpu_pools(resources: Sequence[Resource]) -> list[PoolView]:
    """Every EKS node group and GKE node pool whose nodes carry NVIDIA GPUs."""
    views: list[PoolView] = []
    for res in resources:
        view = _eks_pool(res, resources) if res.type == EKS_NODE_GROUP else _gke_pool(res) if res.type == GKE_NODE_POOL else None
        if view is not None:
            views.append(view)
    return views


# --- the rules --------------------------------------------------------------------------

Rule = Callable[[Sequence[Resource], Context], list[Violation]]


def gpu_pool_tainted(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    return [
        Violation(
            "gpu-pool-tainted",
            pool.resource.key,
            f"GPU pool has no {GPU_TAINT_KEY} taint with effect {NO_SCHEDULE}: any pod could land on its GPU nodes",
        )
        for pool in gpu_pools(resources)
        if pool.tainted is False
    ]


def gpu_pool_scale_to_zero(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    if ctx.environment == "prod":
        return []
    return [
        Violation(
            "gpu-pool-scale-to-zero",
            pool.resource.key,
            f"GPU pool keeps {pool.min_nodes} node(s) running in {ctx.environment}: set its minimum to 0",
        )
        for pool in gpu_pools(resources)
        if pool.min_nodes
    ]


def gpu_pool_max_nodes(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    return [
        Violation(
            "gpu-pool-max-nodes",
            pool.resource.key,
            f"GPU pool may scale to {pool.max_nodes} nodes, above policy.maxNodesPerPool ({ctx.max_nodes_per_pool})",
        )
        for pool in gpu_pools(resources)
        if pool.max_nodes is not None and pool.max_nodes > ctx.max_nodes_per_pool
    ]


def stack_max_gpus(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    pools = gpu_pools(resources)
    total = sum((pool.max_nodes or 0) * pool.gpus_per_node for pool in pools)
    if total <= ctx.max_gpus:
        return []
    parts = ", ".join(
        f"{pool.resource.name} {(pool.max_nodes or 0) * pool.gpus_per_node}" for pool in sorted(pools, key=lambda p: p.resource.name)
    )
    return [
        Violation(
            "stack-max-gpus",
            None,
            f"GPU pools reach {total} GPUs at maximum scale ({parts}), above policy.maxGpus ({ctx.max_gpus})",
        )
    ]


def spot_allowed(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    if ctx.allow_spot:
        return []
    spot: list[Resource] = []
    for res in resources:
        if res.type == EKS_NODE_GROUP and _get(res.props, "capacityType") == "SPOT":
            spot.append(res)
        elif res.type == GKE_NODE_POOL and (
            _truthy(_get(res.props, "nodeConfig", "spot")) or _truthy(_get(res.props, "nodeConfig", "preemptible"))
        ):
            spot.append(res)
    return [
        Violation(
            "spot-allowed",
            res.key,
            f"spot nodes in {ctx.environment}, where this stack does not allow them (policy.allowSpot)",
        )
        for res in spot
    ]


def _restricted(cidrs: Any) -> bool:
    """A public endpoint open only to named ranges, none of them the whole internet."""
    blocks = [c for c in _items(cidrs) if isinstance(c, str)]
    return bool(blocks) and ANYWHERE not in blocks


def prod_control_plane_private(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """Prod's API is private, or public only to named CIDR ranges (CI, VPN), never to anyone."""
    if ctx.environment != "prod":
        return []
    out: list[Violation] = []
    for res in resources:
        if res.type == EKS_CLUSTER:
            public = _get(res.props, "vpcConfig", "endpointPublicAccess")
            cidrs = _get(res.props, "vpcConfig", "publicAccessCidrs")
            # EKS opens the public endpoint unless told otherwise.
            if (public is None or _truthy(public)) and not _restricted(cidrs) and not _unknown(cidrs):
                out.append(
                    Violation(
                        "prod-control-plane-private",
                        res.key,
                        "EKS API endpoint is open to anyone: set vpcConfig.endpointPublicAccess=false, "
                        "or restrict publicAccessCidrs to your CI and VPN ranges",
                    )
                )
        elif res.type == GKE_CLUSTER:
            private_endpoint = _get(res.props, "privateClusterConfig", "enablePrivateEndpoint")
            ip_endpoints = _get(res.props, "controlPlaneEndpointsConfig", "ipEndpointsConfig", "enabled")
            blocks = [b.get("cidrBlock") for b in _items(_get(res.props, "masterAuthorizedNetworksConfig", "cidrBlocks")) if isinstance(b, Mapping)]
            google_ranges = _get(res.props, "masterAuthorizedNetworksConfig", "gcpPublicCidrsAccessEnabled")
            authorized = _restricted(blocks) and not _truthy(google_ranges)
            if not _true_or_unknown(private_endpoint) and ip_endpoints is not False and not _unknown(ip_endpoints) and not authorized:
                out.append(
                    Violation(
                        "prod-control-plane-private",
                        res.key,
                        "GKE control plane is open to anyone: set privateClusterConfig.enablePrivateEndpoint=true, "
                        "or list authorized networks (not 0.0.0.0/0)",
                    )
                )
    return out


def _configured(
    resources: Sequence[Resource], config_type: str, satisfies: Callable[[Mapping[str, Any]], bool]
) -> set[str]:
    """Keys of the resources (buckets) that a `config_type` resource satisfying the check depends on:
    S3 settings are separate resources linked to their bucket by dependency."""
    return {
        dep
        for res in resources
        if res.type == config_type and satisfies(_mapping(res.props))
        for dep in res.depends_on
    }


def encrypted_storage(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    encrypted_by_resource = _configured(
        resources,
        S3_ENCRYPTION,
        lambda props: any(_get(r, "applyServerSideEncryptionByDefault", "sseAlgorithm") for r in _items(_get(props, "rules"))),
    )
    for res in resources:
        if res.type == LAUNCH_TEMPLATE:
            out += _launch_template_encryption(res)
        elif res.type == EKS_NODE_GROUP and _get(res.props, "launchTemplate") is None:
            out.append(
                Violation(
                    "encrypted-storage",
                    res.key,
                    "node group without a launch template: its disks follow the account's EBS default; "
                    "use a launch template whose block device mappings set encrypted",
                )
            )
        elif res.type == EFS_FILE_SYSTEM:
            encrypted = _get(res.props, "encrypted")
            # EFS encryption at rest is chosen at creation and off unless asked for.
            if not _truthy(encrypted) and not _unknown(encrypted):
                out.append(
                    Violation(
                        "encrypted-storage",
                        res.key,
                        "EFS file system is not encrypted at rest: set encrypted=true (and kmsKeyId for your own key)",
                    )
                )
        elif res.type == S3_BUCKET:
            inline = _get(res.props, "serverSideEncryptionConfiguration", "rule", "applyServerSideEncryptionByDefault", "sseAlgorithm")
            if not inline and res.key not in encrypted_by_resource:
                out.append(
                    Violation(
                        "encrypted-storage",
                        res.key,
                        "bucket has no server-side encryption configuration "
                        "(an aws.s3.BucketServerSideEncryptionConfiguration for it)",
                    )
                )
    return out


def _launch_template_encryption(res: Resource) -> list[Violation]:
    mappings = _get(res.props, "blockDeviceMappings")
    if _unknown(mappings):
        return []
    if not _items(mappings):
        return [
            Violation(
                "encrypted-storage",
                res.key,
                "launch template declares no block device mappings, so the root volume's encryption "
                "is left to the account default: map the root volume with ebs.encrypted=true",
            )
        ]
    return [
        Violation(
            "encrypted-storage",
            res.key,
            f"EBS volume {_get(m, 'deviceName') or f'#{i}'} is not encrypted: set ebs.encrypted=true",
        )
        for i, m in enumerate(_items(mappings))
        if _get(m, "ebs") is not None and not _true_or_unknown(_get(m, "ebs", "encrypted"))
    ]


def imdsv2_required(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    for res in resources:
        if res.type == LAUNCH_TEMPLATE:
            tokens = _get(res.props, "metadataOptions", "httpTokens")
            if tokens not in ("required", UNKNOWN):
                out.append(
                    Violation(
                        "imdsv2-required",
                        res.key,
                        f"metadataOptions.httpTokens is {tokens or 'unset'}: set it to required (IMDSv2 only)",
                    )
                )
        elif res.type == EKS_NODE_GROUP and _get(res.props, "launchTemplate") is None:
            out.append(
                Violation(
                    "imdsv2-required",
                    res.key,
                    "node group without a launch template: instance metadata settings are EKS defaults; "
                    "use a launch template with metadataOptions.httpTokens=required",
                )
            )
    return out


def no_public_buckets(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    blocked = _configured(
        resources,
        S3_PUBLIC_ACCESS_BLOCK,
        lambda props: all(_true_or_unknown(_get(props, flag)) for flag in PUBLIC_ACCESS_BLOCK_FLAGS),
    )
    for res in resources:
        if res.type == S3_BUCKET:
            if res.key not in blocked:
                out.append(
                    Violation(
                        "no-public-buckets",
                        res.key,
                        "bucket has no BucketPublicAccessBlock with all four of " + ", ".join(PUBLIC_ACCESS_BLOCK_FLAGS) + " true",
                    )
                )
            if _get(res.props, "acl") in PUBLIC_S3_ACLS:
                out.append(Violation("no-public-buckets", res.key, f"bucket ACL is {_get(res.props, 'acl')}"))
        elif res.type == S3_BUCKET_ACL and _get(res.props, "acl") in PUBLIC_S3_ACLS:
            out.append(Violation("no-public-buckets", res.key, f"bucket ACL is {_get(res.props, 'acl')}"))
        elif res.type == S3_BUCKET_POLICY:
            out += [
                Violation("no-public-buckets", res.key, "bucket policy allows anyone (Principal \"*\") without a condition")
                for stmt in _iam_statements(_get(res.props, "policy"))
                if _get(stmt, "Effect") == "Allow" and _anyone(_get(stmt, "Principal")) and not _get(stmt, "Condition")
            ]
        elif res.type == GCS_BUCKET and _get(res.props, "publicAccessPrevention") not in ("enforced", UNKNOWN):
            out.append(Violation("no-public-buckets", res.key, "publicAccessPrevention is not enforced"))
        elif res.type in (GCS_BUCKET_IAM_MEMBER, GCS_BUCKET_IAM_BINDING):
            members = [_get(res.props, "member")] + _items(_get(res.props, "members"))
            out += [
                Violation("no-public-buckets", res.key, f"grants {_get(res.props, 'role')} to {member}")
                for member in members
                if member in PUBLIC_MEMBERS
            ]
    return out


def _anyone(principal: Any) -> bool:
    if principal == "*":
        return True
    return isinstance(principal, Mapping) and "*" in _as_list(principal.get("AWS"))


def no_wildcard_iam(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    for res in resources:
        documents: list[Any] = []
        if res.type in (IAM_POLICY, IAM_ROLE_POLICY):
            documents.append(_get(res.props, "policy"))
        elif res.type == IAM_ROLE:
            documents += [_get(p, "policy") for p in _items(_get(res.props, "inlinePolicies"))]
        elif res.type == IAM_ROLE_POLICY_ATTACHMENT:
            arn = _get(res.props, "policyArn")
            if isinstance(arn, str) and arn.endswith(ADMIN_POLICY_SUFFIX):
                out.append(Violation("no-wildcard-iam", res.key, "attaches AdministratorAccess"))
        elif res.type in (GCP_PROJECT_IAM_MEMBER, GCP_PROJECT_IAM_BINDING):
            role = _get(res.props, "role")
            if role in GCP_PRIMITIVE_ROLES:
                out.append(Violation("no-wildcard-iam", res.key, f"grants the primitive role {role}; grant a predefined role"))
        for document in documents:
            out += [Violation("no-wildcard-iam", res.key, problem) for problem in _statement_problems(document)]
    return out


def _statement_problems(document: Any) -> list[str]:
    problems: list[str] = []
    for stmt in _iam_statements(document):
        if _get(stmt, "Effect") != "Allow":
            continue
        if _get(stmt, "NotAction") not in (None, UNKNOWN):
            problems.append("Allow with NotAction grants everything not listed")
            continue
        actions = [a for a in _as_list(_get(stmt, "Action")) if isinstance(a, str)]
        wild = sorted(a for a in actions if a == "*" or a.endswith(":*"))
        if wild:
            problems.append(f"allows every action of {', '.join(wild)}")
            continue
        resources = _as_list(_get(stmt, "Resource"))
        writes = sorted(a for a in actions if not _read_only(a))
        if "*" in resources and writes and not _get(stmt, "Condition"):
            problems.append(f"allows {', '.join(writes)} on every resource (\"*\") without a condition")
    return problems


def _read_only(action: str) -> bool:
    verb = action.split(":", 1)[-1]
    return verb.startswith(READ_ONLY_VERBS)


def trainer_non_root(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    for res in resources:
        if not res.type.startswith("kubernetes:") or _get(res.props, "kind") not in WORKLOAD_KINDS:
            continue
        for path, pod in _pod_specs(res.props):
            if _get(pod, "serviceAccountName") != TRAINER_SERVICE_ACCOUNT:
                continue
            problem = _root_problem(pod)
            if problem:
                out.append(Violation("trainer-non-root", res.key, f"{path}: {problem}"))
    return out


def _pod_specs(obj: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(path, pod spec) of every pod a workload object runs."""
    kind = _get(obj, "kind")
    if kind == "Pod":
        return [("spec", _get(obj, "spec"))]
    if kind == "CronJob":
        return [("spec.jobTemplate.spec.template.spec", _get(obj, "spec", "jobTemplate", "spec", "template", "spec"))]
    if kind == "JobSet":
        return [
            (f"spec.replicatedJobs[{i}].template.spec.template.spec", _get(job, "template", "spec", "template", "spec"))
            for i, job in enumerate(_items(_get(obj, "spec", "replicatedJobs")))
        ]
    return [("spec.template.spec", _get(obj, "spec", "template", "spec"))]


def _root_problem(pod: Any) -> str | None:
    pod_ctx = _mapping(_get(pod, "securityContext"))
    pod_non_root = _true_or_unknown(_get(pod_ctx, "runAsNonRoot"))
    if _get(pod_ctx, "runAsUser") == 0:
        return "securityContext.runAsUser is 0 (root)"
    containers = _items(_get(pod, "initContainers")) + _items(_get(pod, "containers"))
    for container in containers:
        sc = _mapping(_get(container, "securityContext"))
        name = _get(container, "name")
        if _get(sc, "runAsUser") == 0:
            return f"container {name} runs as UID 0"
        non_root = _get(sc, "runAsNonRoot")
        if non_root is False or (non_root is None and not pod_non_root):
            return f"container {name} may run as root: set securityContext.runAsNonRoot=true"
    return None


def prod_protected(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    if ctx.environment != "prod":
        return []
    kinds = {EKS_CLUSTER: "cluster", GKE_CLUSTER: "cluster", S3_BUCKET: "data bucket", GCS_BUCKET: "data bucket"}
    return [
        Violation("prod-protected", res.key, f"prod {kinds[res.type]} is not protected: set protect=True")
        for res in resources
        if res.type in kinds and not res.protect
    ]


def priority_class_range(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    for res in _priority_classes(resources):
        value = _int(_get(res.props, "value"))
        name = _get(res.props, "metadata", "name")
        if value is not None and value > MAX_USER_PRIORITY:
            out.append(Violation("priority-class-range", res.key, f"value {value} is above {MAX_USER_PRIORITY:,}, the highest user priority"))
        if isinstance(name, str) and name.startswith(SYSTEM_PRIORITY_PREFIX):
            out.append(Violation("priority-class-range", res.key, f"name {name} uses the reserved {SYSTEM_PRIORITY_PREFIX!r} prefix"))
    return out


def priority_class_autoscaler_cutoff(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """Below the cutoff a class only soaks up idle GPUs (the opportunistic tier); preempting
    there would evict real work for capacity that class can never grow."""
    return [
        Violation(
            "priority-class-autoscaler-cutoff",
            res.key,
            f"value {_get(res.props, 'value')} is below {AUTOSCALER_PRIORITY_CUTOFF}, so its pods never scale a GPU "
            "pool up, yet it may preempt: set preemptionPolicy: Never",
        )
        for res in _priority_classes(resources)
        if (_int(_get(res.props, "value")) or 0) < AUTOSCALER_PRIORITY_CUTOFF
        and _get(res.props, "preemptionPolicy") != "Never"
    ]


def _priority_classes(resources: Iterable[Resource]) -> list[Resource]:
    return [res for res in resources if res.type == PRIORITY_CLASS]


def autoscaler_drift_ignored(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    for res in resources:
        if res.type == EKS_NODE_GROUP and not _ignored(res, "scalingConfig.desiredSize"):
            out.append(
                Violation("autoscaler-drift-ignored", res.key, "scalingConfig.desiredSize is not in ignoreChanges")
            )
        elif res.type == GKE_NODE_POOL and _get(res.props, "autoscaling") is not None:
            out += [
                Violation("autoscaler-drift-ignored", res.key, f"{prop} is set on an autoscaled pool but not in ignoreChanges")
                for prop in ("nodeCount", "initialNodeCount")
                if _get(res.props, prop) is not None and not _ignored(res, prop)
            ]
    return out


def _ignored(res: Resource, path: str) -> bool:
    """Whether ignoreChanges covers `path` (itself or an enclosing property)."""
    return any(path == p or path.startswith(f"{p}.") for p in res.ignore_changes)


# Where each cloud's cluster names its Kubernetes minor: EKS `version`; GKE `minMasterVersion` (the
# release channel upgrades from there).
_CLUSTER_VERSIONS: dict[str, tuple[catalog.Cloud, str]] = {EKS_CLUSTER: ("aws", "version"), GKE_CLUSTER: ("gcp", "minMasterVersion")}


def kubernetes_standard_support(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    out: list[Violation] = []
    for res in resources:
        if res.type not in _CLUSTER_VERSIONS:
            continue
        cloud, key = _CLUSTER_VERSIONS[res.type]
        version = _get(res.props, key)
        if not isinstance(version, str) or _unknown(version):
            continue
        minor = ".".join(version.split(".")[:2])
        if catalog.in_standard_support(cloud, minor, ctx.today):
            continue
        ends = catalog.STANDARD_SUPPORT_ENDS[cloud]
        current = [v for v in ends if catalog.in_standard_support(cloud, v, ctx.today)]
        ended = f"left standard support on {ends[minor]}" if minor in ends else "has no known standard support window"
        out.append(
            Violation(
                "kubernetes-standard-support",
                res.key,
                f"Kubernetes {minor} {ended} ({'EKS' if cloud == 'aws' else 'GKE'}, judged on {ctx.today}): set "
                f"cluster.kubernetesVersion to {' or '.join(current) or 'a newer minor'}",
            )
        )
    return out


def job_fits_pool(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """Every job `gpu-platform job` accepts can run on what the stack declares (components.checks.fit)."""
    if ctx.spec is None:
        return []
    return [Violation("job-fits-pool", resource, message) for resource, message in fit.misfits(resources, ctx.spec)]


def _team_namespaces(resources: Sequence[Resource], ctx: Context) -> list[str]:
    declared = [team.name for team in ctx.spec.scheduling.teams] if ctx.spec is not None else []
    return isolation.team_namespaces(resources, declared)


def kueue_manages_team_namespaces(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    teams = _team_namespaces(resources, ctx)
    if ctx.spec is not None and not ctx.spec.scheduling.teams:
        teams = [DEFAULT_TEAM]
    return [
        Violation("kueue-manages-team-namespaces", key, message)
        for key, message in isolation.kueue_management(resources, teams)
    ]


def team_identity_isolated(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    return [
        Violation("team-identity-isolated", key, message)
        for key, message in isolation.identity_isolation(resources, _team_namespaces(resources, ctx))
    ]


def team_rbac_namespaced(resources: Sequence[Resource], ctx: Context) -> list[Violation]:
    """Team subjects as the spec names them (admins excepted: they are cluster-admin by design);
    EKS team groups are recognised by their prefix without a spec."""
    members: dict[str, list[str]] = {}
    if ctx.spec is not None:
        admins = {subject.name for subject in tenancy.cluster_admin_subjects(ctx.spec)}
        for team in ctx.spec.scheduling.teams:
            names = [subject.name for subject in tenancy.team_subjects(ctx.spec, team)]
            members[team.name] = [name for name in names if name not in admins]
    return [
        Violation("team-rbac-namespaced", key, message) for key, message in isolation.rbac_namespacing(resources, members)
    ]


CHECKS: dict[str, Rule] = {
    "gpu-pool-tainted": gpu_pool_tainted,
    "gpu-pool-scale-to-zero": gpu_pool_scale_to_zero,
    "gpu-pool-max-nodes": gpu_pool_max_nodes,
    "stack-max-gpus": stack_max_gpus,
    "spot-allowed": spot_allowed,
    "prod-control-plane-private": prod_control_plane_private,
    "encrypted-storage": encrypted_storage,
    "imdsv2-required": imdsv2_required,
    "no-public-buckets": no_public_buckets,
    "no-wildcard-iam": no_wildcard_iam,
    "trainer-non-root": trainer_non_root,
    "prod-protected": prod_protected,
    "priority-class-range": priority_class_range,
    "priority-class-autoscaler-cutoff": priority_class_autoscaler_cutoff,
    "autoscaler-drift-ignored": autoscaler_drift_ignored,
    "kubernetes-standard-support": kubernetes_standard_support,
    "job-fits-pool": job_fits_pool,
    "kueue-manages-team-namespaces": kueue_manages_team_namespaces,
    "team-identity-isolated": team_identity_isolated,
    "team-rbac-namespaced": team_rbac_namespaced,
}


def judge(violation: Violation, ctx: Context) -> Finding:
    """The level a violation counts at: the rule's enforcement, unless the stack waives it."""
    rule = RULES_BY_ID[violation.rule]
    if rule.overridable and rule.id in ctx.overrides:
        return Finding(violation, "overridden", ctx.overrides[rule.id])
    return Finding(violation, rule.enforcement)


def evaluate(resources: Sequence[Resource], ctx: Context) -> list[Finding]:
    """Every rule over a whole stack, findings sorted by rule, resource and message."""
    findings = [judge(v, ctx) for rule in RULES for v in CHECKS[rule.id](resources, ctx)]
    return sorted(findings, key=lambda f: (f.rule, f.violation.resource or "", f.violation.message))

"""The job storage proof (`job-storage-reachable`): every GCS FUSE volume of every job `gpu-platform
job` accepts can be mounted and used by the identity its pod runs as.

For each pool and team, the largest job of the fit proof is rendered with the real renderer and
its pod followed the way GKE follows it: pod -> Kubernetes ServiceAccount (`serviceAccountName`
in the job's namespace) -> Google service account (the ServiceAccount's `iam.gke.io/gcp-service-
account` annotation, honoured only with a `roles/iam.workloadIdentityUser` binding for
`serviceAccount:<workload pool>[<namespace>/<name>]` on that account, the pool being the
cluster's `workloadIdentityConfig.workloadPool`) -> the Cloud Storage grants of that account in
resources.json (bucket and project IAM members for the bucket root, managed folder IAM members
for the objects under their folder).

Every access is then asked for where it happens: the driver's and the sidecar's bucket-root list
unless the volume switches them off (components.jobs.volumes), gcsfuse's bucket-root storage
layout lookup unless `enable-hns=false` is among the mount options, gcsfuse's list and read of its
`only-dir` folder, and writes (create, delete for replaced checkpoints) on a volume not mounted
read-only. Only GCS FUSE volumes are proved here; claims (EFS, existing clusters) are the
tenancy rules'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from components.checks.declared import (
    GCP_PROJECT_IAM_MEMBER,
    GCS_BUCKET_IAM_MEMBER,
    GKE_CLUSTER,
    UNKNOWN,
    Resource,
    get,
    items,
    mapping,
)
from components.checks.fit.proof import proof_requests
from components.checks.isolation import GCS_FOLDER_IAM_MEMBER, GSA_IAM_MEMBER
from components.facts import gcs_iam
from components.jobs import renderer, volumes
from components.kubernetes.queues import queue_plan
from components.pools import derive_pools
from components.spec import PlatformSpec

Finding = tuple[str | None, str]

SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
ONLY_DIR = "only-dir="


@dataclass(frozen=True)
class Access:
    permission: str
    prefix: str  # "" is the bucket root, which only bucket or project grants reach
    why: str


def volume_accesses(volume: Any, read_only: bool) -> tuple[str, str, list[Access]]:
    """(bucket, folder prefix, the accesses mounting and using `volume` makes)."""
    attributes = mapping(get(volume, "csi", "volumeAttributes"))
    options = [o for o in str(attributes.get("mountOptions", "")).split(",") if o]
    folder = next((o[len(ONLY_DIR) :] for o in options if o.startswith(ONLY_DIR)), "")
    prefix = f"{folder.strip('/')}/" if folder else ""
    accesses: list[Access] = []
    if attributes.get(volumes.SKIP_BUCKET_ACCESS_CHECK_ATTRIBUTE) != "true":
        accesses.append(Access(gcs_iam.OBJECTS_LIST, "", "the CSI driver's bucket access check"))
    if volumes.NO_SIDECAR_BUCKET_ACCESS_CHECK not in options:
        accesses.append(Access(gcs_iam.OBJECTS_LIST, "", "the sidecar's bucket access check"))
    if volumes.NO_HNS_LAYOUT_LOOKUP not in options:
        accesses.append(Access(gcs_iam.OBJECTS_LIST, "", "gcsfuse's storage layout lookup (enable-hns)"))
    accesses += [Access(gcs_iam.OBJECTS_LIST, prefix, "gcsfuse listing"), Access(gcs_iam.OBJECTS_GET, prefix, "reading")]
    if not read_only and not get(volume, "csi", "readOnly"):
        accesses += [
            Access(gcs_iam.OBJECTS_CREATE, prefix, "writing checkpoints"),
            Access(gcs_iam.OBJECTS_DELETE, prefix, "replacing checkpoints"),
        ]
    return str(attributes.get("bucketName")), prefix, accesses


def granted(resources: Sequence[Resource], member: str, bucket: str, access: Access) -> bool:
    for r in resources:
        if get(r.props, "member") != member:
            continue
        permissions = gcs_iam.ROLE_PERMISSIONS.get(str(get(r.props, "role")), frozenset())
        if access.permission not in permissions:
            continue
        if r.type == GCP_PROJECT_IAM_MEMBER or (r.type == GCS_BUCKET_IAM_MEMBER and get(r.props, "bucket") == bucket):
            return True
        folder = get(r.props, "managedFolder")
        if r.type == GCS_FOLDER_IAM_MEMBER and get(r.props, "bucket") == bucket and isinstance(folder, str):
            if access.prefix and access.prefix.startswith(folder):
                return True
    return False


def google_identity(resources: Sequence[Resource], namespace: str, account: str) -> tuple[str | None, str | None]:
    """(the Google service account the pod acts as, or None with why not)."""
    found = [
        r for r in resources
        if r.type == SERVICE_ACCOUNT
        and get(r.props, "metadata", "namespace") == namespace
        and get(r.props, "metadata", "name") == account
    ]
    if not found:
        return None, f"no ServiceAccount {namespace}/{account}"
    email = get(found[0].props, "metadata", "annotations", gcs_iam.GSA_ANNOTATION)
    if not isinstance(email, str) or email == UNKNOWN:
        return None, f"ServiceAccount {namespace}/{account} names no Google service account ({gcs_iam.GSA_ANNOTATION})"
    pools = {get(r.props, "workloadIdentityConfig", "workloadPool") for r in resources if r.type == GKE_CLUSTER}
    principals = {f"serviceAccount:{pool}[{namespace}/{account}]" for pool in pools if isinstance(pool, str)}
    bound = any(
        r.type == GSA_IAM_MEMBER
        and get(r.props, "role") == gcs_iam.WORKLOAD_IDENTITY_USER
        and get(r.props, "member") in principals
        and str(get(r.props, "serviceAccountId")).endswith(f"/serviceAccounts/{email}")
        for r in resources
    )
    if not bound:
        return None, f"{namespace}/{account} may not act as {email}: no {gcs_iam.WORKLOAD_IDENTITY_USER} binding for it"
    return email, None


def unreachable(resources: Sequence[Resource], spec: PlatformSpec) -> list[Finding]:
    """(None, message) for every access a job's GCS FUSE volume makes that its identity lacks."""
    found: dict[Finding, None] = {}
    pools = derive_pools(spec)
    for pool in pools:
        for team in [t.team for t in queue_plan(spec, pools).teams]:
            for request in proof_requests(spec, pool, team)[:1]:
                try:
                    jobset = renderer.render(spec, request)
                except renderer.JobError:
                    continue  # job-fits-pool reports what the renderer refuses
                for message in _pod_problems(resources, jobset):
                    found[(None, f"pool {pool.name}, team {team}: {message}")] = None
    return list(found)


def _pod_problems(resources: Sequence[Resource], jobset: Any) -> list[str]:
    template = get(jobset, "spec", "replicatedJobs", 0, "template", "spec", "template")
    pod = mapping(get(template, "spec"))
    gcs = [v for v in items(get(pod, "volumes")) if get(v, "csi", "driver") == volumes.GCS_FUSE_DRIVER]
    if not gcs:
        return []
    namespace = str(get(jobset, "metadata", "namespace"))
    account = str(get(pod, "serviceAccountName") or "default")
    email, problem = google_identity(resources, namespace, account)
    if email is None:
        return [str(problem)]
    mounts = [m for c in items(get(pod, "containers")) for m in items(get(c, "volumeMounts"))]
    problems: list[str] = []
    for volume in gcs:
        read_only = all(get(m, "readOnly") is True for m in mounts if get(m, "name") == get(volume, "name"))
        bucket, prefix, accesses = volume_accesses(volume, read_only)
        for access in accesses:
            if not granted(resources, f"serviceAccount:{email}", bucket, access):
                scope = f"gs://{bucket}/{access.prefix}" if access.prefix else f"bucket {bucket}"
                problems.append(
                    f"volume {get(volume, 'name')} (gs://{bucket}/{prefix}): {email} lacks {access.permission} "
                    f"on {scope} ({access.why})"
                )
    return problems

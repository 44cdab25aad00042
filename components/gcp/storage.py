"""The registry, the training bucket and the identities that reach them: Artifact Registry, the
bucket with its lifecycle, each team's Google service account with its managed-folder grants and
Workload Identity binding, and the cluster viewer role for members and admins."""

from __future__ import annotations

import pulumi_gcp as gcp

from components import naming, tenancy
from components.gcp import plan
from components.gcp.wing import Wing

# Read, write and delete objects, no bucket administration (Cloud Storage IAM roles).
_TRAINER_BUCKET_ROLE = "roles/storage.objectUser"
_WORKLOAD_IDENTITY_ROLE = "roles/iam.workloadIdentityUser"
# Read objects, nothing else: teams' access to the shared datasets (Cloud Storage IAM roles).
_DATASETS_ROLE = "roles/storage.objectViewer"
_CLUSTER_VIEWER_ROLE = "roles/container.clusterViewer"
# Overwritten checkpoints stay recoverable this long before the bucket deletes them.
_NONCURRENT_VERSION_DAYS = 30
# Abandoned multipart uploads (a killed checkpoint write) are cleaned up after this long.
_INCOMPLETE_UPLOAD_DAYS = 7
# Untagged images (replaced tags of trainer builds, which run to gigabytes) are deleted after this.
_UNTAGGED_IMAGE_SECONDS = 14 * 24 * 3600


def service_account(wing: Wing, role: str, purpose: str) -> gcp.serviceaccount.Account:
    account_id = plan.service_account_id(wing.spec, role)
    return gcp.serviceaccount.Account(
        account_id,
        account_id=account_id,
        display_name=f"{wing.spec.cluster.name} {purpose}",
        opts=wing.child(),
    )


def registry(wing: Wing, node_account: gcp.serviceaccount.Account) -> gcp.artifactregistry.Repository:
    repository_id = wing.cloud_name("images")
    repository = gcp.artifactregistry.Repository(
        repository_id,
        repository_id=repository_id,
        location=wing.region,
        format="DOCKER",
        description=f"Training images for {wing.spec.cluster.name}",
        cleanup_policy_dry_run=False,
        cleanup_policies=[
            gcp.artifactregistry.RepositoryCleanupPolicyArgs(
                id="delete-untagged",
                action="DELETE",
                condition=gcp.artifactregistry.RepositoryCleanupPolicyConditionArgs(
                    tag_state="UNTAGGED", older_than=f"{_UNTAGGED_IMAGE_SECONDS}s"
                ),
            )
        ],
        opts=wing.child(),
    )
    gcp.artifactregistry.RepositoryIamMember(
        f"{wing.name}-nodes-pull",
        repository=repository.name,
        location=repository.location,
        role="roles/artifactregistry.reader",
        member=node_account.member,
        opts=wing.child(),
    )
    return repository


def training_bucket(wing: Wing) -> gcp.storage.Bucket:
    name = naming.bucket_name(wing.spec)
    return gcp.storage.Bucket(
        name,
        name=name,
        # Cloud Storage reports locations in upper case; match it so there is no diff.
        location=wing.region.upper(),
        uniform_bucket_level_access=True,
        public_access_prevention="enforced",
        versioning=gcp.storage.BucketVersioningArgs(enabled=True),
        lifecycle_rules=[
            gcp.storage.BucketLifecycleRuleArgs(
                action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                    days_since_noncurrent_time=_NONCURRENT_VERSION_DAYS, with_state="ARCHIVED"
                ),
            ),
            gcp.storage.BucketLifecycleRuleArgs(
                action=gcp.storage.BucketLifecycleRuleActionArgs(type="AbortIncompleteMultipartUpload"),
                condition=gcp.storage.BucketLifecycleRuleConditionArgs(age=_INCOMPLETE_UPLOAD_DAYS),
            ),
        ],
        force_destroy=False,
        labels={"gpu-platform-environment": wing.spec.environment},
        opts=wing.child(protect=wing.prod),
    )


def trainer_identities(
    wing: Wing, cluster: gcp.container.Cluster, bucket: gcp.storage.Bucket
) -> dict[str, gcp.serviceaccount.Account]:
    """Per team namespace, the Google identity its `trainer` account acts as: a team's reaches
    its managed folder `teams/<team>/` (read-write) and `datasets/` (read-only) and nothing
    else (Cloud Storage docs, "Managed folders": IAM on a folder of a bucket with uniform
    bucket-level access). A stack without teams keeps one account for the whole bucket."""
    if not wing.spec.scheduling.teams:
        trainer = service_account(wing, "trainer", "trainer: datasets and checkpoints")
        gcp.storage.BucketIAMMember(
            f"{wing.name}-trainer-objects",
            bucket=bucket.name,
            role=_TRAINER_BUCKET_ROLE,
            member=trainer.member,
            opts=wing.child(),
        )
        namespace = naming.team_namespace(naming.DEFAULT_TEAM)
        _workload_identity(wing, cluster, trainer, f"{wing.name}-trainer-{namespace}", namespace)
        return {namespace: trainer}
    datasets = _managed_folder(wing, bucket, "datasets", tenancy.DATASETS_PREFIX)
    accounts: dict[str, gcp.serviceaccount.Account] = {}
    for team in wing.spec.scheduling.teams:
        namespace = naming.team_namespace(team.name)
        account_id = plan.team_service_account_id(wing.spec, team.name)
        account = gcp.serviceaccount.Account(
            account_id,
            account_id=account_id,
            display_name=f"{wing.spec.cluster.name} trainer of team {team.name}",
            opts=wing.child(),
        )
        folder = _managed_folder(wing, bucket, f"team-{team.name}", tenancy.team_prefix(team.name))
        for suffix, managed_folder, role in (("objects", folder, _TRAINER_BUCKET_ROLE), ("datasets", datasets, _DATASETS_ROLE)):
            gcp.storage.ManagedFolderIamMember(
                f"{wing.name}-trainer-{team.name}-{suffix}",
                bucket=bucket.name,
                managed_folder=managed_folder.name,
                role=role,
                member=account.member,
                opts=wing.child(),
            )
        _workload_identity(wing, cluster, account, f"{wing.name}-trainer-{namespace}", namespace)
        accounts[namespace] = account
    return accounts


def _managed_folder(wing: Wing, bucket: gcp.storage.Bucket, resource: str, prefix: str) -> gcp.storage.ManagedFolder:
    return gcp.storage.ManagedFolder(
        f"{wing.name}-{resource}",
        bucket=bucket.name,
        # Managed folder names end with a slash (Cloud Storage JSON API, managedFolders).
        name=prefix,
        # The objects in it are datasets and checkpoints: deleting the folder keeps them.
        force_destroy=False,
        opts=wing.child(),
    )


def _workload_identity(
    wing: Wing, cluster: gcp.container.Cluster, account: gcp.serviceaccount.Account, resource: str, namespace: str
) -> None:
    gcp.serviceaccount.IAMMember(
        resource,
        service_account_id=account.name,
        role=_WORKLOAD_IDENTITY_ROLE,
        member=plan.workload_identity_member(wing.project, namespace),
        # The workload identity pool exists once the first cluster that uses it does.
        opts=wing.child(depends_on=[cluster]),
    )


def member_access(wing: Wing) -> None:
    """Team members and admins may fetch the cluster's credentials (`gcloud container clusters
    get-credentials` needs container.clusters.get: roles/container.clusterViewer, GKE docs
    "Access control"); what they may do inside is RBAC's (components.tenancy)."""
    principals = [member for team in wing.spec.scheduling.teams for member in team.members]
    for principal in dict.fromkeys([*principals, *wing.spec.admins]):
        gcp.projects.IAMMember(
            f"{wing.name}-viewer-{principal.replace(':', '-').replace('@', '-at-')}",
            project=wing.project,
            role=_CLUSTER_VIEWER_ROLE,
            member=principal,
            opts=wing.child(),
        )

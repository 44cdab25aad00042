"""Cloud Storage's predefined roles, as the permissions that the job storage proof asks for.

Only the roles the platform grants or might be granted are listed; the permissions are those of
the Cloud Storage IAM roles reference (https://cloud.google.com/storage/docs/access-control/iam-roles,
late 2026). Object permissions granted on a managed folder apply to the objects under it
(Cloud Storage docs, "Managed folders"), bucket permissions only at the bucket or the project.
"""

from __future__ import annotations

OBJECTS_LIST = "storage.objects.list"
OBJECTS_GET = "storage.objects.get"
OBJECTS_CREATE = "storage.objects.create"
OBJECTS_DELETE = "storage.objects.delete"

ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    "roles/storage.objectViewer": frozenset({OBJECTS_LIST, OBJECTS_GET}),
    "roles/storage.objectCreator": frozenset({OBJECTS_CREATE}),
    "roles/storage.objectUser": frozenset({OBJECTS_LIST, OBJECTS_GET, OBJECTS_CREATE, OBJECTS_DELETE}),
    "roles/storage.objectAdmin": frozenset({OBJECTS_LIST, OBJECTS_GET, OBJECTS_CREATE, OBJECTS_DELETE}),
    "roles/storage.admin": frozenset({OBJECTS_LIST, OBJECTS_GET, OBJECTS_CREATE, OBJECTS_DELETE}),
    "roles/storage.legacyBucketReader": frozenset({OBJECTS_LIST}),
}

# The Workload Identity role a Kubernetes service account needs on the Google service account it
# acts as (GKE docs, "Authenticate to Google Cloud APIs from GKE workloads").
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
# The Kubernetes ServiceAccount annotation that names the Google service account (same docs).
GSA_ANNOTATION = "iam.gke.io/gcp-service-account"

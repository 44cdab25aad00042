"""A job's data volumes: the team's `training-data` claim on AWS and existing clusters; on GKE the
stack's bucket through the GCS FUSE CSI driver, the team's folder read-write and `datasets/`
read-only, with the sidecar the driver's webhook injects."""

from __future__ import annotations

from typing import Any

from components import naming, node_resources, tenancy
from components.kubernetes.queues import TeamQueue
from components.naming import TRAINER_UID
from components.node_resources import Requests
from components.spec import PlatformSpec

DATA_MOUNT = "/data"
# On aws and existing clusters the data volume is a claim each team namespace holds; on GKE
# the stack's bucket is mounted directly through the GCS FUSE CSI driver.
DATA_CLAIM = naming.DATA_CLAIM
GCS_FUSE_DRIVER = "gcsfuse.csi.storage.gke.io"
# The GCS FUSE webhook injects its sidecar into pods with this annotation and sizes it from the
# request annotations (GoogleCloudPlatform/gcs-fuse-csi-driver pkg/webhook/injection.go); the
# figures are GKE's documented defaults, stated so the fit proof can count them.
GCS_FUSE_ANNOTATION = "gke-gcsfuse/volumes"
GCS_FUSE_CPU_REQUEST_ANNOTATION = "gke-gcsfuse/cpu-request"
GCS_FUSE_MEMORY_REQUEST_ANNOTATION = "gke-gcsfuse/memory-request"
GCS_FUSE_SIDECAR = Requests(250, 256)
# Before mounting, the node driver lists the bucket root (`storage.objects.list`, prefix "") as
# the pod's identity unless the volume attribute `skipCSIBucketAccessCheck` is "true"
# (GoogleCloudPlatform/gcs-fuse-csi-driver v1.24.4 pkg/csi_driver/node.go NodePublishVolume,
# pkg/cloud_provider/storage/storage.go CheckBucketExists); the sidecar repeats it where the
# driver enables its check (GKE >= 1.34.1-gke.3899001) unless the mount option
# `enable-sidecar-bucket-access-check=false` is given (pkg/csi_driver/node_test.go: the user's
# option wins over the driver's default either way). A team's identity holds grants only on its
# managed folders, so both checks would deny the mount. components.checks.storage_access proves
# every access that remains.
SKIP_BUCKET_ACCESS_CHECK_ATTRIBUTE = "skipCSIBucketAccessCheck"
NO_SIDECAR_BUCKET_ACCESS_CHECK = "enable-sidecar-bucket-access-check=false"
# gcsfuse itself (v3.11.2, the binary gcs-fuse-csi-driver v1.24.4 bundles: cmd/sidecar_mounter/
# gcsfuse_binary) asks the bucket's storage layout at mount with prefix "" whenever `enable-hns`
# is on, its default (GoogleCloudPlatform/gcsfuse v3.11.2 cfg/params.yaml `enable-hns`,
# internal/storage/storage_handle.go NewStorageHandle, lookupBucketType, getStorageLayout), and
# GetStorageLayout needs `storage.objects.list` on the bucket root. The stack's bucket has no
# hierarchical namespace, so switching the lookup off loses nothing; the sidecar passes the option
# on as `--enable-hns=false` (gcs-fuse-csi-driver v1.24.4 pkg/sidecar_mounter/
# sidecar_mounter_config.go: not among DisallowedFlags; sidecar_mounter.go builds `--k=v`).
NO_HNS_LAYOUT_LOOKUP = "enable-hns=false"


def gcs_volume(spec: PlatformSpec, name: str, folder: str | None, read_only: bool) -> dict[str, Any]:
    # gcsfuse mounts as root with 0755 folders unless told the owner: the trainer runs as
    # TRAINER_UID and must write its checkpoints. `only-dir` mounts one folder of the bucket
    # (GCS FUSE CSI driver docs, mount options): a team's identity may use only its own.
    options = [f"only-dir={folder}"] if folder else []
    options += ["implicit-dirs", f"uid={TRAINER_UID}", f"gid={TRAINER_UID}"]
    attributes = {"bucketName": naming.bucket_name(spec)}
    if folder:
        options += [NO_SIDECAR_BUCKET_ACCESS_CHECK, NO_HNS_LAYOUT_LOOKUP]
        attributes[SKIP_BUCKET_ACCESS_CHECK_ATTRIBUTE] = "true"
    attributes["mountOptions"] = ",".join(options)
    csi: dict[str, Any] = {"driver": GCS_FUSE_DRIVER, "volumeAttributes": attributes}
    if read_only:
        csi["readOnly"] = True
    return {"name": name, "csi": csi}


def data_volumes(spec: PlatformSpec, team: TeamQueue, portable: bool = False) -> list[dict[str, Any]]:
    """`data` (the team's checkpoints and metrics) and, where the bucket is mounted per team,
    `datasets` (read-only, shared by every team). A portable (fleet) job names the claim on every
    cloud: fleet workers hold it on GKE too (components.fleet.data)."""
    if spec.cloud != "gcp" or portable:
        return [{"name": "data", "persistentVolumeClaim": {"claimName": DATA_CLAIM}}]
    if not spec.scheduling.teams:
        return [gcs_volume(spec, "data", None, read_only=False)]
    return [
        gcs_volume(spec, "data", tenancy.team_prefix(team.team).rstrip("/"), read_only=False),
        gcs_volume(spec, "datasets", tenancy.DATASETS_PREFIX.rstrip("/"), read_only=True),
    ]


def pod_annotations(spec: PlatformSpec, portable: bool = False) -> dict[str, str]:
    if spec.cloud != "gcp" and not portable:
        return {}
    return {
        GCS_FUSE_ANNOTATION: "true",
        GCS_FUSE_CPU_REQUEST_ANNOTATION: node_resources.cpu_quantity(GCS_FUSE_SIDECAR.cpu_m),
        GCS_FUSE_MEMORY_REQUEST_ANNOTATION: node_resources.memory_quantity(GCS_FUSE_SIDECAR.memory_mib),
    }

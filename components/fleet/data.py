"""The `training-data` claim of a GKE worker: the stack's bucket through GCS FUSE, statically bound.

A fleet job is copied to whichever worker admits it unchanged (MultiKueue's JobSet adapter copies
the spec, kubernetes-sigs/kueue@v0.19.2 pkg/controller/jobs/jobset/jobset_multikueue_adapter.go
SyncJob), so it names one claim, `training-data`, in the team's namespace, and every worker binds
that claim to its own storage: EFS on AWS (components.aws.efs), the bucket here. A GCS FUSE
PersistentVolume takes the bucket as its volume handle and gcsfuse's flags as mount options (GKE
docs, "Mount Cloud Storage buckets as persistent volumes"); each team's volume mounts only its own
folder, with the same options and attributes as the inline volume `gpu-platform job` renders
(components.jobs.volumes.gcs_volume), so the team's identity needs no grant beyond its folder.
"""

from __future__ import annotations

from components import naming, tenancy
from components.jobs.volumes import GCS_FUSE_DRIVER, gcs_volume
from components.kubernetes.data_volume import DataVolume
from components.spec import PlatformSpec


def gcs_data_volume(spec: PlatformSpec) -> DataVolume:
    teams = [team.name for team in spec.scheduling.teams]
    folders: dict[str, str | None] = {naming.team_namespace(t): tenancy.team_prefix(t).rstrip("/") for t in teams}
    if not teams:
        folders = {naming.team_namespace(naming.DEFAULT_TEAM): None}
    options: dict[str, tuple[str, ...]] = {}
    attributes: dict[str, str] = {}
    for namespace, folder in folders.items():
        inline = gcs_volume(spec, "data", folder, read_only=False)["csi"]["volumeAttributes"]
        options[namespace] = tuple(str(inline["mountOptions"]).split(","))
        attributes = {k: str(v) for k, v in inline.items() if k not in ("mountOptions", "bucketName")}
    bucket = naming.bucket_name(spec)
    return DataVolume(
        driver=GCS_FUSE_DRIVER,
        handles={namespace: bucket for namespace in folders},
        namespace_mount_options=options,
        volume_attributes=attributes,
    )

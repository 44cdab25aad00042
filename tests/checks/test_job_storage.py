"""`job-storage-reachable`: the shipped GKE stacks' jobs reach their storage, and each planted hole
(a missing folder grant, a missing Workload Identity binding, a volume left to the bucket access
checks or to gcsfuse's storage layout lookup) fails it with the pool, the team and the missing grant."""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

from components.checks import storage_access
from components.checks.declared import Resource
from components.checks.rules import base, registry
from components.jobs import volumes
from infra.synth import Synthesis

Synthesized = Callable[[str], Synthesis]


def violations(resources: list[Resource], stack: str) -> list[base.Violation]:
    from helpers import platform_of
    from k8s_support import spec_of

    ctx = base.context_of(spec_of(platform_of(stack)))
    return registry.CHECKS["job-storage-reachable"](resources, ctx)


def resources_of(result: Synthesis) -> list[Resource]:
    return base.from_synthesis(copy.deepcopy(result.resources))


@pytest.mark.parametrize("stack", ["dev-gcp", "prod-gcp"])
def test_gke_jobs_reach_their_data_and_datasets(synthesized: Synthesized, stack: str) -> None:
    resources = resources_of(synthesized(stack))
    # The proof must have something to prove: the teams' folder grants are there to be read.
    assert any(r.type == storage_access.GCS_FOLDER_IAM_MEMBER for r in resources)
    assert violations(resources, stack) == []


def test_team_volumes_switch_off_the_bucket_root_checks(synthesized: Synthesized) -> None:
    from helpers import platform_of
    from k8s_support import spec_of

    from components.kubernetes.queues import queue_plan
    from components.pools import derive_pools

    spec = spec_of(platform_of("dev-gcp"))
    team = queue_plan(spec, derive_pools(spec)).teams[0]
    for volume in volumes.data_volumes(spec, team):
        attributes = volume["csi"]["volumeAttributes"]
        assert attributes["skipCSIBucketAccessCheck"] == "true"
        assert "enable-sidecar-bucket-access-check=false" in attributes["mountOptions"].split(",")
        assert "enable-hns=false" in attributes["mountOptions"].split(",")


def test_a_missing_folder_grant_names_pool_team_and_grant(synthesized: Synthesized) -> None:
    resources = [
        r
        for r in resources_of(synthesized("dev-gcp"))
        if not (r.type == storage_access.GCS_FOLDER_IAM_MEMBER and r.name == "ml-dev-trainer-research-objects")
    ]
    found = {v.message for v in violations(resources, "dev-gcp")}
    assert (
        "pool a100-mig, team research: volume data (gs://ml-dev-dev-training/teams/research/): "
        "ml-dev-t-research@my-ml-dev.iam.gserviceaccount.com lacks storage.objects.create on "
        "gs://ml-dev-dev-training/teams/research/ (writing checkpoints)"
    ) in found
    assert all("team research" in message for message in found)


def test_a_read_only_grant_on_the_team_folder_cannot_write(synthesized: Synthesized) -> None:
    resources = resources_of(synthesized("dev-gcp"))
    changed: list[Resource] = []
    for r in resources:
        if r.type == storage_access.GCS_FOLDER_IAM_MEMBER and r.name == "ml-dev-trainer-applied-objects":
            r = Resource(r.type, r.name, {**r.props, "role": "roles/storage.objectViewer"}, r.protect, r.ignore_changes, r.depends_on)
        changed.append(r)
    found = {v.message.split(" lacks ")[1] for v in violations(changed, "dev-gcp")}
    assert found == {
        "storage.objects.create on gs://ml-dev-dev-training/teams/applied/ (writing checkpoints)",
        "storage.objects.delete on gs://ml-dev-dev-training/teams/applied/ (replacing checkpoints)",
    }


def test_a_missing_workload_identity_binding_fails(synthesized: Synthesized) -> None:
    resources = [
        r
        for r in resources_of(synthesized("dev-gcp"))
        if not (r.type == storage_access.GSA_IAM_MEMBER and r.name == "ml-dev-trainer-applied")
    ]
    found = {v.message.split(": ", 1)[1] for v in violations(resources, "dev-gcp")}
    assert found == {
        "applied/trainer may not act as ml-dev-t-applied@my-ml-dev.iam.gserviceaccount.com: "
        "no roles/iam.workloadIdentityUser binding for it"
    }


def test_volumes_left_to_the_bucket_access_checks_fail(synthesized: Synthesized, monkeypatch: pytest.MonkeyPatch) -> None:
    render_volume = volumes.gcs_volume

    def with_checks(*args: Any, **kwargs: Any) -> dict[str, Any]:
        volume = render_volume(*args, **kwargs)
        attributes = volume["csi"]["volumeAttributes"]
        attributes.pop("skipCSIBucketAccessCheck")
        attributes["mountOptions"] = attributes["mountOptions"].replace(",enable-sidecar-bucket-access-check=false", "")
        return volume

    monkeypatch.setattr(volumes, "gcs_volume", with_checks)
    found = {v.message.split(" lacks ")[1] for v in violations(resources_of(synthesized("dev-gcp")), "dev-gcp")}
    assert found == {
        "storage.objects.list on bucket ml-dev-dev-training (the CSI driver's bucket access check)",
        "storage.objects.list on bucket ml-dev-dev-training (the sidecar's bucket access check)",
    }


def test_a_volume_left_to_the_storage_layout_lookup_fails(synthesized: Synthesized, monkeypatch: pytest.MonkeyPatch) -> None:
    # gcsfuse v3.11.2 calls GetStorageLayout with prefix "" at mount unless enable-hns=false
    # (GoogleCloudPlatform/gcsfuse v3.11.2 internal/storage/storage_handle.go lookupBucketType).
    render_volume = volumes.gcs_volume

    def with_lookup(*args: Any, **kwargs: Any) -> dict[str, Any]:
        volume = render_volume(*args, **kwargs)
        attributes = volume["csi"]["volumeAttributes"]
        attributes["mountOptions"] = attributes["mountOptions"].replace(",enable-hns=false", "")
        return volume

    monkeypatch.setattr(volumes, "gcs_volume", with_lookup)
    found = {v.message.split(" lacks ")[1] for v in violations(resources_of(synthesized("dev-gcp")), "dev-gcp")}
    assert found == {"storage.objects.list on bucket ml-dev-dev-training (gcsfuse's storage layout lookup (enable-hns))"}

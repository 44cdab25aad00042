"""Each team's `training-data` claim, bound to the volume a wing hands the layer (EFS on AWS)."""

from __future__ import annotations

from typing import Any, Callable

import kubernetes_validate
import pytest
from k8s_support import REPO

from components.jobs import renderer
from components.jobs.volumes import DATA_CLAIM
from infra import stackfile
from infra.synth import Synthesis

PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"

Synth = Callable[[str], Synthesis]


@pytest.fixture(scope="module")
def dev(synthesized: Synth) -> Synthesis:
    return synthesized("dev-aws")


def claims(result: Synthesis) -> dict[str, dict[str, Any]]:
    return {c["inputs"]["metadata"]["namespace"]: c["inputs"] for c in result.by_type(PVC)}


def volumes(result: Synthesis) -> dict[str, dict[str, Any]]:
    return {v["inputs"]["metadata"]["name"]: v["inputs"] for v in result.by_type(PV)}


def test_each_team_namespace_holds_one_claim_named_as_jobs_mount_it(dev: Synthesis) -> None:
    found = claims(dev)
    assert set(found) == {"research", "applied"}
    assert {c["metadata"]["name"] for c in found.values()} == {DATA_CLAIM}
    assert len(dev.by_type(PVC)) == 2


def test_the_claim_is_in_the_namespace_a_team_job_renders_into(dev: Synthesis) -> None:
    spec = stackfile.read("dev-aws", REPO).spec()
    request = renderer.JobRequest(
        pool="l4-train", nodes=2, gpus_per_node=4, team="applied", tier="standard", image="ghcr.io/acme/trainer:1.0.0",
        trainer_args=["--preset", "tiny", "--max-steps", "1", "--checkpoint-every", "1", "--global-batch-size", "8",
                      "--seq-len", "128", "--seed", "0", "--data", "/data/x"],
    )
    jobset = renderer.render(spec, request)
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (data,) = [v for v in pod["volumes"] if v["name"] == "data"]
    claim = claims(dev)[jobset["metadata"]["namespace"]]
    assert data["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]


def test_each_claim_is_bound_to_its_own_volume_and_back(dev: Synthesis) -> None:
    found = volumes(dev)
    for namespace, claim in claims(dev).items():
        volume = found[claim["spec"]["volumeName"]]
        assert volume["spec"]["claimRef"] == {"namespace": namespace, "name": DATA_CLAIM}
        assert claim["spec"]["storageClassName"] == volume["spec"]["storageClassName"] == ""


def test_each_volume_mounts_its_teams_access_point_on_efs_in_the_source_it_was_created_with(dev: Synthesis) -> None:
    """spec.persistentVolumeSource cannot change once the volume exists (Kubernetes
    ValidatePersistentVolumeUpdate): the csi block keeps the shape the first release created,
    driver and handle only, so `pulumi up` on an existing stack only updates mountOptions."""
    points = {p["inputs"]["rootDirectory"]["path"]: f"{p['name']}-id" for p in dev.by_type(ACCESS_POINT)}
    (file_system,) = dev.by_type("aws:efs/fileSystem:FileSystem")
    for volume in volumes(dev).values():
        namespace = volume["spec"]["claimRef"]["namespace"]
        assert volume["spec"]["csi"] == {
            "driver": "efs.csi.aws.com",
            "volumeHandle": f"{file_system['name']}-id::{points[f'/teams/{namespace}']}",
        }


def test_volumes_are_shared_and_outlive_their_claims(dev: Synthesis) -> None:
    for volume in volumes(dev).values():
        assert volume["spec"]["accessModes"] == ["ReadWriteMany"]
        assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


def test_volumes_and_claims_validate_as_kubernetes_1_33(dev: Synthesis) -> None:
    objects = [r["inputs"] for r in dev.by_type(PV) + dev.by_type(PVC)]
    assert len(objects) == 4
    for obj in objects:
        kubernetes_validate.validate(obj, "1.33", strict=True)


@pytest.mark.parametrize("stack", ["dev-gcp", "onprem"])
def test_no_volume_or_claim_without_a_wing_file_system(synthesized: Synth, stack: str) -> None:
    result = synthesized(stack)
    assert result.by_type(PV) == [] and result.by_type(PVC) == []

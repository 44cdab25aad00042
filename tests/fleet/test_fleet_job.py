"""`gpu-platform job` on the fleet stack: one JobSet valid and fitting on every eligible worker."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helpers import REPO, platform_of
from k8s_support import crd_schema
from test_k8s_queued_provisioning import validate

from components.checks import fleet_fit
from components.checks.fit.cluster import Cluster
from components.checks.fit.kueue import Kueue
from components.checks.fit.proof import jobset_misfits
from components.checks.rules import base
from components.fleet import job
from components.jobs import renderer
from components.spec import parse_spec
from infra import cli, offline, stackfile

AWS, GCP = "organization/gpu-platform/prod-aws", "organization/gpu-platform/prod-gcp"
ARGS = ["--data", "/data/datasets/web", "--preset", "small", "--max-steps", "1000", "--checkpoint-every", "100",
        "--global-batch-size", "64", "--seq-len", "1024", "--seed", "0"]


def workers() -> dict[str, Any]:
    return {w: stackfile.read(w.rsplit("/", 1)[1], REPO).spec() for w in (AWS, GCP)}


def request(**changes: Any) -> job.FleetJobRequest:
    fields: dict[str, Any] = dict(gpu_model="H100-80GB", nodes=2, gpus_per_node=8, team="research", tier="production",
                                  image="ghcr.io/example/trainer:1.0", trainer_args=list(ARGS))
    return job.FleetJobRequest(**(fields | changes))


def test_the_fleet_jobset_validates_against_the_jobset_schema() -> None:
    jobset, _ = job.render(workers(), request())
    assert crd_schema(jobset["apiVersion"], jobset["kind"]) is not None
    validate(jobset)


def test_the_fleet_jobset_names_the_claim_every_worker_holds_and_no_cloud_device() -> None:
    jobset, chosen = job.render(workers(), request())
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["spec"]["volumes"][0] == {"name": "data", "persistentVolumeClaim": {"claimName": "training-data"}}
    assert "vpc.amazonaws.com/efa" not in pod["spec"]["containers"][0]["resources"]["requests"]
    assert pod["spec"]["nodeSelector"] == {"gpu-platform.io/pool": "h100-train", "gpu-platform.io/gpu-model": "H100-80GB"}
    assert jobset["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert sorted(chosen) == [AWS, GCP]


def test_the_fleet_jobset_fits_both_workers(fleet: offline.FleetSynthesis) -> None:
    jobset, chosen = job.render(workers(), request())
    for name, pool in chosen.items():
        spec, synthesis = fleet.workers[name]
        resources = base.from_synthesis(synthesis.resources)
        cluster = Cluster(resources)
        assert jobset_misfits(spec, resources, cluster, Kueue(resources, cluster), pool, jobset, 2, name, name) == []


def test_every_job_the_manager_accepts_fits_a_worker(fleet: offline.FleetSynthesis) -> None:
    found = {n: fleet_fit.Worker(s, base.from_synthesis(r.resources)) for n, (s, r) in fleet.workers.items()}
    assert len(fleet_fit.proof_requests(found)) == 12
    assert fleet_fit.misfits(found) == []


def test_a_planted_missing_local_queue_on_every_worker_is_a_fleet_misfit(fleet: offline.FleetSynthesis) -> None:
    found = {}
    for name, (spec, synthesis) in fleet.workers.items():
        records = [r for r in copy.deepcopy(synthesis.resources)
                   if not (r["type"].endswith(":LocalQueue") and r["inputs"]["metadata"]["namespace"] == "research")]
        found[name] = fleet_fit.Worker(spec, base.from_synthesis(records))
    misfits = fleet_fit.misfits(found)
    assert misfits and all(m.startswith("team research") and "fits no worker" in m for m in misfits)


def test_an_image_in_one_cloud_s_private_registry_is_refused_with_the_worker_that_cannot_pull_it() -> None:
    with pytest.raises(renderer.JobError) as caught:
        job.render(workers(), request(image="123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer:1"))
    assert caught.value.problems[0].startswith(
        f"--image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer:1 is in aws's private registry, which {GCP} cannot pull from")


def test_an_artifact_registry_image_is_fine_when_only_gke_workers_are_eligible() -> None:
    only_gcp = {GCP: workers()[GCP]}
    jobset, _ = job.render(only_gcp, request(image="us-central1-docker.pkg.dev/my-ml-prod/ml/trainer:1"))
    assert jobset["kind"] == "JobSet"


def test_a_gpu_model_no_worker_has_is_refused_with_each_worker_s_reason() -> None:
    with pytest.raises(renderer.JobError) as caught:
        job.render(workers(), request(gpu_model="B200"))
    assert caught.value.problems == [
        "--gpu-model: no worker can run 2 node(s) x 8 B200 GPU(s)",
        f"  {AWS}: no unshared pool of B200",
        f"  {GCP}: no unshared pool of B200",
    ]


def test_pools_of_one_model_named_differently_are_refused() -> None:
    platform = platform_of("prod-gcp")
    for pool in platform["nodePools"]:
        if pool["name"] == "h100-train":
            pool["name"] = "h100"
    for team in platform["scheduling"]["teams"]:
        team["quotas"] = {("h100" if k == "h100-train" else k): v for k, v in team["quotas"].items()}
    renamed = {AWS: workers()[AWS], GCP: parse_spec(platform, "stacks/Pulumi.prod-gcp.yaml", "us-central1")}
    with pytest.raises(renderer.JobError) as caught:
        job.render(renamed, request())
    assert "named differently" in caught.value.problems[0]


def test_the_cli_renders_a_fleet_job_and_refuses_a_pool_name(capsys: pytest.CaptureFixture[str]) -> None:
    base_args = ["job", str(REPO / "stacks" / "Pulumi.fleet.yaml"), "--nodes", "2", "--gpus-per-node", "8",
                 "--team", "research", "--tier", "production", "--image", "ghcr.io/example/trainer:1.0"]
    assert cli.main([*base_args, "--gpu-model", "H100-80GB", "--", *ARGS]) == 0
    assert "kind: JobSet" in capsys.readouterr().out
    assert cli.main([*base_args, "--pool", "h100-train", "--", *ARGS]) == 2
    assert "--pool: a fleet job chooses its pool" in capsys.readouterr().err

"""Offline synth: the real program under the SDK's mock engine, recorded as the engine sees it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import pytest
import yaml

from infra import cli, mock_outputs, program, synth

REPO = Path(__file__).resolve().parents[1]


class Box(pulumi.ComponentResource):
    def __init__(self, name: str) -> None:
        super().__init__("gpu-platform:test:Box", name)
        self.register_outputs({})


def three_clouds_program() -> None:
    """A program touching AWS, GCP and Kubernetes, with every recorded resource option."""
    box = Box("box")
    bucket = aws.s3.Bucket(
        "data",
        bucket="data-bucket",
        tags={"replicas": "3"},
        opts=pulumi.ResourceOptions(parent=box, protect=True, retain_on_delete=True),
    )
    cluster = aws.eks.Cluster(
        "eks",
        role_arn=bucket.arn,
        vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=["subnet-1"]),
        opts=pulumi.ResourceOptions(parent=box, depends_on=[bucket]),
    )
    gcp.storage.Bucket(
        "ckpt",
        location="US",
        opts=pulumi.ResourceOptions(
            ignore_changes=["labels"], delete_before_replace=True, replace_on_changes=["location"]
        ),
    )
    provider = k8s.Provider("k8s", kubeconfig=pulumi.Output.secret("kubeconfig-data"))
    k8s.core.v1.Namespace(
        "team-a",
        metadata=k8s.meta.v1.ObjectMetaArgs(name="team-a", labels={"team": "a"}),
        opts=pulumi.ResourceOptions(provider=provider),
    )
    k8s.core.v1.ResourceQuota(
        "team-a-gpus",
        metadata=k8s.meta.v1.ObjectMetaArgs(name="gpus", namespace="team-a"),
        spec=k8s.core.v1.ResourceQuotaSpecArgs(hard={"requests.nvidia.com/gpu": "8"}),
        opts=pulumi.ResourceOptions(provider=provider),
    )
    pulumi.export("endpoint", cluster.endpoint.apply(lambda e: f"resolved:{e}"))
    pulumi.export("gpus", 8)


@pytest.fixture(scope="module")
def recorded() -> synth.Synthesis:
    return synth.run(three_clouds_program, "proj", "test", {"aws:region": "us-west-2"})


def test_records_aws_gcp_and_kubernetes_resources(recorded: synth.Synthesis) -> None:
    assert [(r["type"], r["name"]) for r in recorded.resources] == [
        ("aws:eks/cluster:Cluster", "eks"),
        ("aws:s3/bucket:Bucket", "data"),
        ("gcp:storage/bucket:Bucket", "ckpt"),
        ("gpu-platform:test:Box", "box"),
        ("kubernetes:core/v1:Namespace", "team-a"),
        ("kubernetes:core/v1:ResourceQuota", "team-a-gpus"),
        ("pulumi:providers:kubernetes", "k8s"),
    ]


def test_records_parent_and_custom(recorded: synth.Synthesis) -> None:
    data = recorded.one("aws:s3/bucket:Bucket", "data")
    assert data["parent"] == "gpu-platform:test:Box::box"
    assert data["custom"] is True
    box = recorded.one("gpu-platform:test:Box", "box")
    assert box["parent"] is None and box["custom"] is False


def test_records_the_explicit_provider(recorded: synth.Synthesis) -> None:
    assert recorded.one("kubernetes:core/v1:Namespace", "team-a")["provider"] == "pulumi:providers:kubernetes::k8s"
    assert recorded.one("gcp:storage/bucket:Bucket", "ckpt")["provider"] is None


def test_records_resource_options(recorded: synth.Synthesis) -> None:
    data = recorded.one("aws:s3/bucket:Bucket", "data")["options"]
    assert data["protect"] is True and data["retainOnDelete"] is True
    eks = recorded.one("aws:eks/cluster:Cluster", "eks")["options"]
    assert eks["dependsOn"] == ["aws:s3/bucket:Bucket::data"]
    ckpt = recorded.one("gcp:storage/bucket:Bucket", "ckpt")["options"]
    assert ckpt["ignoreChanges"] == ["labels"]
    assert ckpt["deleteBeforeReplace"] is True
    assert ckpt["replaceOnChanges"] == ["location"]
    assert ckpt["protect"] is False


def test_inputs_are_camel_case_as_the_engine_receives_them(recorded: synth.Synthesis) -> None:
    eks = recorded.one("aws:eks/cluster:Cluster", "eks")["inputs"]
    assert eks["vpcConfig"] == {"subnetIds": ["subnet-1"]}
    # An output of another resource arrives resolved, from the mock outputs table.
    assert eks["roleArn"] == mock_outputs.resource_outputs("aws:s3/bucket:Bucket", "data", {"bucket": "data-bucket"})["arn"]


def test_secrets_are_masked(recorded: synth.Synthesis) -> None:
    assert recorded.one("pulumi:providers:kubernetes", "k8s")["inputs"]["kubeconfig"] == "[secret]"


def test_kubernetes_objects_are_the_declared_objects(recorded: synth.Synthesis) -> None:
    kinds = sorted(obj["kind"] for obj in recorded.kubernetes_objects())
    assert kinds == ["Namespace", "ResourceQuota"]


def test_exports_are_resolved_values(recorded: synth.Synthesis) -> None:
    # The apply ran: with preview=False mock outputs are known values.
    assert recorded.outputs["endpoint"] == "resolved:https://eks.eks.us-west-2.mock.internal"
    assert recorded.outputs["gpus"] == 8


def test_every_run_starts_from_a_clean_runtime() -> None:
    first = synth.run(three_clouds_program, "proj", "a", {})
    second = synth.run(three_clouds_program, "proj", "b", {})
    assert len(first.resources) == len(second.resources) == 7


def test_writes_resources_manifests_and_summary(tmp_path: Path) -> None:
    assert cli.main(["synth", "onprem", "--out", str(tmp_path)]) == 0
    out = tmp_path / "onprem"
    document = json.loads((out / "resources.json").read_text())
    assert set(document) == {"project", "stack", "resources"}
    assert (document["project"], document["stack"]) == ("gpu-platform", "onprem")
    for resource in document["resources"]:
        assert set(resource) == {"type", "name", "parent", "custom", "provider", "inputs", "options"}
        assert set(resource["options"]) == set(synth.OPTION_NAMES)
    manifests = sorted((out / "manifests").glob("*.yaml"))
    assert len(manifests) == sum(1 for r in document["resources"] if synth.is_kubernetes_object(r["type"]))
    for manifest in manifests:
        assert yaml.safe_load(manifest.read_text())["kind"]
    assert "| a100-train | A100-80GB | 8 | 4-4 | 32 | 32 |" in (out / "summary.md").read_text()


def test_whole_numbers_are_written_as_integers() -> None:
    result = synth.run(three_clouds_program, "proj", "ints", {})
    text = synth.files(result, "")["outputs.json"]
    assert '"gpus": 8' in text and "8.0" not in text


def test_output_is_byte_identical_across_runs(tmp_path: Path) -> None:
    for run in ("one", "two"):
        assert cli.main(["synth", "dev-aws", "--out", str(tmp_path / run)]) == 0
    first, second = tmp_path / "one" / "dev-aws", tmp_path / "two" / "dev-aws"
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files
    for name in files:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_summary_figures_come_from_the_catalog(tmp_path: Path) -> None:
    assert cli.main(["synth", "dev-aws", "--out", str(tmp_path)]) == 0
    summary = (tmp_path / "dev-aws" / "summary.md").read_text()
    # g6.xlarge: 1 L4 shared 4 ways, 0-4 nodes at $0.805/h.
    assert "| l4-shared | L4 | 1 | 0-4 | 4 | 16 | time-slicing x4 | spot | 0.00 | 3.22 |" in summary


def test_a_stack_file_path_outside_stacks_is_accepted(tmp_path: Path) -> None:
    stack_file = tmp_path / "Pulumi.lab2.yaml"
    stack_file.write_text((REPO / "stacks" / "Pulumi.onprem.yaml").read_text())
    assert cli.main(["synth", str(stack_file), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "lab2" / "resources.json").is_file()


def test_invalid_spec_exits_2_naming_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack_file = tmp_path / "Pulumi.bad.yaml"
    stack_file.write_text(
        (REPO / "stacks" / "Pulumi.onprem.yaml").read_text().replace("maxNodes: 4", "maxNodes: 5")
    )
    assert cli.main(["synth", str(stack_file), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "Pulumi.bad.yaml: platform.nodePools[0].maxNodes: existing nodes do not scale" in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists(), "nothing may be written for an invalid spec"


def test_unknown_gpu_platform_config_key_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stack_file = tmp_path / "Pulumi.typo.yaml"
    stack_file.write_text(
        (REPO / "stacks" / "Pulumi.onprem.yaml").read_text() + "  gpu-platform:platfrom: {}\n"
    )
    assert cli.main(["synth", str(stack_file)]) == 2
    assert "gpu-platform:platfrom: unknown key" in capsys.readouterr().err


def test_missing_stack_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["synth", "no-such-stack"]) == 2
    err = capsys.readouterr().err
    assert "Pulumi.no-such-stack.yaml: no such stack file" in err and "dev-aws" in err


def test_program_failure_exits_1_with_its_cause(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def broken() -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(program, "run", lambda trainer_context: broken())
    assert cli.main(["synth", "onprem", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "synth failed: RuntimeError: boom" in err and "Traceback" not in err


def test_console_script_runs_cleanly_end_to_end(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("gpu-platform")
    done = subprocess.run(
        [str(script), "synth", "dev-aws", "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "l4-shared" in done.stdout and "total" in done.stdout


def test_paths_under_the_project_root_are_recorded_relative_to_it(tmp_path: Path) -> None:
    def program_with_paths() -> None:
        aws.s3.Bucket("data", tags={"context": str(tmp_path / "training_images"), "root": str(tmp_path), "other": "/elsewhere"})
        pulumi.export("context", str(tmp_path / "training_images" / "Dockerfile"))

    result = synth.run(program_with_paths, "proj", "paths", {}, root=tmp_path)
    tags = result.one("aws:s3/bucket:Bucket", "data")["inputs"]["tags"]
    assert tags == {"context": "training_images", "root": ".", "other": "/elsewhere"}
    assert result.outputs["context"] == "training_images/Dockerfile"

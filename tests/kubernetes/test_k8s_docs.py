"""The scheduling guide's examples are real: valid spec sections, and a job the onprem stack admits."""

from __future__ import annotations

import re
import shlex
from typing import Any

import jsonschema
import pytest
import yaml
from k8s_support import REPO, crd_schema, onprem_platform, spec_of

from components.jobs import grace
from components.kubernetes.queues import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from infra import cli
from infra.synth import Synthesis
from trainer.config import PRESETS

GUIDE = REPO / "docs" / "scheduling.md"


def yaml_blocks() -> list[Any]:
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(), re.S)]


def guide_job() -> dict[str, Any]:
    [job] = [block for block in yaml_blocks() if "kind" in block]
    return job


def test_the_guide_s_stack_snippets_are_valid_scheduling_sections() -> None:
    snippets = [block["scheduling"] for block in yaml_blocks() if "scheduling" in block]
    assert len(snippets) == 2
    for scheduling in snippets:
        platform = onprem_platform()
        platform["scheduling"] = scheduling
        spec_of(platform)


def test_the_guide_s_job_validates_against_the_jobset_crd() -> None:
    job = guide_job()
    jsonschema.validate(job, crd_schema(job["apiVersion"], job["kind"]))


def test_the_guide_s_job_names_a_queue_and_tier_the_onprem_stack_has(onprem: Synthesis) -> None:
    job = guide_job()
    labels = job["metadata"]["labels"]
    objects = onprem.kubernetes_objects()
    local_queues = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects if o["kind"] == "LocalQueue"}
    assert (job["metadata"]["namespace"], labels[QUEUE_NAME_LABEL]) in local_queues
    workload_tiers = {o["metadata"]["name"] for o in objects if o["kind"] == "WorkloadPriorityClass"}
    assert labels[PRIORITY_CLASS_LABEL] in workload_tiers


def test_the_guide_s_pods_pick_a_pool_and_a_tier_the_onprem_stack_has(onprem: Synthesis) -> None:
    pod = guide_job()["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    objects = onprem.kubernetes_objects()
    assert pod["priorityClassName"] in {o["metadata"]["name"] for o in objects if o["kind"] == "PriorityClass"}
    flavors = [o["spec"]["nodeLabels"] for o in objects if o["kind"] == "ResourceFlavor"]
    assert pod["nodeSelector"] in flavors


def test_the_guide_s_job_is_what_its_gpu_platform_job_command_prints(capsys: pytest.CaptureFixture[str]) -> None:
    text = GUIDE.read_text().replace("\\\n", " ")
    [command] = [m.group(0).split("|")[0] for m in re.finditer(r"gpu-platform job onprem .*", text)]
    assert cli.main(shlex.split(command)[1:]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == guide_job()


def test_the_guide_s_grace_periods_are_the_defaults() -> None:
    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| (\d+) s \|$", GUIDE.read_text(), re.M)
    assert {preset: int(seconds) for preset, seconds in rows} == {p: grace.default_grace_period(p) for p in PRESETS}

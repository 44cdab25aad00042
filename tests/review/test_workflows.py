"""The GitOps workflows: they lint clean (yamllint) and match GitHub's workflow and action schemas
(check-jsonschema's vendored copies; actionlint's PyPI package downloads its binary at install
time, which this project cannot rely on), and they keep the promises docs/gitops.md makes: offline evidence on every pull request, real previews only for branches of this
repository, promotion dev -> staging -> prod with prod behind an approval, daily drift issues."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import REPO

WORKFLOWS = REPO / ".github" / "workflows"
ACTION = REPO / ".github" / "actions" / "pulumi-stack" / "action.yml"
SAME_REPO = "github.event.pull_request.head.repo.full_name == github.repository"


def load(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text())
    # PyYAML reads the bare key `on` as the boolean True (YAML 1.1).
    document["on"] = document.pop(True, document.get("on"))
    return document


def steps_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    return job["steps"]


def runs(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in steps_of(job))


def test_workflows_action_and_pack_file_pass_yamllint_strict() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "yamllint", "--strict", "-c", str(REPO / ".yamllint"), ".github", "policy/PulumiPolicy.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "schema, paths",
    [("vendor.github-workflows", sorted(WORKFLOWS.glob("*.yml"))), ("vendor.github-actions", [ACTION])],
    ids=["workflows", "action"],
)
def test_workflows_and_the_action_match_githubs_schemas(schema: str, paths: list[Path]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, *map(str, paths)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", sorted([*WORKFLOWS.glob("*.yml"), ACTION]), ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_release(path: Path) -> None:
    uses = re.findall(r"uses:\s*(\S+)", path.read_text())
    assert uses
    for ref in uses:
        assert ref.startswith("./") or re.search(r"@v\d+(\.\d+)*$", ref), ref


def test_pull_requests_get_tests_check_and_a_sticky_review_comment() -> None:
    offline = load(WORKFLOWS / "pr.yml")["jobs"]["offline"]
    commands = runs(offline)
    assert "make test" in commands
    assert ".venv/bin/gpu-platform check" in commands
    assert '.venv/bin/gpu-platform review --base "origin/${{ github.base_ref }}" --out review.md' in commands
    [checkout] = [s for s in steps_of(offline) if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout["with"]["fetch-depth"] == 0
    [comment] = [s for s in steps_of(offline) if s.get("uses", "").startswith("marocchino/sticky-pull-request-comment@")]
    assert comment["with"] == {"header": "gpu-platform-review", "path": "review.md"}
    assert SAME_REPO in comment["if"]


def test_real_previews_run_per_stack_only_for_branches_of_this_repository() -> None:
    jobs = load(WORKFLOWS / "pr.yml")["jobs"]
    preview = jobs["preview"]
    assert preview["if"] == SAME_REPO and jobs["stacks"]["if"] == SAME_REPO
    assert preview["permissions"]["id-token"] == "write"
    assert preview["strategy"]["matrix"] == "${{ fromJSON(needs.stacks.outputs.all) }}"
    [stack_step] = [s for s in steps_of(preview) if s.get("uses") == "./.github/actions/pulumi-stack"]
    assert stack_step["with"]["command"] == "preview"


def test_the_stack_action_uses_oidc_credentials_and_the_policy_pack() -> None:
    action = yaml.safe_load(ACTION.read_text())
    steps = {s.get("uses", "").split("@")[0]: s for s in action["runs"]["steps"]}
    assert steps["aws-actions/configure-aws-credentials"]["with"]["role-to-assume"] == "${{ inputs.aws-role-arn }}"
    assert "workload_identity_provider" in steps["google-github-actions/auth"]["with"]
    pulumi = steps["pulumi/actions"]
    assert pulumi["uses"] == "pulumi/actions@v7"
    assert pulumi["with"]["policyPacks"] == "policy"
    assert "aws-access-key-id" not in ACTION.read_text()


def test_merges_promote_dev_then_staging_then_prod_behind_an_approval() -> None:
    workflow = load(WORKFLOWS / "deploy.yml")
    assert workflow["on"]["push"]["branches"] == ["main"]
    jobs = workflow["jobs"]
    assert jobs["staging"]["needs"] == ["stacks", "dev"]
    assert jobs["prod"]["needs"] == ["stacks", "dev", "staging"]
    assert [jobs[env]["environment"] for env in ("dev", "staging", "prod")] == ["dev", "staging", "production"]
    for env in ("dev", "staging", "prod"):
        [up] = [s for s in steps_of(jobs[env]) if s.get("uses") == "./.github/actions/pulumi-stack"]
        assert up["with"]["command"] == "up"
        assert jobs[env]["strategy"]["matrix"] == f"${{{{ fromJSON(needs.stacks.outputs.{env}) }}}}"
    assert workflow["concurrency"]["cancel-in-progress"] is False


def test_a_failed_environment_stops_the_promotion() -> None:
    jobs = load(WORKFLOWS / "deploy.yml")["jobs"]
    for env in ("staging", "prod"):
        assert "!failure()" in jobs[env]["if"] and "!cancelled()" in jobs[env]["if"]


def test_drift_is_checked_daily_and_reported_as_an_issue() -> None:
    workflow = load(WORKFLOWS / "drift.yml")
    assert workflow["on"]["schedule"] == [{"cron": "17 5 * * *"}]
    drift = workflow["jobs"]["drift"]
    [preview] = [s for s in steps_of(drift) if s.get("uses") == "./.github/actions/pulumi-stack"]
    assert (preview["with"]["command"], preview["with"]["refresh"], preview["with"]["expect-no-changes"]) == ("preview", "true", "true")
    [issue] = [s for s in steps_of(drift) if "gh issue" in s.get("run", "")]
    assert issue["if"] == "failure() && steps.preview.outcome == 'failure'"
    assert "gh issue comment" in issue["run"] and "gh issue create" in issue["run"]
    assert drift["permissions"]["issues"] == "write"


@pytest.mark.parametrize("name", ["pr.yml", "deploy.yml", "drift.yml"])
def test_the_stack_matrix_step_runs_and_lists_the_fleet(name: str) -> None:
    jobs = load(WORKFLOWS / name)["jobs"]
    [step] = [s for s in steps_of(jobs["stacks"]) if s.get("id") == "matrix"]
    code = re.search(r"-c '(.*)'", step["run"], re.S)
    assert code is not None
    done = subprocess.run([sys.executable, "-c", code.group(1)], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "fleet-count=1" in done.stdout.splitlines()


def test_fleet_managers_are_updated_after_every_environment_through_their_context() -> None:
    jobs = load(WORKFLOWS / "deploy.yml")["jobs"]
    assert jobs["fleet"]["needs"] == ["stacks", "dev", "staging", "prod"]
    assert jobs["fleet"]["strategy"]["matrix"] == "${{ fromJSON(needs.stacks.outputs.fleet) }}"
    assert "!failure()" in jobs["fleet"]["if"]
    [kubeconfig] = [s for s in load(ACTION)["runs"]["steps"] if "Kubeconfig" in s.get("name", "")]
    assert "inputs.cloud == 'fleet'" in kubeconfig["if"]


def _environment_of(expression: str, environment: str) -> str:
    """The GitHub environment a job's `environment` names for a matrix row's environment: a
    literal, or `matrix.environment == 'X' && 'Y' || matrix.environment`."""
    mapped = re.fullmatch(r"\$\{\{ matrix\.environment == '(\w+)' && '(\w+)' \|\| matrix\.environment \}\}", expression)
    if mapped is None:
        return expression
    return mapped.group(2) if environment == mapped.group(1) else environment


@pytest.mark.parametrize("environment", ["dev", "staging", "prod"])
def test_a_fleet_manager_deploys_in_the_github_environment_of_its_own_environment(environment: str) -> None:
    jobs = load(WORKFLOWS / "deploy.yml")["jobs"]
    assert _environment_of(jobs["fleet"]["environment"], environment) == jobs[environment]["environment"]


@pytest.mark.parametrize(("name", "job"), [("deploy.yml", "dev"), ("deploy.yml", "staging"), ("deploy.yml", "prod"), ("deploy.yml", "fleet"), ("pr.yml", "preview"), ("drift.yml", "drift")])
def test_jobs_that_reach_the_clusters_run_on_the_configured_runner(name: str, job: str) -> None:
    assert load(WORKFLOWS / name)["jobs"][job]["runs-on"] == "${{ vars.GPU_PLATFORM_RUNNER || 'ubuntu-latest' }}"

"""`gpu-platform check`: the policy rules and Kubernetes schema validation over synthesized stacks.

What a pull request must pass before anyone looks at it, with no cloud credentials: every stack
synthesizes, every policy rule (components.checks.rules, the same the CrossGuard pack runs in a real
preview) holds or is waived in the stack file, and every Kubernetes object the program declares
matches the API schema of the stack's Kubernetes version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes_validate

from components.checks.rules import base, registry
from components.spec import PlatformSpec
from infra import stackfile, synth
from infra.tools import schemas

SCHEMA_RULE = "kubernetes-schema"


@dataclass(frozen=True)
class StackReport:
    stack: str
    project: str
    findings: list[base.Finding]
    # Kubernetes objects validated, and custom resources (no bundled schema) left to the tests.
    validated: int
    skipped_custom: int

    @property
    def stack_resource(self) -> str:
        """`type::name` of the stack itself, for violations of the stack as a whole."""
        return f"{synth.STACK_TYPE}::{self.project}-{self.stack}"

    def lines(self) -> list[str]:
        """One `stack: rule-id resource: message` line per finding."""
        return [
            f"{self.stack}: {f.rule} {f.violation.resource or self.stack_resource}: {f.message}"
            for f in self.findings
        ]

    @property
    def blocking(self) -> bool:
        return any(f.blocking for f in self.findings)


def schema_findings(synthesis: synth.Synthesis, kubernetes_version: str) -> tuple[list[base.Finding], int, int]:
    """Findings for objects the API server would reject; custom resources are counted, not checked.

    kubernetes-validate bundles the core API schemas only. The Kueue and JobSet custom resources
    are validated against their CRD schemas by the Kubernetes layer's tests.
    """
    findings: list[base.Finding] = []
    validated = skipped = 0
    for record in synthesis.resources:
        if not synth.is_kubernetes_object(record["type"]):
            continue
        try:
            problem = schema_problem(_unmasked(record["inputs"]), kubernetes_version)
        except kubernetes_validate.SchemaNotFoundError:
            skipped += 1
            continue
        validated += 1
        if problem:
            key = f"{record['type']}::{record['name']}"
            findings.append(base.Finding(base.Violation(SCHEMA_RULE, key, problem), "mandatory"))
    return findings, validated, skipped


def _unmasked(obj: Any) -> Any:
    """The object without the fields synth masks as secret (`[secret]`, e.g. a Secret's
    `stringData` built from a secret output): their values are not there to validate."""
    if isinstance(obj, dict):
        return {k: _unmasked(v) for k, v in obj.items() if v != "[secret]"}
    if isinstance(obj, list):
        return [_unmasked(v) for v in obj]
    return obj


def schema_problem(obj: dict[str, Any], kubernetes_version: str) -> str | None:
    """The first schema error of `obj` (unknown fields included), or None when it is valid.

    Raises kubernetes_validate.SchemaNotFoundError for kinds without a bundled schema.
    """
    try:
        schemas.validate(obj, kubernetes_version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path) or "(object)"
        return f"{where}: {exc.message}"
    return None


def check_synthesis(spec: PlatformSpec, synthesis: synth.Synthesis) -> StackReport:
    ctx = base.context_of(spec)
    findings = registry.evaluate(base.from_synthesis(synthesis.resources), ctx)
    schema, validated, skipped = schema_findings(synthesis, spec.cluster.kubernetes_version)
    return StackReport(synthesis.stack, synthesis.project, findings + schema, validated, skipped)


def summary(reports: list[StackReport], invalid: int = 0) -> str:
    """The closing line: stacks checked (and how many were invalid), findings by level."""
    counts = {level: sum(1 for r in reports for f in r.findings if f.level == level) for level in ("mandatory", "advisory", "overridden")}
    validated = sum(r.validated for r in reports)
    skipped = sum(r.skipped_custom for r in reports)
    return (
        f"checked {len(reports)} stack(s){f', {invalid} invalid' if invalid else ''}: {counts['mandatory']} mandatory, {counts['advisory']} advisory,"
        f" {counts['overridden']} overridden; {validated} Kubernetes object(s) validated,"
        f" {skipped} custom resource(s) left to their CRD schema tests"
    )


ENVIRONMENTS = ("dev", "staging", "prod")


def stack_matrix(root: Path | None = None) -> dict[str, list[dict[str, str]]]:
    """The stacks for the GitOps workflows' job matrices (stack, cloud, environment, region):
    every stack under `all` (previews, drift), the cluster stacks of each environment under its
    name, in promotion order, and the fleet managers under `fleet`: a manager's StackReferences
    read its workers' outputs, so it is updated after every cluster stack, whatever its
    environment (docs/gitops.md)."""
    root = root or stackfile.project_root()
    rows: list[dict[str, str]] = []
    for name in stackfile.all_stacks(root):
        stack_file = stackfile.read(name, root)
        spec = stack_file.spec()
        region = stack_file.config.get(f"{spec.cloud}:region", "") if spec.cloud != "existing" else ""
        rows.append({"stack": name, "cloud": spec.cloud, "environment": spec.environment, "region": str(region)})
    # A manager reaches its cluster through a kubeconfig context, as an existing cluster does.
    fleet = [
        {"stack": name, "cloud": "fleet", "environment": stackfile.read(name, root).fleet_spec().environment, "region": ""}
        for name in stackfile.fleet_stacks(root)
    ]
    matrix: dict[str, list[dict[str, str]]] = {"all": rows + fleet}
    for environment in ENVIRONMENTS:
        matrix[environment] = [row for row in rows if row["environment"] == environment]
    matrix["fleet"] = fleet
    return matrix


def github_outputs(matrix: dict[str, list[dict[str, str]]]) -> str:
    """`$GITHUB_OUTPUT` lines: `<group>={"include": [...]}` and `<group>-count=<n>` per group
    (a job must skip an empty matrix: GitHub rejects a matrix without rows)."""
    lines = []
    for group, rows in matrix.items():
        lines.append(f"{group}={json.dumps({'include': rows}, sort_keys=True)}")
        lines.append(f"{group}-count={len(rows)}")
    return "\n".join(lines) + "\n"

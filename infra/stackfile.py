"""Stack files (stacks/Pulumi.<stack>.yaml): finding, reading and turning them into a spec.

Pulumi itself reads these files in a real `pulumi up`; the offline tools read them here the
same way, so a spec error names the same file and field either way.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.spec import (
    CONFIG_KEY,
    CONFIG_NAMESPACE,
    PlatformSpec,
    Problem,
    SpecError,
    parse_spec,
    region_namespace,
    region_problems,
)
from infra import yamlfile

STACKS_DIR = "stacks"

# Pulumi's own rule for a stack name: 1-100 letters, digits, `_`, `.` or `-` (pulumi/pulumi
# pkg/backend, validateStackName: `^[A-Za-z0-9_.-]{1,100}$`). The name also names the synth
# output folder, so `.` and `..`, which Pulumi's pattern lets through, are refused as well.
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
PATH_STEPS = (".", "..")


class StackFileError(Exception):
    """A stack file that cannot be read at all (missing, not YAML): not a spec problem."""


@dataclass(frozen=True)
class StackFile:
    path: Path
    stack: str
    config: dict[str, Any]

    @property
    def source(self) -> str:
        """The path as error messages show it (relative to the current folder below it)."""
        return yamlfile.shown(self.path)

    def pulumi_config(self) -> dict[str, str]:
        """Config as the engine hands it to a program: objects as JSON strings."""
        return {
            key: value if isinstance(value, str) else json.dumps(value)
            for key, value in self.config.items()
        }

    def spec(self) -> PlatformSpec:
        """The validated spec; a SpecError lists every problem of the file at once: the config
        keys around the spec (unknown `gpu-platform:*` keys, the provider's region and project)
        and everything in the spec itself."""
        unknown = sorted(
            key
            for key in self.config
            if isinstance(key, str)
            and key.startswith(f"{CONFIG_NAMESPACE}:")
            and key != f"{CONFIG_NAMESPACE}:{CONFIG_KEY}"
        )
        problems = [
            Problem(key, f"unknown key; the only {CONFIG_NAMESPACE} key is {CONFIG_NAMESPACE}:{CONFIG_KEY}")
            for key in unknown
        ]
        raw = self.config.get(f"{CONFIG_NAMESPACE}:{CONFIG_KEY}")
        namespace = region_namespace(raw)
        if namespace == "gcp" and not isinstance(self.config.get("gcp:project"), str):
            problems.append(Problem("gcp:project", "required for cloud: gcp (the project the program builds in)"))
        if namespace:
            problems += region_problems(namespace, self.config.get(f"{namespace}:region"))
        try:
            spec = parse_spec(raw, self.source, self.region(raw))
        except SpecError as exc:
            raise SpecError(self.source, problems + exc.problems) from None
        if problems:
            raise SpecError(self.source, problems)
        return spec

    def region(self, raw: Any) -> str | None:
        """The region of the spec's cloud (`aws:region` or `gcp:region`) as the program reads it,
        when it is one the cloud has (zone rules are skipped otherwise)."""
        namespace = region_namespace(raw)
        value = self.config.get(f"{namespace}:region") if namespace else None
        return value if namespace and not region_problems(namespace, value) else None


def project_root(start: Path | None = None) -> Path:
    """The nearest folder holding Pulumi.yaml, from the current directory up."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "Pulumi.yaml").is_file():
            return folder
    raise StackFileError(f"no Pulumi.yaml in {here} or above: run this inside the gpu-platform repository")


def project_name(root: Path) -> str:
    path = root / "Pulumi.yaml"
    document = yamlfile.load(path)
    if not isinstance(document, dict) or not isinstance(document.get("name"), str):
        raise StackFileError(f"{yamlfile.shown(path)}: expected a mapping with a `name:` string (the project's name)")
    return document["name"]


def resolve(ref: str, root: Path) -> Path:
    """A stack name (`dev-aws`) means stacks/Pulumi.dev-aws.yaml; anything else is a path."""
    candidate = Path(ref)
    if candidate.suffix in (".yaml", ".yml") or os.sep in ref:
        return candidate
    return root / STACKS_DIR / f"Pulumi.{ref}.yaml"


def stack_name(path: Path) -> str:
    """The stack a file is for (`Pulumi.<stack>.yaml`), refused unless Pulumi accepts the name."""
    name = path.name
    if not (name.startswith("Pulumi.") and name.endswith((".yaml", ".yml"))):
        raise StackFileError(f"{yamlfile.shown(path)}: a stack file is named Pulumi.<stack>.yaml")
    stack = name.removeprefix("Pulumi.").rsplit(".", 1)[0]
    problem = stack_name_problem(stack)
    if problem:
        raise StackFileError(f"{yamlfile.shown(path)}: {problem}")
    return stack


def stack_name_problem(stack: str) -> str | None:
    """Why `stack` is not a stack name, or None when it is one."""
    if STACK_NAME.fullmatch(stack) and stack not in PATH_STEPS:
        return None
    return (
        f"stack name {stack!r} is not allowed: a stack name is 1-100 letters, digits, '_', '.' or '-',"
        " and not '.' or '..'"
    )


def read(ref: str, root: Path) -> StackFile:
    path = resolve(ref, root)
    stack = stack_name(path)
    if path.is_dir():
        raise StackFileError(f"{yamlfile.shown(path)}: a folder, not a stack file")
    if not path.exists():
        known = ", ".join(_stem(p) for p in stack_files(root)) or "none"
        raise StackFileError(f"{yamlfile.shown(path)}: no such stack file (stacks here: {known})")
    document = yamlfile.load(path)
    if document is None:
        document = {}
    if not isinstance(document, dict) or not isinstance(document.get("config", {}), dict):
        raise StackFileError(f"{yamlfile.shown(path)}: expected a mapping with a `config:` mapping")
    return StackFile(path=path, stack=stack, config=dict(document.get("config") or {}))


def stack_files(root: Path) -> list[Path]:
    """The stack files under the project's stacks/, sorted."""
    return sorted((root / STACKS_DIR).glob("Pulumi.*.yaml"))


def _stem(path: Path) -> str:
    return path.name.removeprefix("Pulumi.").rsplit(".", 1)[0]


def all_stacks(root: Path) -> list[str]:
    """The names of the project's stacks; a file whose name is not a stack name is an error."""
    return [stack_name(p) for p in stack_files(root)]

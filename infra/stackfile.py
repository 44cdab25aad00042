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
    control_character_problems,
    parse_spec,
    region_namespace,
    region_problems,
)
from components.spec.fleet import FleetStackSpec, is_fleet, parse_fleet_spec
from infra import yamlfile

STACKS_DIR = "stacks"
# The Pulumi project's name (Pulumi.yaml `name`), for a stack file outside any checkout.
PROJECT_NAME = "gpu-platform"

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
        for key, value in self.config.items():
            problems += control_character_problems(key, repr(key))
            if key != f"{CONFIG_NAMESPACE}:{CONFIG_KEY}":
                problems += control_character_problems(value, str(key))
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

    @property
    def is_fleet(self) -> bool:
        """A fleet manager stack (`cloud: fleet`), whose spec is a FleetStackSpec."""
        return is_fleet(self.config.get(f"{CONFIG_NAMESPACE}:{CONFIG_KEY}"))

    def fleet_spec(self) -> FleetStackSpec:
        """The validated manager spec; other `gpu-platform:*` keys are errors here too."""
        unknown = sorted(
            key for key in self.config
            if isinstance(key, str) and key.startswith(f"{CONFIG_NAMESPACE}:") and key != f"{CONFIG_NAMESPACE}:{CONFIG_KEY}"
        )
        problems = [Problem(key, f"unknown key; the only {CONFIG_NAMESPACE} key is {CONFIG_NAMESPACE}:{CONFIG_KEY}") for key in unknown]
        try:
            spec = parse_fleet_spec(self.config.get(f"{CONFIG_NAMESPACE}:{CONFIG_KEY}"), self.source)
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


def find_root(start: Path) -> Path | None:
    """The project folder: the nearest folder holding Pulumi.yaml, from `start` up; None
    outside a checkout."""
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / "Pulumi.yaml").is_file():
            return folder
    return None


def project_root(start: Path | None = None) -> Path:
    """The project folder above `start` (the current folder), for what needs a checkout."""
    here = start or Path.cwd()
    root = find_root(here)
    if root is None:
        raise StackFileError(f"no Pulumi.yaml in {here.resolve()} or above: run this inside a gpu-platform checkout")
    return root


def root_for(ref: str) -> Path | None:
    """The project a stack reference belongs to: for a path, the checkout the file lies in (None
    when it lies in none: an installed package works on its own); for a name, the checkout
    around the current folder, whose stacks/ holds it."""
    if is_path(ref):
        return find_root(Path(ref).parent)
    root = find_root(Path.cwd())
    if root is None:
        raise StackFileError(
            f"{ref}: a stack name needs a gpu-platform checkout (Pulumi.yaml) here or above;"
            f" outside one, give the stack file's path (e.g. ./Pulumi.{ref}.yaml)"
        )
    return root


def project_name(root: Path | None) -> str:
    """The Pulumi project's name: from the checkout's Pulumi.yaml, or this package's own."""
    if root is None:
        return PROJECT_NAME
    path = root / "Pulumi.yaml"
    document = yamlfile.load(path)
    if not isinstance(document, dict) or not isinstance(document.get("name"), str):
        raise StackFileError(f"{yamlfile.shown(path)}: expected a mapping with a `name:` string (the project's name)")
    return document["name"]


def is_path(ref: str) -> bool:
    """A stack reference is a path when it names a YAML file or a folder; else a stack name."""
    return Path(ref).suffix in (".yaml", ".yml") or os.sep in ref


def resolve(ref: str, root: Path | None) -> Path:
    """A stack name (`dev-aws`) means <root>/stacks/Pulumi.dev-aws.yaml; anything else is a path."""
    if is_path(ref):
        return Path(ref)
    if root is None:
        raise StackFileError(f"{ref}: a stack name needs a gpu-platform checkout; give the stack file's path")
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


def read(ref: str, root: Path | None) -> StackFile:
    path = resolve(ref, root)
    stack = stack_name(path)
    if path.is_dir():
        raise StackFileError(f"{yamlfile.shown(path)}: a folder, not a stack file")
    if not path.exists():
        known = ", ".join(_stem(p) for p in stack_files(root)) if root else ""
        raise StackFileError(f"{yamlfile.shown(path)}: no such stack file (stacks here: {known or 'none'})")
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
    """The names of the project's cluster stacks; a file whose name is not a stack name is an
    error. Fleet manager stacks (`cloud: fleet`) are listed by `fleet_stacks`."""
    return [stack_name(p) for p in stack_files(root) if not is_fleet_file(p)]


def fleet_stacks(root: Path) -> list[str]:
    """The names of the project's fleet manager stacks (docs/fleet.md)."""
    return [stack_name(p) for p in stack_files(root) if is_fleet_file(p)]


def is_fleet_file(path: Path) -> bool:
    try:
        document = yamlfile.load(path)
    except yamlfile.YamlError:
        return False
    config = document.get("config") if isinstance(document, dict) else None
    return isinstance(config, dict) and is_fleet(config.get(f"{CONFIG_NAMESPACE}:{CONFIG_KEY}"))

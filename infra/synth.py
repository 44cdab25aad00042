"""Offline synth: run the real program in-process against the Pulumi SDK's mock engine.

The mock monitor sees every RegisterResource request the program makes: type, name, parent,
provider, inputs and resource options. We record them as the engine would receive them and
write them out sorted, so the same spec always gives byte-identical files to diff in review.
Runs with preview=False, so every `apply` runs on resolved values.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml
from google.protobuf import json_format
from pulumi.runtime import mocks, settings, stack as runtime_stack
from pulumi.runtime.config import set_all_config
from pulumi.runtime.sync_await import _sync_await

from infra import collector, mock_outputs

STACK_TYPE = "pulumi:pulumi:Stack"

# Markers the Pulumi wire format uses inside property values (sdk/proto: "special signatures").
_SIG = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
_RESOURCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"

# Resource options recorded for each resource, by the names review and policies use.
OPTION_NAMES = ("protect", "ignoreChanges", "dependsOn", "deleteBeforeReplace", "retainOnDelete", "replaceOnChanges")


@dataclass
class Synthesis:
    """What one program run declared."""

    project: str
    stack: str
    resources: list[dict[str, Any]]
    outputs: dict[str, Any] = field(default_factory=dict)
    # The outputs with secrets in the clear: what a StackReference to this stack reads (a fleet
    # manager's synthesis, infra.offline). Never written to the output folder.
    revealed_outputs: dict[str, Any] = field(default_factory=dict, repr=False)

    def by_type(self, type_token: str) -> list[dict[str, Any]]:
        return [r for r in self.resources if r["type"] == type_token]

    def one(self, type_token: str, name: str) -> dict[str, Any]:
        found = [r for r in self.by_type(type_token) if r["name"] == name]
        if len(found) != 1:
            raise KeyError(f"{type_token}::{name}: found {len(found)}")
        return found[0]

    def kubernetes_objects(self) -> list[dict[str, Any]]:
        """Every Kubernetes object declared directly (Helm releases and providers excluded)."""
        return [r["inputs"] for r in self.resources if is_kubernetes_object(r["type"])]


def is_kubernetes_object(type_token: str) -> bool:
    return (
        type_token.startswith("kubernetes:")
        and not type_token.startswith(("kubernetes:helm.sh/", "kubernetes:yaml", "kubernetes:kustomize"))
    )


def _urn_key(urn: str) -> str:
    """`type::name` of a URN (urn:pulumi:stack::project::parent$type::name)."""
    parts = urn.split("::")
    return f"{parts[2].split('$')[-1]}::{parts[3]}"


def _clean(value: Any) -> Any:
    """Wire values made readable and stable: whole floats as ints, secrets masked, refs named."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        sig = value.get(_SIG)
        if sig == _SECRET_SIG:
            return "[secret]"
        if sig == _RESOURCE_SIG:
            return _urn_key(value["urn"])
        return {k: _clean(v) for k, v in value.items()}
    if value == _UNKNOWN:
        return "[unknown]"
    return value


def _reveal(value: Any) -> Any:
    """Wire values with each secret replaced by the value it wraps."""
    if isinstance(value, list):
        return [_reveal(v) for v in value]
    if isinstance(value, dict):
        if value.get(_SIG) == _SECRET_SIG:
            return _reveal(value.get("value"))
        return {k: _reveal(v) for k, v in value.items()}
    return value


def secret_output_names(synthesis: Synthesis) -> list[str]:
    """The stack outputs that are secret (masked in `outputs`)."""
    return sorted(name for name, value in synthesis.outputs.items() if value == "[secret]")


class _Mocks(mocks.Mocks):
    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        return f"{args.name}-id", {**args.inputs, **mock_outputs.resource_outputs(args.typ, args.name, args.inputs)}

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        # No failures: an empty list, as the SDK's mock monitor iterates it (None raises).
        return mock_outputs.call_result(args.token, dict(args.args)), []


class RecordingMonitor(mocks.MockMonitor):
    """The SDK's mock monitor, plus a record of each registration and the stack's outputs."""

    def __init__(self) -> None:
        super().__init__(_Mocks())
        self.requests: list[tuple[str, Any]] = []
        self.stack_outputs: dict[str, Any] = {}
        self.revealed_outputs: dict[str, Any] = {}
        self._lock = threading.Lock()

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.type != STACK_TYPE:
            with self._lock:
                self.requests.append((response.urn, request))
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:
        if _urn_key(request.urn).startswith(f"{STACK_TYPE}::"):
            self.stack_outputs = _clean(json_format.MessageToDict(request.outputs))
            self.revealed_outputs = _clean(_reveal(json_format.MessageToDict(request.outputs)))
        return super().RegisterResourceOutputs(request)

    def recorded(self) -> list[dict[str, Any]]:
        keys = {urn: _urn_key(urn) for urn, _ in self.requests}
        providers = {f"{urn}::{req.name}-id": keys[urn] for urn, req in self.requests}
        out = []
        for urn, req in self.requests:
            parent = keys.get(req.parent) if req.parent else None
            out.append(
                {
                    "type": req.type,
                    "name": req.name,
                    "parent": parent,
                    "custom": bool(req.custom),
                    "provider": providers.get(req.provider) if req.provider else None,
                    "inputs": _clean(json_format.MessageToDict(req.object)),
                    "options": {
                        "protect": bool(req.protect),
                        "ignoreChanges": sorted(req.ignoreChanges),
                        "dependsOn": sorted({keys.get(d) or d for d in req.dependencies}),
                        "deleteBeforeReplace": bool(req.deleteBeforeReplace),
                        "retainOnDelete": bool(req.retainOnDelete),
                        "replaceOnChanges": sorted(req.replaceOnChanges),
                    },
                }
            )
        return sorted(out, key=lambda r: (r["type"], r["name"]))


def run(
    program: Callable[[], None], project: str, stack: str, config: dict[str, str], root: Path | None = None
) -> Synthesis:
    """Run `program` once under mocks with `config`; every run starts from a clean runtime.

    Paths under the project `root` (the trainer's build context) are recorded relative to it,
    so a checkout synthesizes the same wherever it is (review compares two checkouts)."""
    # 1.85 s instead of 2.73 s of CPU for benchmarks/simulate.py's 50-pool stack (infra.collector).
    with collector.paused():
        return _run(program, project, stack, config, root)


def _run(
    program: Callable[[], None], project: str, stack: str, config: dict[str, str], root: Path | None
) -> Synthesis:
    _open_event_loop()
    settings.reset_options(project=project, stack=stack, preview=False)
    set_all_config(config)
    monitor = RecordingMonitor()
    mocks.set_mocks(monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor)
    # set_mocks registers a root stack that has already finished; a fresh one, as in a real
    # run, collects the program's exports.
    settings.ROOT.set(None)
    try:
        _sync_await(runtime_stack.run_in_stack(program))
    finally:
        settings.ROOT.set(None)
    if root is None:
        return Synthesis(project, stack, monitor.recorded(), monitor.stack_outputs, monitor.revealed_outputs)
    top = str(root.resolve())
    return Synthesis(
        project,
        stack,
        _relative(monitor.recorded(), top),
        _relative(monitor.stack_outputs, top),
        _relative(monitor.revealed_outputs, top),
    )


def _relative(value: Any, top: str) -> Any:
    """`value` with every string that is the folder `top` or a path below it made relative to it."""
    if isinstance(value, str):
        if value == top:
            return "."
        return value.removeprefix(top + os.sep) if value.startswith(top + os.sep) else value
    if isinstance(value, list):
        return [_relative(v, top) for v in value]
    if isinstance(value, dict):
        return {k: _relative(v, top) for k, v in value.items()}
    return value


def _open_event_loop() -> None:
    """The SDK runs on the thread's event loop; a previous command may have closed it."""
    try:
        if not asyncio.get_event_loop().is_closed():
            return
    except RuntimeError:
        pass
    asyncio.set_event_loop(asyncio.new_event_loop())


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def manifest_filename(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace") or "cluster"
    return f"{obj.get('kind', 'Object')}_{namespace}_{metadata.get('name', 'unnamed')}.yaml".lower()


def files(synthesis: Synthesis, summary: str) -> dict[str, str]:
    """What one synth writes, by path in the stack's output folder: resources.json,
    outputs.json, one manifests/*.yaml per Kubernetes object, and summary.md."""
    document = {"project": synthesis.project, "stack": synthesis.stack, "resources": synthesis.resources}
    out = {"resources.json": _json(document), "outputs.json": _json(synthesis.outputs), "summary.md": summary}
    for obj in synthesis.kubernetes_objects():
        out[f"manifests/{manifest_filename(obj)}"] = yaml.safe_dump(obj, sort_keys=True)
    return out

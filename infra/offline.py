"""A stack synthesized offline: the stack file read and checked, then the real program run on it
under the Pulumi SDK's mock engine (infra.synth). Every command and the review's snapshots of
both trees synthesize through here."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Mapping

from components import trainer_image
from components.spec import PlatformSpec, Problem, SpecError
from components.spec.fleet import FleetStackSpec, worker_stack
from infra import mock_outputs, program, stackfile, synth


def synthesize(
    ref: str, root: Path | None = None
) -> tuple[stackfile.StackFile, PlatformSpec, synth.Synthesis]:
    """Check the stack file, then run the program on it. Raises SpecError before any resource.

    `root` is the project folder; by default the checkout the stack file lies in (for a path)
    or the one around the current folder (for a name), and None outside any checkout.
    """
    if root is None:
        root = stackfile.root_for(ref)
    stack_file, spec = checked(ref, root)
    context = trainer_image.context_of(root)
    try:
        result = synth.run(
            functools.partial(program.run, context),
            stackfile.project_name(root),
            stack_file.stack,
            stack_file.pulumi_config(),
            root,
        )
    except SpecError as exc:
        # Problems only the (mock) cloud reveals, such as zones without the instance type.
        raise SpecError(stack_file.source, exc.problems) from None
    return stack_file, spec, result


def checked(ref: str, root: Path | None) -> tuple[stackfile.StackFile, PlatformSpec]:
    """The stack file read and its spec checked, as a synthesis does before the program runs:
    raises the StackFileError or SpecError the synthesis would."""
    stack_file = stackfile.read(ref, root)
    spec = stack_file.spec()
    if spec.trainer.image == "build" and spec.cloud != "existing" and trainer_image.context_of(root) is None:
        raise stackfile.StackFileError(f"{stack_file.source}: {program.NO_TRAINER_CONTEXT}")
    return stack_file, spec


@dataclasses.dataclass(frozen=True)
class FleetSynthesis:
    """A manager stack synthesized over its workers' own syntheses."""

    stack_file: stackfile.StackFile
    spec: FleetStackSpec
    synthesis: synth.Synthesis
    # Per worker (its fully qualified stack name): its spec and its synthesis.
    workers: dict[str, tuple[PlatformSpec, synth.Synthesis]]


def synthesize_fleet(
    ref: str, root: Path | None = None, known: Mapping[Path, tuple[PlatformSpec, synth.Synthesis]] | None = None
) -> FleetSynthesis:
    """Synthesize each worker, then the manager with its StackReferences answered from the
    workers' outputs. In-process and in that order, so the answer is always the checkout's own
    (never a stale build/synth folder) and the same checkout gives the same files.

    A worker's stack file is the checkout's Pulumi.<stack>.yaml for the stack part of its name.
    `known` holds syntheses already made by this checkout's program (`check` of every stack
    synthesizes the workers anyway), by resolved stack file path; a worker found there is not
    synthesized again."""
    if root is None:
        root = stackfile.root_for(ref)
    stack_file = stackfile.read(ref, root)
    spec = stack_file.fleet_spec()
    workers: dict[str, tuple[PlatformSpec, synth.Synthesis]] = {}
    problems: list[Problem] = []
    for i, worker in enumerate(spec.fleet.workers):
        at = f"platform.fleet.workers[{i}]"
        try:
            path = stackfile.resolve(worker_stack(worker), root).resolve()
            if known is not None and path in known:
                worker_spec, result = known[path]
            else:
                _, worker_spec, result = synthesize(worker_stack(worker), root)
        except stackfile.StackFileError as exc:
            problems.append(Problem(at, f"{worker}: {exc}"))
            continue
        if not worker_spec.fleet.worker:
            problems.append(Problem(at, f"{worker}: its stack file does not set platform.fleet.worker: true"))
            continue
        workers[worker] = (worker_spec, result)
    if problems:
        raise SpecError(stack_file.source, problems)
    mock_outputs.answer_stack_references(
        {w: r.revealed_outputs for w, (_, r) in workers.items()},
        {w: synth.secret_output_names(r) for w, (_, r) in workers.items()},
    )
    try:
        result = synth.run(program.main_fleet, stackfile.project_name(root), stack_file.stack, stack_file.pulumi_config(), root)
    finally:
        mock_outputs.answer_stack_references({}, {})
    return FleetSynthesis(stack_file, spec, result, workers)

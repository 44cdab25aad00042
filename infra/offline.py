"""A stack synthesized offline: the stack file read and checked, then the real program run on it
under the Pulumi SDK's mock engine (infra.synth). Every command and the review's snapshots of
both trees synthesize through here."""

from __future__ import annotations

import functools
from pathlib import Path

from components import trainer_image
from components.spec import PlatformSpec, SpecError
from infra import program, stackfile, synth


def synthesize(
    ref: str, root: Path | None = None
) -> tuple[stackfile.StackFile, PlatformSpec, synth.Synthesis]:
    """Check the stack file, then run the program on it. Raises SpecError before any resource.

    `root` is the project folder; by default the checkout the stack file lies in (for a path)
    or the one around the current folder (for a name), and None outside any checkout.
    """
    if root is None:
        root = stackfile.root_for(ref)
    stack_file = stackfile.read(ref, root)
    spec = stack_file.spec()
    context = trainer_image.context_of(root)
    if spec.trainer.image == "build" and spec.cloud != "existing" and context is None:
        raise stackfile.StackFileError(f"{stack_file.source}: {program.NO_TRAINER_CONTEXT}")
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

"""Trainer arguments checked with the trainer's own parser, before a job is submitted.

`trainer.config.build_parser()` is the trainer's command line (stdlib only), so the platform
reads the very flags, types, choices and ranges the pods will parse. argparse stops at the first
error; to report every problem at once, the arguments are walked against the parser's actions
here, and then parsed for real (which also applies the trainer's checks beyond argparse: the
sequence length of the preset, the batch arithmetic of the world size, and, when --data is a
folder this machine can read, the data against the preset), so the two cannot disagree about an
argument list that passes.
"""

from __future__ import annotations

import argparse
import contextlib
import io

from trainer import config as trainer_config
from trainer import memory as trainer_memory
from trainer import meta as trainer_meta

COMMAND = "train"


def _train_parser() -> argparse.ArgumentParser:
    parser = trainer_config.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[COMMAND]
    raise AssertionError("the trainer's parser has a `train` command")


def _option(parser: argparse.ArgumentParser, flag: str) -> tuple[argparse.Action | None, str | None]:
    """The action `flag` names, exactly or as an unambiguous prefix (argparse's allow_abbrev)."""
    if flag in parser._option_string_actions:
        return parser._option_string_actions[flag], None
    matches = {a for option, a in parser._option_string_actions.items() if option.startswith(flag)}
    if len(matches) == 1:
        return matches.pop(), None
    if matches:
        options = sorted(o for o, a in parser._option_string_actions.items() if a in matches and o.startswith(flag))
        return None, f"{flag}: ambiguous, could be {', '.join(options)}"
    return None, f"{flag}: not a trainer flag"


def _value_problem(action: argparse.Action, flag: str, value: str) -> str | None:
    converted: object = value
    if action.type is not None and callable(action.type):
        try:
            converted = action.type(value)
        except argparse.ArgumentTypeError as exc:
            return f"{flag}: {exc}"
        except (TypeError, ValueError):
            return f"{flag}: expected {getattr(action.type, '__name__', 'a valid')} value, got {value!r}"
    if action.choices is not None and converted not in action.choices:
        return f"{flag}: {value!r} is not one of {', '.join(str(c) for c in action.choices)}"
    return None


def _walk(parser: argparse.ArgumentParser, args: list[str]) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if not token.startswith("-") or token == "--":
            problems.append(f"{token!r}: the trainer takes flags only (--name value)")
            continue
        flag, has_value, inline = token.partition("=")
        action, problem = _option(parser, flag)
        if action is None:
            problems.append(problem or f"{flag}: not a trainer flag")
            continue
        name = action.option_strings[-1]
        if isinstance(action, argparse._HelpAction):
            problems.append(f"{name}: prints help instead of training")
            continue
        seen.add(action.dest)
        if action.nargs == 0:
            if has_value:
                problems.append(f"{name}: takes no value, got {inline!r}")
            continue
        if has_value:
            value = inline
        elif i < len(args) and not args[i].startswith("--"):
            value = args[i]
            i += 1
        else:
            problems.append(f"{name}: expects a value")
            continue
        value_problem = _value_problem(action, name, value)
        if value_problem:
            problems.append(value_problem)
    missing = [a.option_strings[-1] for a in parser._actions if a.required and a.dest not in seen]
    problems += [f"{flag}: required" for flag in missing]
    return problems


def problems(args: list[str], world_size: int | None, per_node: int | None = None) -> list[str]:
    """Every problem of `train` with `args` in a job of `world_size` processes, `per_node` on each
    node (None: unknown, so the batch arithmetic and the memory are not checked), one per line."""
    found = _walk(_train_parser(), args)
    if found:
        return found
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            parsed = trainer_config.parse([COMMAND, *args])
    except SystemExit:
        return [stderr.getvalue().strip().removeprefix("trainer train: error: ")]
    except trainer_config.ConfigError as exc:
        return [str(exc)]
    assert isinstance(parsed, trainer_config.TrainConfig)
    data_problem = _data_problem(parsed)
    if data_problem:
        return [data_problem]
    if world_size is None:
        return []
    try:
        parsed.check_world(world_size)
        if parsed.gpu_memory_gib is not None and per_node is not None:
            # Every GPU of the catalog computes in 16 bits (bf16, or fp16 with a loss scaler).
            trainer_memory.micro_batch(parsed, world_size, per_node, 2, int(parsed.gpu_memory_gib * trainer_memory.GIB))
    except trainer_config.ConfigError as exc:
        return [str(exc)]
    return []


def _data_problem(parsed: trainer_config.TrainConfig) -> str | None:
    """The trainer's start-up data check (trainer.meta), run here when --data is a prepared folder
    this machine can read (a path inside the pods usually is not; then the pods run it)."""
    if not (parsed.data / trainer_meta.META_FILE).is_file():
        return None
    try:
        trainer_meta.check(parsed.data, parsed.model.vocab_size, parsed.seq_len, parsed.preset)
    except (trainer_config.ConfigError, OSError) as exc:
        return str(exc)
    return None


def preset(args: list[str]) -> str | None:
    """The preset `args` name, when they parse."""
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            parsed = trainer_config.parse([COMMAND, *args])
        except (SystemExit, trainer_config.ConfigError):
            return None
    return parsed.preset if isinstance(parsed, trainer_config.TrainConfig) else None

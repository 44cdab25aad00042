"""`gpu-platform job` flags as the API server and the kubelet take them: integers within the
fields' API types, text that is valid UTF-8, and trainer arguments that reach the pod as typed.

The kubelet expands `$(VAR)` in a container's command and args and reduces `$$` to `$`
(kubernetes/kubernetes third_party/forked/golang/expansion/expand.go; Kubernetes docs, "Define a
command and arguments for a container": "$$(VAR_NAME)" is not expanded), so every `$` of a
user's trainer argument is doubled. The platform's own torchrun arguments are not escaped: they
may name the pod's environment on purpose (`--node-rank=$(NODE_RANK)`).
"""

from __future__ import annotations

from components.facts.limits import INT32_MAX, INT64_MAX


def kubelet_literal(arg: str) -> str:
    """`arg` written so that the kubelet's `$(VAR)` expansion yields `arg` itself."""
    return arg.replace("$", "$$")


def _not_utf8(text: str) -> bool:
    """A lone surrogate: what Python makes of a command-line byte that is not UTF-8
    (PEP 383, surrogateescape); it cannot be written to the manifest as it was typed."""
    return any("\ud800" <= c <= "\udfff" for c in text)


def flag_problems(
    max_restarts: int, grace_period: int | None, texts: dict[str, str | None], trainer_args: list[str]
) -> list[str]:
    """The problems of the flags beyond the stack: ranges of the API's integer fields (JobSet
    spec.failurePolicy.maxRestarts is int32, jobset api/jobset/v1alpha2 jobset_types.go;
    terminationGracePeriodSeconds int64), text flags (`texts`, by flag) and trainer arguments that
    are not valid UTF-8, and text flags holding a control character (nothing is stripped)."""
    problems: list[str] = []
    if max_restarts > INT32_MAX:
        problems.append(f"--max-restarts: at most {INT32_MAX} (an int32 in the JobSet API), got {max_restarts}")
    if grace_period is not None and grace_period > INT64_MAX:
        problems.append(f"--grace-period: at most {INT64_MAX} (an int64 in the Pod API), got {grace_period}")
    for flag, text in texts.items():
        if text is None:
            continue
        if _not_utf8(text):
            problems.append(f"{flag}: not valid UTF-8, got {text!r}")
        elif any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in text):
            problems.append(f"{flag}: a control character (nothing is stripped), got {text!r}")
    problems += [f"trainer argument {arg!r}: not valid UTF-8" for arg in trainer_args if _not_utf8(arg)]
    return problems

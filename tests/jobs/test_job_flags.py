"""`gpu-platform job` flags the API and the kubelet would take differently than typed: integers
past their API types, names and images with a newline, `$(VAR)` in trainer arguments, and bytes
that are not UTF-8."""

from __future__ import annotations

from typing import Any

import pytest
from helpers import REPO

from components.jobs import renderer
from infra import stackfile

TRAINER_ARGS = [
    "--preset", "small", "--max-steps", "100", "--checkpoint-every", "50", "--global-batch-size", "16",
    "--seq-len", "512", "--seed", "1", "--data", "/data/datasets/corpus",
]


def render(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = dict(
        pool="a100-train", nodes=2, gpus_per_node=8, team="research", tier="production",
        image="ghcr.io/acme/trainer:1.0.0", trainer_args=TRAINER_ARGS,
    )
    fields.update(changes)
    return renderer.render(stackfile.read("onprem", REPO).spec(), renderer.JobRequest(**fields))


def problems(**changes: Any) -> list[str]:
    with pytest.raises(renderer.JobError) as caught:
        render(**changes)
    return caught.value.problems


def kubelet_expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's expansion of a container arg, as kubernetes third_party/forked/golang/
    expansion/expand.go does it: `$$` is `$`, `$(NAME)` a defined variable's value (an undefined
    one is left as written), any other `$` itself."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "$" and i + 1 < len(text):
            if text[i + 1] == "$":
                out.append("$")
                i += 2
                continue
            if text[i + 1] == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    name = text[i + 2 : end]
                    out.append(env.get(name, text[i : end + 1]))
                    i = end + 1
                    continue
        out.append(text[i])
        i += 1
    return "".join(out)


def container(jobset: dict[str, Any]) -> dict[str, Any]:
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]


def test_trainer_arguments_arrive_as_typed_after_the_kubelet_s_expansion() -> None:
    typed = "/data/$(TEAM_PREFIX)/a$$b$"
    args = [*TRAINER_ARGS[:-1], typed]
    trainer = container(render(trainer_args=args))
    env = {"TEAM_PREFIX": "teams/research/", "POD_IP": "10.0.0.7"}
    expanded = [kubelet_expand(arg, env) for arg in trainer["args"]]
    assert expanded[expanded.index("--data") + 1] == typed
    assert "--local-addr=10.0.0.7" in expanded, "the platform's own $(POD_IP) still expands"


def test_max_restarts_beyond_int32_is_refused() -> None:
    assert "--max-restarts: at most 2147483647 (an int32 in the JobSet API), got 2147483648" in problems(max_restarts=2**31)


def test_grace_period_beyond_int64_is_refused() -> None:
    assert f"--grace-period: at most {2**63 - 1} (an int64 in the Pod API), got {10**20}" in problems(grace_period=10**20)


@pytest.mark.parametrize(("flag", "field"), [("--name", "name"), ("--image", "image")])
def test_a_newline_in_a_name_or_image_is_an_error_not_stripped(flag: str, field: str) -> None:
    value = "train\n" if field == "name" else "ghcr.io/acme/trainer:1.0.0\n"
    assert problems(**{field: value}) == [f"{flag}: a control character (nothing is stripped), got {value!r}"]


def test_a_trainer_argument_that_is_not_utf8_is_refused() -> None:
    undecodable = b"/data/\xff".decode("utf-8", "surrogateescape")
    args = [*TRAINER_ARGS[:-1], undecodable]
    assert problems(trainer_args=args) == [f"trainer argument {undecodable!r}: not valid UTF-8"]

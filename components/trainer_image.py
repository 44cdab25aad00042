"""The trainer image: built from training_images/ and pushed to the stack's registry.

The tag is derived from the build target and the build context's content, so an unchanged
trainer is never rebuilt or re-pushed, and a changed one, or the other target of the same
content, always gets a new tag: ECR repositories are created with immutable tags, and ECR refuses
a second push to a tag, even of another target's image.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_docker_build as docker_build

# The build context: training_images/ of the gpu-platform checkout the program runs in. An
# installed package has no checkout, so it cannot build the image (context_of gives None).
CONTEXT_DIR = "training_images"

# Not part of the image: build output and caches that differ between machines.
_SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".venv", "build", "dist"}
_SKIPPED_SUFFIXES = (".pyc", ".egg-info")


def context_of(root: Path | None) -> Path | None:
    """The trainer's build context in the checkout at `root`, or None when there is none."""
    if root is None or not (root / CONTEXT_DIR / "Dockerfile").is_file():
        return None
    return root / CONTEXT_DIR


def context_files(context: Path) -> list[Path]:
    return sorted(
        path
        for path in context.rglob("*")
        if path.is_file()
        and not _SKIPPED_PARTS & set(path.relative_to(context).parts)
        and not any(part.endswith(_SKIPPED_SUFFIXES) for part in path.relative_to(context).parts)
    )


def content_tag(context: Path) -> str:
    """`sha-<16 hex>` over every file's path and bytes: stable across machines and runs."""
    digest = hashlib.sha256()
    for path in context_files(context):
        digest.update(path.relative_to(context).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return f"sha-{digest.hexdigest()[:16]}"


def image_tag(target: str, context: Path) -> str:
    """`<target>-sha-<16 hex>`: each build target of each content gets a tag of its own."""
    return f"{target}-{content_tag(context)}"


def build_target(efa: bool) -> str:
    """training_images/Dockerfile: `trainer-efa` adds libfabric and aws-ofi-nccl for EFA nodes."""
    return "trainer-efa" if efa else "trainer"


@dataclass(frozen=True)
class RegistryLogin:
    """What a wing hands over so the image can be pushed: repository and credentials."""

    repository_url: pulumi.Input[str]
    address: pulumi.Input[str]
    username: pulumi.Input[str]
    password: pulumi.Input[str]


class TrainerImage(pulumi.ComponentResource):
    """Builds training_images/ for linux/amd64 GPU nodes and pushes it with a content tag."""

    ref: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        registry: RegistryLogin,
        context: Path,
        efa: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-platform:trainer:TrainerImage", name, None, opts)
        target = build_target(efa)
        tag = image_tag(target, context)
        image = docker_build.Image(
            name,
            context=docker_build.BuildContextArgs(location=str(context)),
            dockerfile=docker_build.DockerfileArgs(location=str(context / "Dockerfile")),
            platforms=[docker_build.Platform.LINUX_AMD64],
            target=target,
            tags=[pulumi.Output.concat(registry.repository_url, ":", tag)],
            push=True,
            registries=[
                docker_build.RegistryArgs(
                    address=registry.address, username=registry.username, password=registry.password
                )
            ],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.ref = image.ref
        self.register_outputs({"ref": self.ref})

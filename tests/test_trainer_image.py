"""The trainer image component: content-tagged build pushed to the stack's registry."""

from __future__ import annotations

from pathlib import Path

import pulumi

from components.trainer_image import RegistryLogin, TrainerImage, content_tag, image_tag
from infra import synth


def make_context(root: Path, dockerfile: str = "FROM scratch\n") -> Path:
    (root / "src").mkdir(parents=True)
    (root / "Dockerfile").write_text(dockerfile)
    (root / "src" / "train.py").write_text("print('train')\n")
    return root


def test_content_tag_is_stable_for_the_same_files(tmp_path: Path) -> None:
    a = make_context(tmp_path / "a")
    b = make_context(tmp_path / "b")
    assert content_tag(a) == content_tag(b)
    assert content_tag(a).startswith("sha-") and len(content_tag(a)) == 20


def test_content_tag_changes_with_any_file(tmp_path: Path) -> None:
    context = make_context(tmp_path)
    before = content_tag(context)
    (context / "src" / "train.py").write_text("print('changed')\n")
    assert content_tag(context) != before


def test_content_tag_ignores_caches(tmp_path: Path) -> None:
    context = make_context(tmp_path)
    before = content_tag(context)
    (context / "src" / "__pycache__").mkdir()
    (context / "src" / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\0")
    assert content_tag(context) == before


def test_the_two_build_targets_of_the_same_content_get_different_tags(tmp_path: Path) -> None:
    """ECR tags are immutable: switching between trainer and trainer-efa must never reuse a tag."""
    context = make_context(tmp_path)
    assert image_tag("trainer", context) != image_tag("trainer-efa", context)
    assert image_tag("trainer-efa", context) == f"trainer-efa-{content_tag(context)}"


def test_image_is_pushed_to_the_registry_with_the_target_and_content_tag(tmp_path: Path) -> None:
    context = make_context(tmp_path)

    def program() -> None:
        login = RegistryLogin(
            repository_url="123.dkr.ecr.us-west-2.amazonaws.com/ml-dev-trainer",
            address="123.dkr.ecr.us-west-2.amazonaws.com",
            username="AWS",
            password=pulumi.Output.secret("token"),
        )
        TrainerImage("ml-dev-trainer", registry=login, efa=True, context=context)

    result = synth.run(program, "proj", "img", {})
    image = result.one("docker-build:index:Image", "ml-dev-trainer")
    assert image["parent"] == "gpu-platform:trainer:TrainerImage::ml-dev-trainer"
    inputs = image["inputs"]
    assert inputs["tags"] == [f"123.dkr.ecr.us-west-2.amazonaws.com/ml-dev-trainer:trainer-efa-{content_tag(context)}"]
    assert inputs["push"] is True
    assert inputs["platforms"] == ["linux/amd64"]
    assert inputs["target"] == "trainer-efa"
    assert inputs["dockerfile"] == {"location": str(context / "Dockerfile")}
    assert inputs["registries"][0]["password"] == "[secret]"

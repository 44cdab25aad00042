"""The trainer-efa image's build-time check (training_images/check_nccl_net.sh), run on fake
library trees laid out as the EFA installer lays them out, with the Dockerfile's own
LD_LIBRARY_PATH: the build fails exactly when NCCL would not find aws-ofi-nccl."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

IMAGE_DIR = Path(__file__).resolve().parents[2] / "training_images"
SCRIPT = IMAGE_DIR / "check_nccl_net.sh"


def dockerfile_library_path(root: Path) -> str:
    """The EFA stage's LD_LIBRARY_PATH, its /opt folders moved under `root` (the inherited
    ${LD_LIBRARY_PATH} dropped: the base image's holds no plugin)."""
    stage = (IMAGE_DIR / "Dockerfile").read_text().split("AS trainer-efa")[1].split("\nFROM ")[0]
    value = re.search(r"LD_LIBRARY_PATH=(\S+)", stage)
    assert value is not None
    folders = [f for f in value[1].split(":") if not f.startswith("${")]
    return ":".join(str(root) + f for f in folders)


def tree(root: Path, plugin_dir: str | None, libfabric: bool = True) -> None:
    """aws-ofi-nccl as the installer ships it: libnccl-net-ofi.so and libnccl-net.so linking to it."""
    if plugin_dir is not None:
        lib = root / plugin_dir.lstrip("/")
        lib.mkdir(parents=True)
        (lib / "libnccl-net-ofi.so").write_bytes(b"\x7fELF")
        (lib / "libnccl-net.so").symlink_to("libnccl-net-ofi.so")
    if libfabric:
        efa = root / "opt/amazon/efa/lib"
        efa.mkdir(parents=True)
        (efa / "libfabric.so.1").write_bytes(b"\x7fELF")


def check(library_path: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": os.environ["PATH"], "LD_LIBRARY_PATH": library_path, **env}
    return subprocess.run(["sh", str(SCRIPT)], capture_output=True, text=True, env=environment, timeout=30)


@pytest.mark.parametrize("plugin_dir", ["/opt/amazon/ofi-nccl/lib", "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu"])
def test_plugin_where_the_installer_puts_it_passes(tmp_path: Path, plugin_dir: str) -> None:
    tree(tmp_path, plugin_dir)
    result = check(dockerfile_library_path(tmp_path))
    assert result.returncode == 0, result.stderr
    assert f"{tmp_path}{plugin_dir}/libnccl-net.so" in result.stdout


def test_missing_plugin_fails_the_build(tmp_path: Path) -> None:
    tree(tmp_path, None)
    result = check(dockerfile_library_path(tmp_path))
    assert result.returncode == 1
    assert "libnccl-net.so is in none of the LD_LIBRARY_PATH folders" in result.stderr


def test_plugin_outside_ld_library_path_fails(tmp_path: Path) -> None:
    """Under lib/x86_64-linux-gnu but with only lib/ on the path, as the image had it before."""
    tree(tmp_path, "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu")
    result = check(f"{tmp_path}/opt/amazon/ofi-nccl/lib:{tmp_path}/opt/amazon/efa/lib")
    assert result.returncode == 1 and "libnccl-net.so" in result.stderr


def test_dangling_plugin_link_fails(tmp_path: Path) -> None:
    tree(tmp_path, "/opt/amazon/ofi-nccl/lib")
    (tmp_path / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so").unlink()
    assert check(dockerfile_library_path(tmp_path)).returncode == 1


def test_missing_libfabric_fails(tmp_path: Path) -> None:
    tree(tmp_path, "/opt/amazon/ofi-nccl/lib", libfabric=False)
    result = check(dockerfile_library_path(tmp_path))
    assert result.returncode == 1 and "libfabric.so*" in result.stderr


def test_named_plugin_is_looked_up_by_its_name(tmp_path: Path) -> None:
    tree(tmp_path, "/opt/amazon/ofi-nccl/lib")
    (tmp_path / "opt/amazon/ofi-nccl/lib/libnccl-net.so").unlink()
    library_path = dockerfile_library_path(tmp_path)
    assert check(library_path).returncode == 1
    assert check(library_path, NCCL_NET_PLUGIN="ofi").returncode == 0


def test_efa_stage_runs_the_check_after_setting_the_library_path() -> None:
    stage = (IMAGE_DIR / "Dockerfile").read_text().split("AS trainer-efa")[1].split("\nFROM ")[0]
    assert stage.index("LD_LIBRARY_PATH=") < stage.index("RUN sh /usr/local/bin/check_nccl_net.sh")
    assert "COPY check_nccl_net.sh /usr/local/bin/check_nccl_net.sh" in stage

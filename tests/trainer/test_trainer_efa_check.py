"""The trainer-efa image's build-time check (training_images/check_nccl_net.sh), run on library
trees laid out as the EFA installer lays them out, with the Dockerfile's own LD_LIBRARY_PATH: the
build fails exactly when NCCL would not find aws-ofi-nccl or could not load it. The libraries are
real shared objects compiled here (the plugin needs libfabric.so.1, as aws-ofi-nccl does), so the
script's ldd step reads them as the dynamic loader would; without a C compiler the tests skip."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

IMAGE_DIR = Path(__file__).resolve().parents[2] / "training_images"
SCRIPT = IMAGE_DIR / "check_nccl_net.sh"
CC = shutil.which("cc") or shutil.which("gcc")
LIBRARIES: dict[str, Path] = {}


def dockerfile_library_path(root: Path) -> str:
    """The EFA stage's LD_LIBRARY_PATH, its /opt folders moved under `root` (the inherited
    ${LD_LIBRARY_PATH} dropped: the base image's holds no plugin)."""
    stage = (IMAGE_DIR / "Dockerfile").read_text().split("AS trainer-efa")[1].split("\nFROM ")[0]
    value = re.search(r"LD_LIBRARY_PATH=(\S+)", stage)
    assert value is not None
    folders = [f for f in value[1].split(":") if not f.startswith("${")]
    return ":".join(str(root) + f for f in folders)


def compile_library(out: Path, soname: str, needs: list[Path]) -> Path:
    """A shared object named `soname` whose DT_NEEDED entries are the sonames of `needs`."""
    assert CC is not None
    source = out.parent / f"{soname}.c"
    source.write_text(f"int {soname.split('.')[0].replace('-', '_')}_entry(void) {{ return 0; }}\n")
    links = [arg for lib in needs for arg in (f"-L{lib.parent}", f"-l:{lib.name}")]
    # --no-as-needed: Ubuntu's toolchain drops unreferenced libraries from DT_NEEDED otherwise.
    subprocess.run([CC, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), str(source), "-Wl,--no-as-needed", *links],
                   check=True, capture_output=True, timeout=60)
    return out


@pytest.fixture(scope="session")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """libfabric.so.1; the plugin needing it; a plugin also needing a library shipped nowhere."""
    if CC is None:
        pytest.skip("no C compiler to build the shared objects the loader reads")
    root = tmp_path_factory.mktemp("libs")
    fabric = compile_library(root / "libfabric.so.1", "libfabric.so.1", [])
    absent = compile_library(root / "libofi-extra.so.1", "libofi-extra.so.1", [])
    (root / "broken").mkdir()
    broken = compile_library(root / "broken" / "libnccl-net-ofi.so", "libnccl-net-ofi.so", [fabric, absent])
    absent.unlink()
    return {"libfabric": fabric, "plugin": compile_library(root / "libnccl-net-ofi.so", "libnccl-net-ofi.so", [fabric]),
            "broken": broken}


def tree(root: Path, plugin_dir: str | None, libfabric: bool = True, plugin: Path | None = None) -> None:
    """aws-ofi-nccl as the installer ships it: libnccl-net-ofi.so and libnccl-net.so linking to it."""
    built = LIBRARIES
    if plugin_dir is not None:
        lib = root / plugin_dir.lstrip("/")
        lib.mkdir(parents=True)
        shutil.copy(plugin or built["plugin"], lib / "libnccl-net-ofi.so")
        (lib / "libnccl-net.so").symlink_to("libnccl-net-ofi.so")
    if libfabric:
        efa = root / "opt/amazon/efa/lib"
        efa.mkdir(parents=True)
        shutil.copy(built["libfabric"], efa / "libfabric.so.1")


@pytest.fixture(autouse=True)
def _built(libraries: dict[str, Path]) -> None:
    LIBRARIES.update(libraries)


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


def test_a_plugin_needing_a_library_the_loader_cannot_find_fails(tmp_path: Path) -> None:
    tree(tmp_path, "/opt/amazon/ofi-nccl/lib", plugin=LIBRARIES["broken"])
    result = check(dockerfile_library_path(tmp_path))
    assert result.returncode == 1
    assert "libnccl-net.so needs libraries in none of the loader's folders" in result.stderr
    assert "libofi-extra.so.1 => not found" in result.stderr


def test_a_plugin_file_that_is_no_shared_object_fails(tmp_path: Path) -> None:
    tree(tmp_path, "/opt/amazon/ofi-nccl/lib")
    (tmp_path / "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so").write_bytes(b"\x7fELF")
    result = check(dockerfile_library_path(tmp_path))
    assert result.returncode == 1 and "is no shared object the loader can open" in result.stderr


def test_a_plugin_list_passes_on_its_first_loadable_entry(tmp_path: Path) -> None:
    tree(tmp_path, "/opt/amazon/ofi-nccl/lib")
    library_path = dockerfile_library_path(tmp_path)
    result = check(library_path, NCCL_NET_PLUGIN="gib, ofi")
    assert result.returncode == 0, result.stderr
    assert "libnccl-net-ofi.so" in result.stdout
    assert check(library_path, NCCL_NET_PLUGIN="gib,tcpx").returncode == 1


@pytest.mark.parametrize("name", ["libnccl-net-ofi.so", "{root}/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"])
def test_a_plugin_named_by_file_or_path_is_found(tmp_path: Path, name: str) -> None:
    tree(tmp_path, "/opt/amazon/ofi-nccl/lib")
    result = check(dockerfile_library_path(tmp_path), NCCL_NET_PLUGIN=name.format(root=tmp_path))
    assert result.returncode == 0, result.stderr


def test_efa_stage_runs_the_check_after_setting_the_library_path() -> None:
    stage = (IMAGE_DIR / "Dockerfile").read_text().split("AS trainer-efa")[1].split("\nFROM ")[0]
    assert stage.index("LD_LIBRARY_PATH=") < stage.index("RUN sh /usr/local/bin/check_nccl_net.sh")
    assert "COPY check_nccl_net.sh /usr/local/bin/check_nccl_net.sh" in stage

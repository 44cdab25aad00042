"""The upstream reference data the tests read travels with the project (tests/data), each file
naming the repository and release it was taken from, so a fresh clone runs every test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import REFERENCE, REPO

# repository@tag, e.g. kubernetes-sigs/kueue@v0.19.2
UPSTREAM = re.compile(r"\b[\w.-]+/[\w.-]+@[\w.-]+")
FILES = sorted(REFERENCE.rglob("*.json"))


def declared_source(path: Path) -> str:
    document = json.loads(path.read_text())
    return str(document.get("source") or document.get("$comment") or "")


def test_there_is_reference_data() -> None:
    assert {p.parent.name for p in FILES} == {"charts", "schemas"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_file_names_its_upstream_repository_and_release(path: Path) -> None:
    assert UPSTREAM.search(declared_source(path)), path


@pytest.mark.parametrize("path", [p for p in FILES if p.parent.name == "charts"], ids=lambda p: p.name)
def test_each_chart_file_s_release_is_the_one_in_its_name(path: Path) -> None:
    version = re.search(r"-(\d+\.\d+\.\d+)\.", path.name)
    assert version and version.group(1) in declared_source(path)


def test_no_test_reads_the_shared_folder_beside_the_checkout() -> None:
    sources = [p for p in (REPO / "tests").rglob("*.py") if p.name != Path(__file__).name]
    # `../shared`, or a path joined with a folder "shared"
    beside = re.compile(r"""\.\./shared\b|/\s*["']shared["']""")
    assert not [p for p in sources if beside.search(p.read_text())]

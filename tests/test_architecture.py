"""The house (docs/architecture.md): one folder per kind of thing, and imports that only run down.

Layers, bottom to top: facts, spec, the shared derivations, the wings and the GPU layer, the job
renderer, the checks, the offline engine (the Pulumi program and what runs it), the tools over its
output, and the entry points (the CLI and the CrossGuard pack). A module may import its own layer
and those below; an import that runs up, or a cycle of imports, fails here with both files named.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO

# (layer, the files and folders in it), bottom first.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("facts", ("components/__init__.py", "components/facts")),
    ("spec", ("components/spec",)),
    (
        "derivations",
        (
            "components/pools.py",
            "components/naming.py",
            "components/node_resources.py",
            "components/tenancy.py",
            "components/trainer_image.py",
        ),
    ),
    ("wings", ("components/aws", "components/gcp", "components/kubernetes", "components/observability")),
    ("jobs", ("components/jobs",)),
    # MultiKueue workers and manager (docs/fleet.md): the layer's objects and fleet jobs.
    ("fleet", ("components/fleet",)),
    ("checks", ("components/checks",)),
    (
        "engine",
        (
            "infra/__init__.py",
            "infra/__main__.py",
            "infra/program.py",
            "infra/offline.py",
            "infra/synth.py",
            "infra/stackfile.py",
            "infra/yamlfile.py",
            "infra/mock_outputs.py",
            "infra/output_folder.py",
            "infra/inputs.py",
            "infra/collector.py",
        ),
    ),
    ("tools", ("infra/tools",)),
    ("entry points", ("infra/cli.py", "policy")),
)
OURS = ("components", "infra", "policy")
MAX_LINES = 500


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int


def layer_of(rel: str) -> int | None:
    for index, (_, places) in enumerate(LAYERS):
        if any(rel == place or rel.startswith(f"{place}/") for place in places):
            return index
    return None


def module_files(root: Path) -> dict[str, str]:
    """Dotted module name -> path relative to root, for every module of ours under root."""
    modules: dict[str, str] = {}
    for top in OURS:
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            parts = rel.removesuffix(".py").split("/")
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = rel
    return modules


def _targets(node: ast.AST, modules: dict[str, str]) -> list[str]:
    """The modules of ours an import statement loads (a `from package import name` loads the
    module `package.name` when there is one, else the package)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in modules]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        out = []
        for alias in node.names:
            full = f"{node.module}.{alias.name}"
            if full in modules:
                out.append(full)
            elif node.module in modules:
                out.append(node.module)
        return out
    return []


def import_edges(root: Path) -> list[Edge]:
    """Every import between our modules, those inside functions too."""
    modules = module_files(root)
    edges: list[Edge] = []
    for rel in modules.values():
        tree = ast.parse((root / rel).read_text(), filename=rel)
        for node in ast.walk(tree):
            for target in _targets(node, modules):
                if modules[target] != rel:
                    edges.append(Edge(rel, modules[target], node.lineno))
    return edges


def upward_imports(root: Path) -> list[str]:
    problems = []
    for edge in import_edges(root):
        low, high = layer_of(edge.importer), layer_of(edge.imported)
        if low is None or high is None:
            problems.append(f"{edge.importer}:{edge.line}: imports {edge.imported}, which lies in no layer of the house")
        elif high > low:
            problems.append(
                f"{edge.importer}:{edge.line} ({LAYERS[low][0]}) imports {edge.imported} ({LAYERS[high][0]}), a layer above it"
            )
    return problems


def cycles(root: Path) -> list[str]:
    """Each import cycle once, as its files in order."""
    graph: dict[str, set[str]] = {}
    for edge in import_edges(root):
        graph.setdefault(edge.importer, set()).add(edge.imported)
    found: list[str] = []
    seen: set[frozenset[str]] = set()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt) :]
                if frozenset(cycle) not in seen:
                    seen.add(frozenset(cycle))
                    found.append(" -> ".join([*cycle, nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_imports_run_only_down_the_house() -> None:
    assert upward_imports(REPO) == []


def test_no_module_imports_itself_in_a_circle() -> None:
    assert cycles(REPO) == []


def test_every_module_lies_in_a_layer() -> None:
    assert [rel for rel in module_files(REPO).values() if layer_of(rel) is None] == []


def _plant(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_an_upward_import_is_caught_with_both_files_named(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        {
            "components/__init__.py": "",
            "components/facts/__init__.py": "",
            "components/facts/catalog.py": "from components.checks import rules\n",
            "components/checks/__init__.py": "",
            "components/checks/rules.py": "from components.facts import catalog\n",
        },
    )
    problems = upward_imports(tmp_path)
    assert problems == [
        "components/facts/catalog.py:1 (facts) imports components/checks/rules.py (checks), a layer above it"
    ]


def test_an_upward_import_inside_a_function_is_caught_too(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        {
            "components/__init__.py": "",
            "components/spec/__init__.py": "def f():\n    from components.pools import derive_pool\n",
            "components/pools.py": "",
        },
    )
    assert upward_imports(tmp_path) == [
        "components/spec/__init__.py:2 (spec) imports components/pools.py (derivations), a layer above it"
    ]


def test_a_cycle_is_caught_with_its_files_in_order(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        {
            "components/__init__.py": "",
            "components/aws/__init__.py": "",
            "components/aws/a.py": "from components.aws import b\n",
            "components/aws/b.py": "from components.aws import a\n",
        },
    )
    assert cycles(tmp_path) == ["components/aws/a.py -> components/aws/b.py -> components/aws/a.py"]


def test_components_top_level_holds_only_the_shared_derivations() -> None:
    top = sorted(p.name for p in (REPO / "components").glob("*.py"))
    derivations = sorted(Path(p).name for p in LAYERS[2][1])
    assert top == sorted(["__init__.py", *derivations])
    assert len(derivations) <= 5


@pytest.mark.parametrize("folder", sorted(p for top in ("components", "infra") for p in (REPO / top).rglob("__init__.py")), ids=lambda p: p.parent.relative_to(REPO).as_posix())
def test_every_folder_says_what_lives_there(folder: Path) -> None:
    tree = ast.parse(folder.read_text())
    assert ast.get_docstring(tree), f"{folder.relative_to(REPO)} has no docstring"


def test_no_module_is_longer_than_the_house_allows() -> None:
    """Facts tables (components/facts/) may run long; everything else is split by concern."""
    long = []
    for rel in module_files(REPO).values():
        if rel.startswith("components/facts/") or rel.startswith("policy/"):
            continue
        lines = (REPO / rel).read_text().count("\n")
        if lines > MAX_LINES:
            long.append(f"{rel}: {lines} lines")
    assert long == []


def test_the_architecture_page_names_every_place_of_the_house() -> None:
    page = (REPO / "docs" / "architecture.md").read_text()
    places = [Path(place).name.removesuffix(".py") for _, group in LAYERS for place in group if "__" not in place]
    assert [place for place in places if place not in page] == []

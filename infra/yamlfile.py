"""The one YAML loader of the tools: stack files and Pulumi.yaml are read here and nowhere else.

Files come from anyone (a pull request, a copied stack), so the loader refuses what a plain
`yaml.safe_load` lets through or chokes on, each as one `FILE:LINE: problem` line:
- a key written twice (safe_load keeps the last one silently), with both lines;
- a key that YAML reads as something other than a string (`1:`, `~:`, `true:`): config keys
  and spec fields are strings;
- aliases that expand past MAX_NODES values (an alias bomb: a few lines that expand to billions
  of values, exhausting memory in whatever walks them) and nesting past MAX_DEPTH levels (which
  overflows Python's stack): both are measured on the composed node graph, before anything is
  constructed, so a bomb is refused in milliseconds;
- text that is not UTF-8 (binary files, UTF-16), and tags for values JSON cannot carry.

Values are read as Pulumi reads its config (go-yaml v3, which also reads YAML 1.1): only
`true`/`false` are booleans, since v3 keeps `yes`/`no`/`on`/`off` as strings unless the target is
typed bool (go-yaml/yaml#214), and dates stay strings, as JSON has none.
"""

from __future__ import annotations

import codecs
import os
import re
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from infra import inputs

# Values (scalars, lists, mappings), aliases expanded, in one file. The largest stack file here
# has about 400; a generous stack has a few thousand.
MAX_NODES = 100_000
# Nesting of lists and mappings, aliases expanded. A stack file nests about 8 deep.
MAX_DEPTH = 64

_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_BOOL = "tag:yaml.org,2002:bool"
_TAG_WORDS = {
    "tag:yaml.org,2002:null": "null",
    _BOOL: "a boolean",
    "tag:yaml.org,2002:int": "an integer",
    "tag:yaml.org,2002:float": "a number",
    "tag:yaml.org,2002:timestamp": "a date",
}
_UTF16_32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


class YamlError(Exception):
    """A file the tools cannot read as YAML: one line naming the file, and the line when known."""

    def __init__(self, path: Path, message: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = shown(path) if line is None else f"{shown(path)}:{line}"
        super().__init__(f"{where}: {message}")


class _Refused(Exception):
    """A problem the loader found, with the 1-based line it is on."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


def shown(path: Path) -> str:
    """A path as error messages show it: relative to the current folder when it lies below it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if relative.startswith("..") else relative


def _line(node: Node) -> int:
    return node.start_mark.line + 1


class _Loader(yaml.SafeLoader):
    """SafeLoader with nesting bounded while composing, and keys checked while constructing."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    yaml_constructors = dict(yaml.SafeLoader.yaml_constructors)

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        # Composing recurses once per level: stop before Python's recursion limit does.
        if self._depth >= MAX_DEPTH:
            raise _Refused(f"nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark.line + 1)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[str, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:
                continue
            key = _string_key(key_node)
            if key in first_line:
                raise _Refused(f"duplicate key {key!r} (lines {first_line[key]} and {_line(key_node)})", _line(key_node))
            first_line[key] = _line(key_node)
        return super().construct_mapping(node, deep=deep)


def _string_key(node: Node) -> str:
    if isinstance(node, ScalarNode) and node.tag == _STR:
        return str(node.value)
    if isinstance(node, ScalarNode):
        kind = _TAG_WORDS.get(node.tag, f"a value tagged {node.tag}")
        raise _Refused(f"key {node.value!r} is read as {kind}, not a string: quote it", _line(node))
    kind = "a list" if isinstance(node, SequenceNode) else "a mapping"
    raise _Refused(f"a key that is {kind}: keys are strings", _line(node))


def _unsupported(loader: yaml.SafeLoader, node: Node) -> Any:
    tag = node.tag.replace("tag:yaml.org,2002:", "!!")
    raise _Refused(f"tag {tag} is not supported: only strings, numbers, booleans, null, lists and mappings", _line(node))


# go-yaml v3 reads only these as booleans into untyped values (YAML 1.2's core schema).
_Loader.add_implicit_resolver(_BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)
for _tag in ("binary", "set", "omap", "pairs"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _unsupported)


def _measure(node: Node, memo: dict[int, tuple[int, int]], open_nodes: set[int]) -> tuple[int, int]:
    """(values, depth) of `node` with every alias expanded, refused past the limits.

    An alias is the very node its anchor names, so each node is measured once (memo) and a
    billion-value expansion costs a few dozen steps. The anchor comes first in the file, so the
    recursion follows the written nesting only, which composing already bounded.
    """
    key = id(node)
    if key in memo:
        return memo[key]
    if key in open_nodes:
        raise _Refused("an alias refers to a value that contains it", _line(node))
    open_nodes.add(key)
    if isinstance(node, SequenceNode):
        children: list[Node] = list(node.value)
    elif isinstance(node, MappingNode):
        children = [part for pair in node.value for part in pair]
    else:
        children = []
    measured = [_measure(child, memo, open_nodes) for child in children]
    values = 1 + sum(m[0] for m in measured)
    depth = 1 + max((m[1] for m in measured), default=0)
    if values > MAX_NODES:
        raise _Refused(f"expands to more than {MAX_NODES:,} values (aliases repeat what they refer to)", _line(node))
    if depth > MAX_DEPTH:
        raise _Refused(f"nested more than {MAX_DEPTH} levels deep (aliases included)", _line(node))
    open_nodes.discard(key)
    memo[key] = (values, depth)
    return memo[key]


def _text(path: Path, data: bytes) -> str:
    if data.startswith(_UTF16_32_BOMS):
        raise YamlError(path, "UTF-16 or UTF-32 text: expected UTF-8")
    if b"\0" in data:
        where = data.index(b"\0")
        raise YamlError(path, "a NUL byte: a binary or UTF-16 file, expected UTF-8 text", data.count(b"\n", 0, where) + 1)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise YamlError(path, f"not UTF-8: byte 0x{data[exc.start]:02x}", line) from None


def _one_line(exc: yaml.MarkedYAMLError) -> str:
    parts = [p for p in (exc.context, exc.problem) if p]
    return " ".join(", ".join(parts).split())


def load(path: Path) -> Any:
    """The one document in `path`, as plain JSON-like values (None for an empty file)."""
    try:
        data = inputs.read_bytes(path)
    except inputs.NotRegularFile as exc:
        raise YamlError(path, str(exc)) from None
    except IsADirectoryError:
        raise YamlError(path, "a folder, not a file") from None
    except FileNotFoundError:
        raise YamlError(path, "no such file") from None
    except OSError as exc:
        raise YamlError(path, f"cannot read: {exc.strerror or exc}") from None
    text = _text(path, data)
    try:
        loader = _Loader(text)
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        raise YamlError(path, f"not valid YAML: character #x{exc.character:04x} is not allowed", line) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _measure(node, {}, set())
        return loader.construct_document(node)
    except _Refused as exc:
        raise YamlError(path, str(exc), exc.line) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise YamlError(path, f"not valid YAML: {_one_line(exc)}", mark.line + 1 if mark else None) from None
    finally:
        loader.dispose()

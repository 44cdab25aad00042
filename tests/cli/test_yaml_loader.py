"""infra.yamlfile, the one loader for the YAML the tools read: each file a plain `safe_load`
takes wrongly, or chokes on, is one `FILE:LINE: problem` line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO

from infra import cli, yamlfile


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Error lines show paths relative to the current folder: run where the files are."""
    monkeypatch.chdir(tmp_path)


def error_of(name: str, content: str | bytes) -> str:
    path = Path(name)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    with pytest.raises(yamlfile.YamlError) as caught:
        yamlfile.load(path)
    return str(caught.value)


def alias_bomb(levels: int = 9) -> str:
    """Ten values, each level ten aliases of the one before: 10**(levels+1) values expanded."""
    lines = ["config:", "  x0: &x0 [a, a, a, a, a, a, a, a, a, a]"]
    for level in range(1, levels + 1):
        lines.append(f"  x{level}: &x{level} [{', '.join([f'*x{level - 1}'] * 10)}]")
    return "\n".join(lines) + "\n"


def test_a_duplicate_key_names_both_lines() -> None:
    text = "config:\n  aws:region: us-east-1\n  aws:region: us-west-2\n"
    assert error_of("Pulumi.a.yaml", text) == "Pulumi.a.yaml:3: duplicate key 'aws:region' (lines 2 and 3)"


def test_a_duplicate_key_deep_in_the_spec_is_found_too() -> None:
    text = "config:\n  gpu-platform:platform:\n    nodePools:\n      - name: a\n        maxNodes: 2\n        maxNodes: 3\n"
    assert error_of("Pulumi.a.yaml", text) == "Pulumi.a.yaml:6: duplicate key 'maxNodes' (lines 5 and 6)"


def test_a_key_quoted_once_and_bare_once_is_the_same_key() -> None:
    assert error_of("Pulumi.a.yaml", 'a: 1\n"a": 2\n') == "Pulumi.a.yaml:2: duplicate key 'a' (lines 1 and 2)"


def test_keys_a_merge_brings_in_may_be_overridden() -> None:
    path = Path("Pulumi.a.yaml")
    path.write_text("base: &base {a: 1, b: 2}\nmine:\n  <<: *base\n  b: 3\n")
    assert yamlfile.load(path)["mine"] == {"a": 1, "b": 3}


def test_an_alias_bomb_is_refused() -> None:
    # 10**10 values expanded; refused from the composed graph before any is built.
    assert error_of("Pulumi.a.yaml", alias_bomb()) == (
        "Pulumi.a.yaml:6: expands to more than 100,000 values (aliases repeat what they refer to)"
    )


def test_a_few_aliases_are_fine() -> None:
    path = Path("Pulumi.a.yaml")
    path.write_text(alias_bomb(levels=2))
    assert len(yamlfile.load(path)["config"]["x2"]) == 10


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    assert error_of("Pulumi.a.yaml", "config:\n  a: &a [1, *a]\n") == (
        "Pulumi.a.yaml:2: an alias refers to a value that contains it"
    )


def test_deep_nesting_is_refused_before_python_s_recursion_limit() -> None:
    assert error_of("Pulumi.a.yaml", "config: " + "[" * 5000 + "]" * 5000 + "\n") == (
        "Pulumi.a.yaml:1: nested more than 64 levels deep"
    )


def test_deep_block_nesting_names_the_line_where_it_passes_the_limit() -> None:
    text = "config:\n" + "".join("  " * level + f"k{level}:\n" for level in range(1, 100))
    assert error_of("Pulumi.a.yaml", text) == "Pulumi.a.yaml:64: nested more than 64 levels deep"


def test_aliases_nested_in_aliases_count_their_full_depth() -> None:
    lines = ["a0: &a0 " + "[" * 40 + "]" * 40]
    lines += [f"a{i}: &a{i} " + "[" * 30 + f"*a{i - 1}" + "]" * 30 for i in range(1, 3)]
    assert error_of("Pulumi.a.yaml", "\n".join(lines) + "\n") == (
        "Pulumi.a.yaml:2: nested more than 64 levels deep (aliases included)"
    )


def test_utf16_is_refused() -> None:
    assert error_of("Pulumi.a.yaml", "config:\n  a: b\n".encode("utf-16")) == (
        "Pulumi.a.yaml: UTF-16 or UTF-32 text: expected UTF-8"
    )


def test_a_binary_file_is_refused_at_its_first_nul_byte() -> None:
    assert error_of("Pulumi.a.yaml", b"config:\n  a: \x00\x01\x02") == (
        "Pulumi.a.yaml:2: a NUL byte: a binary or UTF-16 file, expected UTF-8 text"
    )


def test_latin1_text_is_refused_naming_the_byte() -> None:
    assert error_of("Pulumi.a.yaml", b"config:\n  a: b\n  c: caf\xe9\n") == "Pulumi.a.yaml:3: not UTF-8: byte 0xe9"


def test_a_control_character_is_refused() -> None:
    assert error_of("Pulumi.a.yaml", "config:\n  a: b\x07\n") == (
        "Pulumi.a.yaml:2: not valid YAML: character #x0007 is not allowed"
    )


def test_a_utf8_byte_order_mark_is_fine() -> None:
    path = Path("Pulumi.a.yaml")
    path.write_bytes(b"\xef\xbb\xbfconfig:\n  a: b\n")
    assert yamlfile.load(path) == {"config": {"a": "b"}}


@pytest.mark.parametrize(
    ("key", "read_as"),
    [("1", "an integer"), ("~", "null"), ("true", "a boolean"), ("1.5", "a number"), ("2026-01-01", "a date")],
)
def test_a_key_that_is_not_a_string_is_named(key: str, read_as: str) -> None:
    assert error_of("Pulumi.a.yaml", f"config:\n  {key}: x\n") == (
        f"Pulumi.a.yaml:2: key {key!r} is read as {read_as}, not a string: quote it"
    )


def test_a_list_as_a_key_is_refused() -> None:
    assert error_of("Pulumi.a.yaml", "config:\n  ? [a, b]\n  : x\n") == "Pulumi.a.yaml:2: a key that is a list: keys are strings"


def test_yes_no_on_off_are_strings_as_pulumi_reads_them() -> None:
    path = Path("Pulumi.a.yaml")
    path.write_text("on: yes\noff: no\nt: true\n")
    assert yamlfile.load(path) == {"on": "yes", "off": "no", "t": True}


def test_a_date_is_a_string() -> None:
    path = Path("Pulumi.a.yaml")
    path.write_text("since: 2026-01-01\n")
    assert yamlfile.load(path) == {"since": "2026-01-01"}


def test_a_binary_tag_is_refused() -> None:
    assert error_of("Pulumi.a.yaml", "a: !!binary aGVsbG8=\n") == (
        "Pulumi.a.yaml:1: tag !!binary is not supported: only strings, numbers, booleans, null, lists and mappings"
    )


def test_a_syntax_error_is_one_line_with_its_line() -> None:
    assert error_of("Pulumi.a.yaml", "config:\n\taws:region: x\n") == (
        "Pulumi.a.yaml:2: not valid YAML: while scanning for the next token, found character '\\t' that cannot start any token"
    )


def test_two_documents_are_refused() -> None:
    assert error_of("Pulumi.a.yaml", "a: 1\n---\nb: 2\n") == (
        "Pulumi.a.yaml:2: not valid YAML: expected a single document in the stream, but found another document"
    )


def test_a_folder_is_refused() -> None:
    Path("Pulumi.a.yaml").mkdir()
    with pytest.raises(yamlfile.YamlError, match="^Pulumi.a.yaml: a folder, not a file$"):
        yamlfile.load(Path("Pulumi.a.yaml"))


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("config:\n  aws:region: a\n  aws:region: b\n", "Pulumi.bad.yaml:3: duplicate key 'aws:region' (lines 2 and 3)"),
        (alias_bomb(), "Pulumi.bad.yaml:6: expands to more than 100,000 values (aliases repeat what they refer to)"),
        ("config:\n  1: x\n", "Pulumi.bad.yaml:2: key '1' is read as an integer, not a string: quote it"),
        ("config:\n  ~: x\n", "Pulumi.bad.yaml:2: key '~' is read as null, not a string: quote it"),
    ],
)
def test_every_command_reports_it_as_one_line_and_exits_2(
    content: str, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("Pulumi.yaml").write_text((REPO / "Pulumi.yaml").read_text())
    Path("Pulumi.bad.yaml").write_text(content)
    for command in (["synth", "Pulumi.bad.yaml"], ["check", "Pulumi.bad.yaml"]):
        assert cli.main(command) == 2
        assert f"error: {line}" in capsys.readouterr().err.splitlines()
    assert cli.main(["job", "Pulumi.bad.yaml", "--pool", "p", "--nodes", "1", "--gpus-per-node", "1", "--tier", "t"]) == 2
    assert capsys.readouterr().err == f"error: {line}\n"

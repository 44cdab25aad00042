"""A ValidatingAdmissionPolicy evaluated offline the way the API server evaluates it
(kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy): the
matchConditions first (any false: the policy does not apply), then the variables in order under
`variables`, then every validation against `object`. An evaluation error counts as a refusal,
as it does under failurePolicy Fail. The interpreter is cel-python; where it is not installed,
`available()` is false and callers fall back to structural checks."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import itertools
import json
from typing import Any, Iterator, Mapping, Sequence


def available() -> bool:
    return importlib.util.find_spec("celpy") is not None


@functools.lru_cache(maxsize=None)
def _parsed(expression: str) -> Any:
    """The expression parsed once per process: the check probes one policy with a pod and a
    dozen planted attacks, the same few dozen expressions each time, and parsing (lark) cost more
    than evaluating. The interpreter reads the parse tree without changing it, so one tree
    serves every evaluation; a parse error is raised again on every call (not cached)."""
    return _environment().compile(expression)


@functools.lru_cache(maxsize=None)
def _program(expression: str) -> Any:
    return _environment().program(_parsed(expression))


# The documents this evaluator binds besides `variables` (_refused). The API server binds these
# and also `params`, `namespaceObject` and `authorizer` (k8s.io/apiserver pkg/admission/plugin/cel,
# compile.go's ...VarName constants); our policies have no paramKind and read neither of the
# others, and an expression that named one would fail here as unbound whatever the object, so
# leaving them out of an expression's key cannot make two different values share one.
DOCUMENTS = ("object", "oldObject", "request")


@dataclasses.dataclass(frozen=True)
class Reads:
    """What an expression can read: field paths from a bound document (its name first), and the
    variables it names (None: the whole `variables` map)."""

    paths: tuple[tuple[str, ...], ...]
    variables: tuple[str, ...] | None


def _selection(member: Any) -> list[str] | None:
    """`name.a.b` (or `.name.a.b`) for a `member` that is only field selections from an
    identifier, else None."""
    from lark import Tree

    child = member.children[0]
    if child.data == "primary":
        ident = child.children[0]
        named = isinstance(ident, Tree) and ident.data in ("ident", "dot_ident")
        return [str(ident.children[0])] if named else None
    if child.data == "member_dot":
        inner = _selection(child.children[0])
        return None if inner is None else [*inner, str(child.children[1])]
    return None


@functools.lru_cache(maxsize=None)
def reads(expression: str) -> Reads:
    """Every maximal field selection from a bound name in the parse tree (celpy's grammar,
    cel.lark: `member` over `member_dot` over `primary ident`). Whatever else an expression does with a
    document (a macro, an index, a function) it does to the value at such a selection, so the
    expression's value is a function of the values at these paths."""
    from lark import Tree

    found: list[list[str]] = []
    pending = [_parsed(expression)]
    while pending:
        tree = pending.pop()
        chain = _selection(tree) if tree.data == "member" else None
        if chain is not None:
            found.append(chain)
        else:
            pending += [child for child in tree.children if isinstance(child, Tree)]
    named = [chain for chain in found if chain[0] == "variables"]
    return Reads(
        paths=tuple(sorted({tuple(chain) for chain in found if chain[0] in DOCUMENTS})),
        variables=None if any(len(chain) == 1 for chain in named) else tuple(sorted({chain[1] for chain in named})),
    )


def _at(document: Any, path: Sequence[str]) -> list[Any]:
    """What a selection of `path` from `document` sees: the value at its end, or how far it got
    and what stopped it (a map without the next field, or a value that is not a map)."""
    node = document
    for depth, name in enumerate(path):
        if not isinstance(node, dict) or name not in node:
            return ["missing", depth] if isinstance(node, dict) else ["not a map", depth, node]
        node = node[name]
    return ["value", node]


# Values of evaluated expressions by what they read (expression_key), for this process.
_VALUES: dict[str, Any] = {}


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    """One environment (it builds the lark parser) for every expression."""
    import celpy

    return celpy.Environment()


def refusals(policy: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None = None,
             sub_resource: str = "") -> list[str]:
    """The names (the message up to its first colon) of the validations of the policy's spec
    `policy` that refuse `obj` (an UPDATE from `old` where given)."""
    return list(_verdict(_key(policy, obj, old, sub_resource), first=False))


def refuses(policy: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
    """Whether the policy refuses the creation of `obj`: its validations evaluated in order up
    to the first that refuses, as a planted attack needs only one refusal."""
    return bool(_verdict(_key(policy, obj, None, ""), first=True))


def _key(policy: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None, sub_resource: str) -> str:
    """What an evaluation reads, as one JSON document. Key order is kept (not sorted), so only
    documents the interpreter sees as the same maps, iterated in the same order, share a key;
    JSON keeps bool, int and float apart as json_to_cel does, and a list and a tuple are both a
    CEL list."""
    return json.dumps([policy, obj, old, sub_resource])


@functools.lru_cache(maxsize=None)
def _verdict(key: str, first: bool) -> tuple[str, ...]:
    """The refusals of one evaluation (with `first`, up to the first), once per process: the
    rule probes every team namespace the policy is bound to with the same pods, and the
    verdict is a function of the policy, the objects and the request alone."""
    policy, obj, old, sub_resource = json.loads(key)
    refused = _refused(policy, obj, old, sub_resource)
    return tuple(itertools.islice(refused, 1) if first else refused)


def expression_key(expression: str, documents: Mapping[str, Any], defined: Mapping[str, str] | None) -> str:
    """A digest of everything the value of `expression` depends on: its text, what its
    selections see in the bound documents, and the keys of the variables it reads (null for a
    name not defined yet; `defined` None where no `variables` map is bound, as for
    matchConditions)."""
    read = reads(expression)
    variables = None if defined is None else (
        list(defined.items()) if read.variables is None else [[name, defined.get(name)] for name in read.variables])
    text = json.dumps([expression, [_at(documents[path[0]], path[1:]) for path in read.paths], variables])
    return hashlib.sha256(text.encode()).hexdigest()


def _refused(policy: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None,
             sub_resource: str) -> Iterator[str]:
    """The refusals, each expression evaluated once per process for what it reads: a planted
    attack changes one part of the pod, so most of its expressions read what the Job
    controller's pod had and their values are reused."""
    from celpy import celtypes
    from celpy.adapter import json_to_cel

    request = {"operation": "CREATE" if old is None else "UPDATE", "subResource": sub_resource}
    documents = {"object": dict(obj), "oldObject": dict(old) if old else None, "request": request}
    base: dict[str, Any] = {name: json_to_cel(document) for name, document in documents.items()}

    def run(expression: str, values: dict[Any, Any] | None, defined: dict[str, str] | None) -> tuple[Any, str]:
        try:
            key = expression_key(expression, documents, defined)
        except Exception as error:  # noqa: BLE001 - a parse error is a refusal, as below
            return error, json.dumps([expression, "unparsable"])
        if key not in _VALUES:
            activation = base if values is None else {**base, "variables": celtypes.MapType(values)}
            try:
                _VALUES[key] = _program(expression).evaluate(activation)
            except Exception as error:  # noqa: BLE001 - any compile or evaluation error is a refusal
                _VALUES[key] = error
        return _VALUES[key], key

    for condition in policy.get("matchConditions") or []:
        if run(str(condition.get("expression")), None, None)[0] != celtypes.BoolType(True):
            return
    values: dict[Any, Any] = {}
    defined: dict[str, str] = {}
    for variable in policy.get("variables") or []:
        name = str(variable.get("name"))
        values[celtypes.StringType(name)], defined[name] = run(str(variable.get("expression")), values, defined)
    for validation in policy.get("validations") or []:
        result, _ = run(str(validation.get("expression")), values, defined)
        if not (isinstance(result, celtypes.BoolType) and bool(result)):
            yield str(validation.get("message", "")).split(":")[0]

"""The metric names a PromQL expression reads, from promql-parser's syntax tree, and which of
them nobody publishes.

promtool parses rule files but cannot know whether a name exists; a misspelt name evaluates to
an empty result and its alert never fires.
"""

from __future__ import annotations

from collections.abc import Iterable

import promql_parser

from components.facts.metrics import published


def metric_names(expr: str) -> set[str]:
    """Raises ValueError where `expr` is not PromQL."""
    names: set[str] = set()

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                names.add(node.name)
            # A name that is no PromQL identifier (Cloud Monitoring's) is selected by `__name__`.
            names.update(m.value for m in node.matchers.matchers if m.name == "__name__" and m.op == promql_parser.MatchOp.Equal)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def unknown_metrics(exprs: Iterable[str], recorded: Iterable[str] = (), backend: str = "kube-prometheus-stack") -> list[str]:
    """Names the expressions read that the backend's exporters do not publish and no recording
    rule records."""
    known = published(backend) | set(recorded)
    return sorted({name for expr in exprs for name in metric_names(expr)} - known)

"""The metric names a PromQL expression reads, and which of them nobody publishes.

promtool parses expressions but cannot know whether a name exists; a misspelt name evaluates to
an empty result and its alert never fires. The names are found lexically: strings, label
matchers, ranges and grouping clauses are removed first, then every identifier that is not a
function, keyword or recorded series is a metric name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from components.facts import metrics

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w.:$])([A-Za-z_:][\w:]*)(\s*\()?")
_NUMBER_SUFFIX = re.compile(r"^\d")
KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "inf", "nan", "Inf", "NaN", "atan2"})
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr: str) -> set[str]:
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGE.sub("", text)
    text = _GROUPING.sub("", text)
    names: set[str] = set()
    for match in _IDENT.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name in KEYWORDS or _NUMBER_SUFFIX.match(name):
            continue
        names.add(name)
    return names


def published() -> frozenset[str]:
    """Every series the pinned exporters and the trainer publish, histogram series included."""
    from_trainer = frozenset(trainer_metric_names())
    histograms = {f"{h}{suffix}" for h in metrics.KUEUE_HISTOGRAMS for suffix in HISTOGRAM_SUFFIXES}
    return (
        metrics.DCGM
        | metrics.KUEUE
        | frozenset(histograms)
        | metrics.KUBE_STATE_METRICS
        | metrics.NODE_EXPORTER
        | metrics.PROMETHEUS
        | from_trainer
    )


def trainer_metric_names() -> frozenset[str]:
    """The trainer's series (trainer.metrics_server.METRIC_NAMES, restated: the platform's code
    may not import the trainer, which needs torch; a test keeps the two equal)."""
    return TRAINER


TRAINER: frozenset[str] = frozenset(
    {
        "trainer_step",
        "trainer_max_steps",
        "trainer_loss",
        "trainer_eval_loss",
        "trainer_tokens_per_second",
        "trainer_mfu",
        "trainer_step_seconds",
        "trainer_last_step_timestamp_seconds",
        "trainer_checkpoint_save_seconds",
        "trainer_restarts",
        "trainer_wall_seconds_total",
        "trainer_committed_seconds_total",
        "trainer_badput_seconds_total",
        "trainer_goodput_ratio",
    }
)


def unknown_metrics(exprs: Iterable[str], recorded: Iterable[str] = ()) -> list[str]:
    """Names the expressions read that no exporter publishes and no recording rule records."""
    known = published() | set(recorded)
    return sorted({name for expr in exprs for name in metric_names(expr)} - known)

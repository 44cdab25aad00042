"""The job's first start survives its attempts: goodput's denominator (docs/observability.md)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry
from test_trainer_metrics_server import Shape

from trainer import job_clock
from trainer.metrics_server import Exporter
from trainer.storage import Store


def test_a_later_attempt_reads_the_first_attempt_s_start(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "ckpt"))
    assert job_clock.first_start(store, now=1000.0) == 1000.0
    assert job_clock.first_start(store, now=5000.0) == 1000.0


def test_an_unreadable_start_file_is_replaced_by_this_attempt_s(tmp_path: Path) -> None:
    store = Store(str(tmp_path))
    (tmp_path / job_clock.FILE).write_text("{not json")
    assert job_clock.first_start(store, now=42.0) == 42.0
    assert job_clock.first_start(store, now=99.0) == 42.0


def test_the_endpoint_exports_the_job_s_start() -> None:
    registry = CollectorRegistry()
    Exporter(Shape(), registry, job_started=1234.0)
    assert registry.get_sample_value("trainer_job_start_timestamp_seconds") == 1234.0

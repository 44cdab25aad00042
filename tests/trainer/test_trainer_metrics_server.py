"""Rank 0's Prometheus endpoint: the series it publishes and the goodput it computes."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from components.facts.metrics import TRAINER
from trainer import metrics_server
from trainer.metrics_server import METRIC_NAMES, Exporter


@dataclass
class Shape:
    tokens_per_step: int = 1000
    flops_per_token: int = 6_000
    peak_tflops: float | None = None
    world_size: int = 2
    start_step: int = 0
    max_steps: int = 100
    attempt: int = 1
    started: float = 0.0
    fabric: dict[str, object] | None = None


# trainer.fabric.Report.record() of a warn run over gloo whose bandwidth missed its floor.
MISSED_FLOOR: dict[str, object] = {"check": "warn", "transport": "none", "busbw_gbps": 1.25,
                                   "size_bytes": 4 << 20, "floor_gbps": 100.0, "passed": False, "samples": []}


def _samples(registry: CollectorRegistry) -> dict[str, float]:
    text = generate_latest(registry).decode()
    return {
        sample.name + (f"{{{sample.labels['cause']}}}" if "cause" in sample.labels else "")
        + (f"{{{sample.labels['check']},{sample.labels['transport']}}}" if "check" in sample.labels else ""): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def _exporter(started_ago: float = 0.0, fabric: dict[str, object] | None = None) -> tuple[Exporter, CollectorRegistry]:
    registry = CollectorRegistry()
    return Exporter(Shape(started=time.perf_counter() - started_ago, fabric=fabric), registry), registry


def test_the_endpoint_publishes_exactly_the_names_the_platform_knows() -> None:
    exporter, registry = _exporter(fabric=MISSED_FLOOR)
    exporter.log_step(1, 2.5, 2.7)
    names = {name.split("{")[0] for name in _samples(registry)}
    assert names == set(METRIC_NAMES) == set(TRAINER)


def test_steps_count_as_goodput_only_once_a_checkpoint_commits_them() -> None:
    exporter, registry = _exporter()
    time.sleep(0.05)
    exporter.log_step(10, 2.0, None)
    assert _samples(registry)["trainer_committed_seconds_total"] == 0
    exporter.saved(0.0)
    committed = _samples(registry)["trainer_committed_seconds_total"]
    assert committed > 0
    assert 0 < _samples(registry)["trainer_goodput_ratio"] <= 1


def test_start_up_time_is_badput_of_its_own() -> None:
    exporter, registry = _exporter(started_ago=5.0)
    exporter.log_step(1, 2.0, None)
    samples = _samples(registry)
    assert samples["trainer_badput_seconds_total{startup}"] >= 5.0
    assert samples["trainer_goodput_ratio"] == 0


def test_checkpoint_save_time_is_badput_and_reported() -> None:
    exporter, registry = _exporter()
    exporter.log_step(10, 2.0, None)
    exporter.saved(1.5)
    samples = _samples(registry)
    assert samples["trainer_checkpoint_save_seconds"] == 1.5
    assert samples["trainer_badput_seconds_total{checkpoint_save}"] == 1.5


def test_time_waiting_for_data_is_badput_and_never_committed() -> None:
    exporter, registry = _exporter()
    time.sleep(0.2)
    exporter.log_step(10, 2.0, None, data_wait_seconds=0.15)
    exporter.saved(0.0)
    samples = _samples(registry)
    assert samples["trainer_badput_seconds_total{data_stall}"] == pytest.approx(0.15)
    assert samples["trainer_data_wait_seconds"] == pytest.approx(0.015)
    assert 0 < samples["trainer_committed_seconds_total"] < 0.1


def test_a_data_wait_longer_than_the_interval_is_capped_at_it() -> None:
    exporter, registry = _exporter()
    time.sleep(0.05)
    exporter.log_step(1, 2.0, None, data_wait_seconds=99.0)
    exporter.saved(0.0)
    samples = _samples(registry)
    assert samples["trainer_badput_seconds_total{data_stall}"] < 1.0
    assert samples["trainer_committed_seconds_total"] == pytest.approx(0.0, abs=1e-6)


def test_progress_series_follow_the_last_sync_step() -> None:
    exporter, registry = _exporter()
    exporter.log_step(4, 3.0, 3.2, eval_seconds=0.0)
    samples = _samples(registry)
    assert (samples["trainer_step"], samples["trainer_loss"], samples["trainer_eval_loss"]) == (4, 3.0, 3.2)
    assert samples["trainer_tokens_per_second"] > 0
    assert samples["trainer_restarts"] == 1


def test_no_port_or_another_rank_serves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(metrics_server.PORT_ENV, "0")
    assert not isinstance(metrics_server.start(Shape(), is_main=True), Exporter)
    monkeypatch.setenv(metrics_server.PORT_ENV, "9999")
    assert not isinstance(metrics_server.start(Shape(), is_main=False), Exporter)


def test_the_fabric_probe_s_result_is_published_in_bytes_per_second_with_its_verdict() -> None:
    _, registry = _exporter(fabric=MISSED_FLOOR)
    samples = _samples(registry)
    assert samples["trainer_fabric_bus_bandwidth_bytes_per_second{warn,none}"] == 1.25e9
    assert samples["trainer_fabric_floor_bytes_per_second"] == 100e9
    assert samples["trainer_fabric_probe_size_bytes"] == 4 << 20
    assert samples["trainer_fabric_check_passed{warn,none}"] == 0


def test_a_run_the_gate_did_not_probe_has_no_fabric_series() -> None:
    _, registry = _exporter()
    assert not {name.split("{")[0] for name in _samples(registry)} & metrics_server.FABRIC_NAMES


def test_a_probe_without_a_floor_publishes_no_floor() -> None:
    _, registry = _exporter(fabric={**MISSED_FLOOR, "floor_gbps": None, "passed": True})
    samples = _samples(registry)
    assert "trainer_fabric_floor_bytes_per_second" not in samples
    assert samples["trainer_fabric_check_passed{warn,none}"] == 1

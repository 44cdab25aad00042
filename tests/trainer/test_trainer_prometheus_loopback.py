"""A real Prometheus on loopback scrapes a 2-process CPU torchrun run of the trainer (two agents
of one process, so the fabric gate probes), with the platform's goodput recording rules loaded,
and every query of the job dashboard returns data. The same run shows the gate's report in the
metrics lines (the fabric gate's other two-node runs: test_trainer_fabric.py), so its four torch
processes start once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from components.observability import dashboards
from components.observability.rules import goodput_records
from trainer.fabric import MIB

if TYPE_CHECKING:
    from conftest import Harness, Run

LABELS = {"namespace": "loopback", "jobset": "tiny-run"}
# Short intervals: the run lasts seconds, and increase() needs two samples.
SCRAPE_INTERVAL_S = 0.5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _start_prometheus(folder: Path, target_port: int) -> tuple[subprocess.Popen[bytes], str]:
    server = shutil.which("prometheus")
    assert server, "prometheus not found: apt-get install prometheus (make test does: setup-prometheus)"
    (folder / "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "jobs", "rules": goodput_records()}]}))
    config = {
        "global": {"scrape_interval": f"{SCRAPE_INTERVAL_S * 1000:.0f}ms", "scrape_timeout": f"{SCRAPE_INTERVAL_S * 1000:.0f}ms",
                   "evaluation_interval": f"{SCRAPE_INTERVAL_S * 1000:.0f}ms"},
        "rule_files": ["rules.yaml"],
        "scrape_configs": [
            {"job_name": "trainer", "static_configs": [{"targets": [f"127.0.0.1:{target_port}"], "labels": LABELS}]}
        ],
    }
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = _free_port()
    with open(folder / "prometheus.log", "wb") as log:
        proc = subprocess.Popen(
            [server, f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if _scraping(base):
            return proc, base
        time.sleep(0.2)
    _stop(proc)
    pytest.fail(f"prometheus did not start scraping:\n{(folder / 'prometheus.log').read_text()[-3000:]}")


def _scraping(base: str) -> bool:
    """Ready is not enough: the scrape manager applies discovered targets on its own ticker
    (every 5 s, prometheus scrape/manager.go), so a run shorter than that may be scraped once,
    and increase() needs two samples. The target has been tried once its lastScrape is set."""
    try:
        targets = _get(f"{base}/api/v1/targets")["data"]["activeTargets"]
    except OSError:
        return False
    return any(not t["lastScrape"].startswith("0001-") for t in targets)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _goodput_bound(elapsed: float) -> float:
    """The most the goodput record may read `elapsed` seconds into a job that commits every
    second: increase() extrapolates a counter's rise past its samples, up to half the average
    sample interval before the first and 1.1 of it after the last (prometheus
    promql/functions.go extrapolatedRate), and scrapes run late on a loaded machine; two scrape
    intervals cover both. Over a job's hour that is noise; a count taken twice (every rank's
    committed time summed) reads about 2 and is still caught."""
    return 1 + 2 * SCRAPE_INTERVAL_S / max(elapsed, SCRAPE_INTERVAL_S)


def _query_range(base: str, expr: str, start: float, end: float) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": "1s"})
    answer = _get(f"{base}/api/v1/query_range?{params}")
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


@dataclass
class Scraped:
    run: Run
    prometheus: str
    start: float
    end: float


@pytest.fixture(scope="module")
def scraped(harness: Harness, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    """The run, with the Prometheus that scraped it still serving queries."""
    metrics_port = _free_port()
    prometheus, base = _start_prometheus(tmp_path_factory.mktemp("prometheus"), metrics_port)
    run = None
    try:
        start = time.time()
        # Two torchrun agents of one process each, as two nodes: the fabric gate probes (gloo,
        # 1 and 4 MiB) only across nodes, and the dashboard's fabric panels need its series.
        with harness.env_with(TRAINER_METRICS_PORT=str(metrics_port)):
            run = harness.run_nodes("loopback", nodes=2, nproc_per_node=1, max_steps=160, checkpoint_every=20,
                                    log_every=4, eval_every=40, peak_tflops=1, fabric_check="warn",
                                    fabric_floor_gbps=1e-6, fabric_probe_max_mib=4)
        # Let the rules evaluate once more over the last scrapes.
        time.sleep(3)
        yield Scraped(run, base, start, time.time())
    finally:
        if run is not None and run.proc.poll() is None:
            harness.kill_tree(run)
        _stop(prometheus)


def test_the_job_dashboard_queries_return_data_from_a_real_run(scraped: Scraped) -> None:
    base, start, end = scraped.prometheus, scraped.start, scraped.end
    empty = []
    for expr in dashboards.queries(dashboards.JOB_VIEW):
        concrete = expr.replace("$namespace", LABELS["namespace"]).replace("$jobset", LABELS["jobset"])
        if not _query_range(base, concrete, start, end):
            empty.append(concrete)
    assert empty == [], f"no data for {empty}; trainer log:\n{scraped.run.output()[-2000:]}"
    job_start = max(float(v) for series in _query_range(
        base, "trainer_job_start_timestamp_seconds", start, end) for _, v in series["values"])
    goodput = _query_range(base, "job:trainer_goodput:ratio1h", start, end)
    points = [(float(t), float(v)) for series in goodput for t, v in series["values"]]
    # 0 until the first step commits, then the committed share of the elapsed time.
    assert points and points[-1][1] > 0 and all(v >= 0 for _, v in points)
    over = [(t, v) for t, v in points if v > _goodput_bound(t - job_start)]
    assert over == [], f"goodput above committed-over-elapsed time (a count taken twice?): {over}"


def test_the_gate_probe_on_two_nodes_reports_in_the_metrics_lines(scraped: Scraped) -> None:
    run = scraped.run
    lines = [r for r in run.metrics() if r["event"] == "train"]
    assert lines, run.output()
    report = lines[0]["fabric"]
    assert report["check"] == "warn" and report["passed"] is True
    assert [s["bytes"] for s in report["samples"]] == [MIB, 4 * MIB]
    assert report["busbw_gbps"] > 0 and report["size_bytes"] == 4 * MIB
    assert "fabric check (warn)" in run.output()

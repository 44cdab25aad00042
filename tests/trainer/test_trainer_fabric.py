"""The fabric gate (trainer.fabric): the bus-bandwidth formula, NCCL's transport read from its own
INFO lines, and the gate on two CPU "nodes" with gloo: a floor that stops, a missed floor that warn
trains past (read from the HSDP two-node run, conftest.hsdp_missed_floor). A probe that passes and
reports is read from the Prometheus loopback run (test_trainer_prometheus_loopback.py), which is
the same two-node warn run."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from trainer import config, fabric, parallel, train
from trainer.fabric import MIB, Sample, Transport

if TYPE_CHECKING:
    from conftest import FabricSeries, Harness, Run

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl_logs"
# Small sizes keep the gloo probe quick on shared CPUs: 1 MiB and 4 MiB.
PROBE = {"max_steps": 2, "checkpoint_every": 2, "eval_every": 0, "fabric_probe_max_mib": 4}


def test_bus_bandwidth_is_algbw_times_two_n_minus_one_over_n() -> None:
    """256 MiB in 10 ms over 16 ranks: algbw 268435456 B / 0.01 s = 26.8435456 GB/s, and
    busbw = 26.8435456 x 2 x 15 / 16 = 50.331648 GB/s."""
    algbw, busbw = fabric.bus_bandwidth(256 * MIB, 0.01, 16)
    assert algbw == pytest.approx(26.8435456)
    assert busbw == pytest.approx(50.331648)


def test_bus_bandwidth_of_two_ranks_equals_algbw() -> None:
    algbw, busbw = fabric.bus_bandwidth(MIB, 0.001, 2)
    assert busbw == pytest.approx(algbw)


def test_probe_sizes_are_powers_of_four_up_to_the_largest() -> None:
    assert fabric.probe_sizes(256) == [m * MIB for m in (1, 4, 16, 64, 256)]
    assert fabric.probe_sizes(4) == [MIB, 4 * MIB]


@pytest.mark.parametrize(
    ("log", "names", "fallback"),
    [
        ("efa.log", ("Libfabric",), False),
        ("efa_legacy.log", ("AWS Libfabric",), False),
        ("ib_roce.log", ("IB",), False),
        ("gib.log", ("gIB",), False),
        ("tcpx.log", ("GPUDirectTCPX",), False),
        ("tcpxo.log", ("FasTrak",), False),
        ("socket.log", ("Socket",), True),
        ("efa_direct.log", ("Libfabric",), False),
        ("efa_tcp_provider.log", ("Libfabric",), True),
    ],
)
def test_transport_is_read_from_nccl_info_lines(log: str, names: tuple[str, ...], fallback: bool) -> None:
    transport = fabric.transport_of((LOGS / log).read_text().splitlines())
    assert transport.names == names
    assert transport.fallback is fallback


@pytest.mark.parametrize(("log", "providers"), [("efa.log", ("efa",)), ("efa_legacy.log", ("efa",)),
                                               ("efa_direct.log", ("efa",)), ("efa_tcp_provider.log", ("tcp",)),
                                               ("ib_roce.log", ())])
def test_aws_ofi_nccl_s_libfabric_provider_is_read_from_both_line_formats(log: str, providers: tuple[str, ...]) -> None:
    assert fabric.transport_of((LOGS / log).read_text().splitlines()).providers == providers


def test_aws_ofi_nccl_on_the_tcp_provider_fails_the_verdict_naming_the_provider() -> None:
    transport = fabric.transport_of((LOGS / "efa_tcp_provider.log").read_text().splitlines())
    report, problem = fabric.verdict("enforce", None, _samples(300.0), [(0, "node-a", transport)])
    assert not report.passed and problem is not None
    assert "Libfabric (EFA through aws-ofi-nccl) on libfabric provider tcp" in problem and "provider efa" in problem


def test_nccl_warn_lines_are_picked_from_the_debug_file_s_lines() -> None:
    warnings = fabric.nccl_warnings((LOGS / "warn.log").read_text().splitlines())
    assert [w.split(" NCCL WARN ")[1] for w in warnings] == [
        "NET/OFI Unable to create endpoint: Connection refused",
        "socketStartConnect: Connect to 10.1.7.25<43527> failed : Software caused connection abort",
    ]


def test_nccl_warn_lines_of_the_debug_file_reach_stderr(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "nccl.%h.%p.log"
    monkeypatch.setenv("NCCL_DEBUG_FILE", str(log))
    fabric.debug_file().write_text((LOGS / "warn.log").read_text())
    fabric.echo_nccl_warnings()
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(" NCCL WARN " in line for line in err)


def test_using_network_counts_when_no_channel_crossed_nodes() -> None:
    lines = ["h:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>", "h:1:2 [0] NCCL INFO Using network Socket"]
    assert fabric.transport_of(lines) == Transport(("Socket",))


def test_bootstrap_and_plugin_lines_name_no_network() -> None:
    assert fabric.transport_of(["h:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"]).names == ()


def _samples(busbw: float) -> list[Sample]:
    return [Sample(256 * MIB, 0.01, busbw, busbw)]


def test_socket_fallback_on_one_node_fails_the_verdict_naming_that_node() -> None:
    ranks = [(0, "node-a", Transport(("Libfabric",))), (8, "node-b", Transport(("Socket",)))]
    report, problem = fabric.verdict("enforce", 100.0, _samples(300.0), ranks)
    assert not report.passed
    assert problem is not None and "node node-b (rank 8)" in problem and "Socket" in problem


def test_fast_transport_above_the_floor_passes() -> None:
    ranks = [(0, "node-a", Transport(("FasTrak",))), (8, "node-b", Transport(("FasTrak",)))]
    report, problem = fabric.verdict("enforce", 100.0, _samples(180.0), ranks)
    assert problem is None and report.passed and report.transport == "FasTrak"


def test_bandwidth_under_the_floor_names_measured_and_expected() -> None:
    ranks = [(0, "node-a", Transport(("IB",)))]
    _, problem = fabric.verdict("enforce", 100.0, _samples(41.5), ranks)
    assert problem is not None and "41.50 GB/s" in problem and "at least 100 GB/s" in problem and "node-a" in problem


def test_prepare_sends_nccl_info_lines_to_a_file_of_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    fabric.prepare("enforce", 16)
    assert os.environ["NCCL_DEBUG"] == "INFO"
    assert os.environ["NCCL_DEBUG_SUBSYS"] == "INIT,NET"
    assert os.environ["NCCL_DEBUG_FILE"].endswith(f".{os.getpid()}.log")


def test_prepare_leaves_single_node_runs_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    fabric.prepare("enforce", 8)
    assert "NCCL_DEBUG" not in os.environ


@pytest.fixture(scope="module")
def stopped_gate(harness: Harness) -> Run:
    """Two nodes through the pod's entry, under a floor no CPU reaches, with one restart allowed
    (--max-restarts): read by both tests of what enforce does, so the run's torch processes (two
    attempts on two nodes) start once. Every node's worker measures the same collective and
    stops; torchrun ends with 1 when a worker fails and restarts the workers first: the restarted
    attempt must stop at once, and the pod's entry must exit with 3, the status the Job's
    podFailurePolicy fails the JobSet on (components.jobs.fabric), which then ends the other pods:
    an agent whose peer left may wait in the next rendezvous round until then."""
    def settled(runs: list[Run]) -> bool:
        logs = [r.output() for r in runs]
        every_node_stopped = all("fabric check failed before step 1" in log for log in logs) and any(
            "exitcode:3" in log.replace(" ", "") for log in logs)
        first_node_refused_the_retry = "not retried, an earlier attempt of this job stopped" in logs[0] and (
            logs[0].count("expected at least 1e+06 GB/s") >= 2)
        return every_node_stopped and first_node_refused_the_retry

    return harness.run_nodes("fabric-final", nodes=2, nproc_per_node=1, expect_code=fabric.EXIT_FABRIC,
                             pod_entry=True, max_restarts=1, jobset_fails=True, settled=settled,
                             fabric_check="enforce", fabric_floor_gbps=1e6, **PROBE)


def test_forced_floor_stops_every_node_before_step_one(stopped_gate: Run) -> None:
    run = stopped_gate
    logs = [(run.log.parent / f"node{node}.log").read_text(errors="replace") for node in range(2)]
    for node, log in enumerate(logs):
        assert "fabric check failed before step 1" in log, f"node {node} did not stop:\n{log[-2000:]}"
        assert f"node {socket.gethostname()}" in log and "expected at least 1e+06 GB/s" in log
    # torchrun's summary of the failed worker, printed by the agent that ended on its own.
    assert any("exitcode:3" in log.replace(" ", "") for log in logs), logs[0][-2000:]
    assert not any(r["event"] == "train" for r in run.metrics()), "a step ran"


def test_a_stopped_gate_is_not_retried_and_the_pod_exits_with_the_fabric_status(stopped_gate: Run) -> None:
    output = stopped_gate.output()
    assert "not retried, an earlier attempt of this job stopped: fabric check failed before step 1" in output
    assert output.count("expected at least 1e+06 GB/s") >= 2, "the restarted attempt did not run"
    assert (stopped_gate.metrics_file.parent / "fabric0").read_text().startswith("fabric check failed before step 1")


def test_a_rank_whose_gate_failed_has_left_its_marker_and_is_ended_by_sigterm_during_its_teardown(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torchrun closes a failed rank's siblings with SIGTERM before it restarts them; a handler
    # that only asks for a save at the next step would hold them through the teardown, and the
    # pod's entry reads the marker to exit with the fabric status.
    cfg = config.parse(harness.train_args(tmp_path / "checkpoints", tmp_path / "metrics.jsonl"))
    assert isinstance(cfg, config.TrainConfig)
    marker = tmp_path / "fabric-marker"
    monkeypatch.setenv(fabric.MARKER_ENV, str(marker))
    during_teardown: list[tuple[object, bool]] = []

    def gate_fails(*_: object) -> int:
        train.StopRequest()
        raise fabric.FabricFailure("fabric check failed before step 1")

    monkeypatch.setattr(train, "train", gate_fails)
    monkeypatch.setattr(parallel, "init_distributed", lambda timeout: None)
    monkeypatch.setattr(parallel, "shutdown",
                        lambda clean: during_teardown.append((signal.getsignal(signal.SIGTERM), marker.exists())))
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert train.run(cfg) == fabric.EXIT_FABRIC
    finally:
        signal.signal(signal.SIGTERM, before)
    assert during_teardown == [(signal.SIG_DFL, True)]


@pytest.mark.parametrize("returned", [0, 143])
def test_a_rank_that_returned_from_training_is_ended_by_sigterm_during_its_closing_barrier(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, returned: int
) -> None:
    # Finished (0) or saved after a stop (143): nothing is left to save, so torchrun closing the
    # workers after a sibling failed must not wait for its SIGKILL while this rank sits in the
    # closing barrier of a group that sibling has left.
    cfg = config.parse(harness.train_args(tmp_path / "checkpoints", tmp_path / "metrics.jsonl"))
    assert isinstance(cfg, config.TrainConfig)
    during_teardown: list[tuple[object, bool]] = []

    def trained(*_: object) -> int:
        train.StopRequest()
        return returned

    monkeypatch.setattr(train, "train", trained)
    monkeypatch.setattr(parallel, "init_distributed", lambda timeout: None)
    monkeypatch.setattr(parallel, "shutdown", lambda clean: during_teardown.append((signal.getsignal(signal.SIGTERM), clean)))
    before = signal.getsignal(signal.SIGTERM)
    try:
        assert train.run(cfg) == returned
    finally:
        signal.signal(signal.SIGTERM, before)
    assert during_teardown == [(signal.SIG_DFL, True)]


def test_warn_mode_reports_a_missed_floor_and_trains(hsdp_missed_floor: FabricSeries) -> None:
    run = hsdp_missed_floor.run
    assert "(--fabric-check warn: training anyway)" in run.output()
    report = [r for r in run.metrics() if r["event"] == "train"][0]["fabric"]
    assert report["passed"] is False and report["floor_gbps"] == 1e6
    assert [r["step"] for r in run.metrics() if r["event"] == "train"] == list(range(1, 41))


def test_the_metrics_endpoint_serves_the_probe_s_result_and_a_missed_floor(hsdp_missed_floor: FabricSeries) -> None:
    run, series = hsdp_missed_floor.run, hsdp_missed_floor.series
    report = next(r["fabric"] for r in run.metrics() if r["event"] == "train")
    assert series, f"the endpoint never served the fabric series; log:\n{run.output()[-3000:]}"
    assert series["trainer_fabric_bus_bandwidth_bytes_per_second{warn,none}"] == report["busbw_gbps"] * 1e9
    assert series["trainer_fabric_check_passed{warn,none}"] == 0
    assert series["trainer_fabric_floor_bytes_per_second{,}"] == 1e15
    assert series["trainer_fabric_probe_size_bytes{,}"] == 4 * MIB

"""The fabric gate: before step 1 of a multi-node run, prove the inter-node network is the fast one.

NCCL falls back to TCP sockets on the primary NIC without failing when its network plugin is
missing or cannot open the devices (aws-ofi-nccl without EFA devices, GPUDirect-TCPX without its
library, no RDMA NICs); the job then trains at a few GB/s and nobody is told. So every rank
1. has NCCL write its INFO lines to a file of its own (`prepare`, before NCCL initializes),
2. runs a short all-reduce probe over a few sizes (`probe`), timed as nccl-tests times it, and
3. reads which network NCCL chose from those lines (`transport_of`).
With `--fabric-check enforce` a rank on the socket fallback, or a bus bandwidth under
`--fabric-floor-gbps`, stops the job before training (FabricFailure, exit EXIT_FABRIC) with a
message naming the node, the transport, the measured and the expected figures; `warn` logs the
same message and trains; `off` (the trainer's default; `gpu-platform job` sets the mode per
pool) skips all of it. The result rides on the metrics lines as `fabric`.

A stopped gate is final (the network does not change on a retry): each rank writes its message to
the file $TRAINER_FABRIC_MARKER names (`gpu-platform job` sets it, components.jobs.fabric), and an
attempt torchrun restarts in the same container stops at once when any rank finds one, without
probing again; the container's entry then exits with EXIT_FABRIC, which the Job's
podFailurePolicy turns into a failed JobSet instead of a restart.

Bus bandwidth follows nccl-tests (NVIDIA/nccl-tests doc/PERFORMANCE.md): algbw = S / t with S the
bytes each rank reduces and t the time of one operation, and for all-reduce busbw = algbw x
2(n-1)/n, n ranks; GB/s are 1e9 bytes per second; t is the mean over ranks (nccl-tests' default
`-a 1`). Runs on one node (or with gloo on CPU) have no NCCL network to read: only the
bandwidth is judged there.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from trainer.log import log
from trainer.parallel import Dist, local_world_size

# A distinct status, so a stopped gate reads apart from a crash (1) and a bad flag (2).
EXIT_FABRIC = 3
MIB = 1 << 20
WARMUP_ITERS = 2
TIMED_ITERS = 5
# NCCL's debug output (NCCL docs, Environment Variables: NCCL_DEBUG, NCCL_DEBUG_SUBSYS,
# NCCL_DEBUG_FILE with %h host and %p pid). "Using network <name>" is logged under INIT|NET
# when a communicator picks its network (NVIDIA/nccl src/init.cc), and every channel that
# crosses nodes is logged as "... via NET/<name>/<device>[/GDRDMA]" under INIT.
DEBUG_LEVELS = ("INFO", "TRACE")
SUBSYSTEMS = "INIT,NET"
_USING = re.compile(r"NCCL INFO Using network (?P<name>\S.*?)\s*$")
_VIA = re.compile(r"\bvia NET/(?P<name>[A-Za-z][A-Za-z0-9 _-]*?)(?:/\d+)")
# aws-ofi-nccl's libfabric provider: "NET/OFI Selected Provider is efa (found 32 nics)" (older
# releases) and "NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)"
# (aws/aws-ofi-nccl src/nccl_ofi_net.cpp, nccl_net_ofi_query_provider_capabilities). Anything but
# efa (tcp, sockets) is libfabric's own TCP: the plugin loads and still moves bytes over sockets.
_OFI_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is (?P<name>[^\s,]+)")
LIBFABRIC = ("Libfabric", "AWS Libfabric")
EFA_PROVIDER = "efa"
# NCCL writes WARN lines where it writes INFO, so into NCCL_DEBUG_FILE once that is set, not to
# stderr (NVIDIA/nccl src/debug.cc, ncclDebugLog: "\n<host>:<pid>:<tid> [<dev>] <file>:<line>
# NCCL WARN <message>"); the gate copies them to stderr, where the pod's log shows them.
_WARN = re.compile(r"\bNCCL WARN\b")
# GPUDirect-TCPX names itself with its plugin ABI, e.g. "GPUDirectTCPX_v7".
_ABI_SUFFIX = re.compile(r"_v\d+$")

# The networks NCCL reports, by name (the `name` of each ncclNet_t), and what they mean.
# Socket: NCCL's built-in TCP transport (src/transport/net_socket.cc), the silent fallback;
# FastSocket: GKE's NCCL Fast Socket plugin, TCP too (GoogleCloudPlatform/nccl-fastsocket).
FALLBACK = {"Socket": "TCP sockets, NCCL's fallback", "FastSocket": "TCP sockets (NCCL Fast Socket)"}
FABRIC = {
    # aws-ofi-nccl over EFA: "Libfabric" since 1.x, "AWS Libfabric" in older releases
    # (aws/aws-ofi-nccl src/nccl_ofi_net.c; logs in NVIDIA/nccl#1597 and aws/aws-ofi-nccl#24).
    "Libfabric": "EFA through aws-ofi-nccl",
    "AWS Libfabric": "EFA through aws-ofi-nccl",
    # NCCL's verbs transport (src/transport/net_ib.cc) and NVIDIA's rdma-sharp plugin.
    "IB": "RDMA verbs (InfiniBand or RoCE)",
    "IBext": "RDMA verbs (nccl-rdma-sharp-plugins)",
    # GKE A3 Ultra / A4: Google's gIB plugin, RDMA over RoCE (container-engine-accelerators
    # gpudirect-rdma installer; channels log "via NET/gIB/<n>/GDRDMA").
    "gIB": "GPUDirect RDMA (gIB)",
    # GKE A3 High: google/nccl-plugin-gpudirecttcpx (PRODUCT_NAME "GPUDirectTCPX").
    "GPUDirectTCPX": "GPUDirect-TCPX",
    # GKE A3 Mega: the GPUDirect-TCPXO plugin, which names itself FasTrak.
    "FasTrak": "GPUDirect-TCPXO",
}


class FabricFailure(Exception):
    """The gate stopped the job before training: a message for people, one line."""


@dataclass(frozen=True)
class Sample:
    """One probe size: bytes each rank reduced, mean seconds per all-reduce, and the two
    bandwidths in GB/s as nccl-tests reports them."""

    bytes: int
    seconds: float
    algbw_gbps: float
    busbw_gbps: float


@dataclass(frozen=True)
class Transport:
    """Which network NCCL used on one rank: `names` as NCCL logged them, `fallback` when any of
    them is a TCP socket transport. No names: NCCL logged none (gloo, or one node)."""

    names: tuple[str, ...]
    # aws-ofi-nccl's libfabric providers, where it logged them.
    providers: tuple[str, ...] = ()

    @property
    def fallback(self) -> bool:
        return any(n in FALLBACK for n in self.names) or self.ofi_over_tcp

    @property
    def ofi_over_tcp(self) -> bool:
        """aws-ofi-nccl runs, but on a libfabric provider other than EFA's."""
        return any(n in LIBFABRIC for n in self.names) and any(p != EFA_PROVIDER for p in self.providers)

    def describe(self) -> str:
        if not self.names:
            return "no NCCL network logged"
        text = ", ".join(f"{n} ({FALLBACK.get(n) or FABRIC.get(n) or 'unknown to the trainer'})" for n in self.names)
        return text + (f" on libfabric provider {', '.join(self.providers)}" if self.providers else "")


def bus_bandwidth(size_bytes: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s of an all-reduce of `size_bytes` per rank over `ranks` ranks."""
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * 2 * (ranks - 1) / ranks


def probe_sizes(max_mib: int) -> list[int]:
    """Powers of four from 1 MiB up to `max_mib` (1, 4, 16, 64, 256 for 256): small sizes show
    latency, the largest one the bandwidth the floor is compared with."""
    sizes, mib = [], 1
    while mib <= max_mib:
        sizes.append(mib * MIB)
        mib *= 4
    return sizes or [max_mib * MIB]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def probe(d: Dist, sizes: Iterable[int]) -> list[Sample]:
    """Time all-reduces of float32 buffers of each size on every rank; all ranks must call it."""
    samples = []
    for size in sizes:
        buffer = torch.ones(size // 4, dtype=torch.float32, device=d.device)
        for _ in range(WARMUP_ITERS):
            dist.all_reduce(buffer)
        _sync(d.device)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(TIMED_ITERS):
            dist.all_reduce(buffer)
        _sync(d.device)
        elapsed = torch.tensor([(time.perf_counter() - start) / TIMED_ITERS], dtype=torch.float64, device=d.device)
        dist.all_reduce(elapsed)
        seconds = float(elapsed.item()) / d.world_size
        algbw, busbw = bus_bandwidth(size, seconds, d.world_size)
        samples.append(Sample(size, seconds, algbw, busbw))
        del buffer
    return samples


def transport_of(lines: Iterable[str]) -> Transport:
    """The networks in NCCL's INFO lines: channels' "via NET/<name>/..." where NCCL connected
    across nodes, else the communicator's "Using network <name>"."""
    via: list[str] = []
    using: list[str] = []
    providers: list[str] = []
    for line in lines:
        if (m := _USING.search(line)) is not None:
            using.append(_ABI_SUFFIX.sub("", m["name"]))
        if (m := _OFI_PROVIDER.search(line)) is not None:
            providers.append(m["name"])
        for m in _VIA.finditer(line):
            via.append(_ABI_SUFFIX.sub("", m["name"].strip()))
    return Transport(tuple(dict.fromkeys(via or using)), tuple(dict.fromkeys(providers)))


def nccl_warnings(lines: Iterable[str]) -> list[str]:
    """NCCL's WARN lines among its debug lines."""
    return [line for line in lines if _WARN.search(line)]


def echo_nccl_warnings() -> None:
    """This process's NCCL WARN lines so far, on stderr."""
    for line in nccl_warnings(read_lines(debug_file())):
        print(line, file=sys.stderr, flush=True)


def multi_node(world_size: int) -> bool:
    """More than one node: torchrun starts LOCAL_WORLD_SIZE processes on each."""
    return world_size > local_world_size()


def debug_file() -> Path:
    """Where this process's NCCL writes its debug lines: the user's NCCL_DEBUG_FILE with NCCL's
    %h and %p filled in, or one of ours."""
    pattern = os.environ.get("NCCL_DEBUG_FILE", "/tmp/trainer-nccl.%h.%p.log")
    return Path(pattern.replace("%h", socket.gethostname()).replace("%p", str(os.getpid())))


def prepare(mode: str, world_size: int) -> None:
    """Before the process group exists (NCCL reads its debug settings once, at its first
    initialization): INFO lines of INIT and NET into a file, so stderr stays readable and the
    gate can read them back. A user's own NCCL_DEBUG_FILE is kept and read."""
    if mode != "off" and multi_node(world_size):
        capture_nccl_log()


def capture_nccl_log() -> None:
    """NCCL_DEBUG=INFO (kept if TRACE) for INIT and NET (added to the user's subsystems), into
    debug_file()."""
    if os.environ.get("NCCL_DEBUG", "").upper() not in DEBUG_LEVELS:
        os.environ["NCCL_DEBUG"] = "INFO"
    subsystems = os.environ.get("NCCL_DEBUG_SUBSYS")
    if subsystems and not {"INIT", "NET", "ALL"} & set(subsystems.upper().split(",")):
        os.environ["NCCL_DEBUG_SUBSYS"] = f"{subsystems},{SUBSYSTEMS}"
    elif not subsystems:
        os.environ["NCCL_DEBUG_SUBSYS"] = SUBSYSTEMS
    os.environ.setdefault("NCCL_DEBUG_FILE", str(debug_file()))


MARKER_ENV = "TRAINER_FABRIC_MARKER"


def record_failure(message: str) -> None:
    """Leave the message where the entry and a restarted attempt look (no-op when unset); the
    first attempt's message stays."""
    marker = os.environ.get(MARKER_ENV)
    if marker and not Path(marker).exists():
        Path(marker).write_text(message + "\n")


def earlier_failure(d: Dist) -> str | None:
    """The message of a gate that stopped an earlier attempt, on any rank's node."""
    marker = os.environ.get(MARKER_ENV)
    mine = read_text(Path(marker)) if marker else None
    gathered: list[str | None] = [None] * d.world_size
    dist.all_gather_object(gathered, mine)
    return next((text for text in gathered if text), None)


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def node_name() -> str:
    """The Kubernetes node (NODE_NAME from the downward API, set by `gpu-platform job`), else the
    host name (the pod's)."""
    return os.environ.get("NODE_NAME") or socket.gethostname()


@dataclass(frozen=True)
class Report:
    """What the gate found, as it goes into the metrics lines."""

    check: str
    transport: str
    busbw_gbps: float
    size_bytes: int
    floor_gbps: float | None
    passed: bool
    samples: list[dict[str, float]]

    def record(self) -> dict[str, object]:
        return asdict(self)


def verdict(mode: str, floor_gbps: float | None, samples: list[Sample],
            ranks: list[tuple[int, str, Transport]]) -> tuple[Report, str | None]:
    """The report and, when the fabric is not what the pool promises, the message naming the
    node, the transport, and the measured and expected figures. `ranks` holds (rank, node,
    transport) of every rank; bandwidth is judged at the largest size."""
    largest = samples[-1]
    problems: list[str] = []
    fallback = [(r, n, t) for r, n, t in ranks if t.fallback]
    if fallback:
        rank, node, transport = fallback[0]
        more = f" and {len(fallback) - 1} more rank(s)" if len(fallback) > 1 else ""
        problems.append(f"node {node} (rank {rank}{more}) uses NCCL network {transport.describe()}, "
                        "expected the pool's fabric (EFA, RDMA or GPUDirect"
                        + (", libfabric provider efa)" if transport.ofi_over_tcp else ")"))
    if floor_gbps is not None and largest.busbw_gbps < floor_gbps:
        _, node, transport = ranks[0]
        problems.append(f"bus bandwidth {largest.busbw_gbps:.2f} GB/s at {largest.bytes // MIB} MiB over "
                        f"{len(ranks)} ranks (node {node}: {transport.describe()}), expected at least "
                        f"{floor_gbps:g} GB/s (--fabric-floor-gbps, the pool's floor)")
    names = sorted({name for _, _, t in ranks for name in t.names})
    report = Report(
        check=mode,
        transport=",".join(names) or "none",
        busbw_gbps=round(largest.busbw_gbps, 3),
        size_bytes=largest.bytes,
        floor_gbps=floor_gbps,
        passed=not problems,
        samples=[{"bytes": s.bytes, "seconds": s.seconds, "algbw_gbps": round(s.algbw_gbps, 3),
                  "busbw_gbps": round(s.busbw_gbps, 3)} for s in samples],
    )
    return report, ("; ".join(problems) if problems else None)


def gather_transports(d: Dist) -> list[tuple[int, str, Transport]]:
    """(rank, node, transport) of every rank, on every rank; called after the probe, so the
    channels NCCL opened across nodes are in the debug lines. gloo (CPU) logs no NCCL network."""
    mine = (d.rank, node_name(), transport_of(read_lines(debug_file())) if d.device.type == "cuda" else Transport(()))
    gathered: list[tuple[int, str, Transport] | None] = [None] * d.world_size
    dist.all_gather_object(gathered, mine)
    return [entry for entry in gathered if entry is not None]


def gate(mode: str, floor_gbps: float | None, max_mib: int, d: Dist) -> dict[str, object] | None:
    """Run the gate on every rank of a multi-node run; None when there is nothing to check.
    Every rank reaches the same verdict (the per-rank findings are gathered first), so every
    rank stops or every rank trains."""
    if mode == "off" or not multi_node(d.world_size):
        return None
    if mode == "enforce" and (earlier := earlier_failure(d)) is not None:
        raise FabricFailure(f"not retried, an earlier attempt of this job stopped: {earlier}")
    try:
        samples = probe(d, probe_sizes(max_mib))
        ranks = gather_transports(d)
    finally:
        echo_nccl_warnings()
    report, problem = verdict(mode, floor_gbps, samples, ranks)
    if d.is_main:
        log(f"fabric check ({mode}): {report.transport}, bus bandwidth {report.busbw_gbps:.2f} GB/s at "
            f"{report.size_bytes // MIB} MiB" + (f", floor {floor_gbps:g} GB/s" if floor_gbps is not None else ""), d.rank)
    if problem is not None:
        message = f"fabric check failed before step 1: {problem}"
        if mode == "enforce":
            raise FabricFailure(message)
        if d.is_main:
            log(f"{message} (--fabric-check warn: training anyway)", d.rank)
    return report.record()

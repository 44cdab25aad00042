"""The capacity and cost summary of a stack: what a reviewer asks first about GPU changes."""

from __future__ import annotations

from dataclasses import dataclass

from components import catalog
from components.pools import Pool, derive_pools
from components.spec import PlatformSpec

_HEADERS = ("pool", "GPU", "GPUs/node", "nodes", "max GPUs", "GPU slots", "sharing", "provisioning", "$/h min", "$/h max")


@dataclass(frozen=True)
class PoolRow:
    pool: Pool

    @property
    def usd_min(self) -> float | None:
        price = self.pool.usd_per_node_hour
        return None if price is None else price * self.pool.min_nodes

    @property
    def usd_max(self) -> float | None:
        price = self.pool.usd_per_node_hour
        return None if price is None else price * self.pool.max_nodes

    def cells(self) -> tuple[str, ...]:
        p = self.pool
        sharing = p.sharing_mode if p.sharing_mode == "none" else f"{p.sharing_mode} x{p.slots_per_gpu}"
        return (
            p.name,
            p.gpu.name,
            str(p.gpus_per_node),
            f"{p.min_nodes}-{p.max_nodes}",
            f"{p.max_gpus} on request" if p.on_request else str(p.max_gpus),
            str(p.max_slots),
            sharing,
            p.provisioning,
            _usd(self.usd_min),
            _usd(self.usd_max),
        )


def _usd(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.2f}"


def _total(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _sum_row(label: str, pool_rows: list[PoolRow]) -> tuple[str, ...]:
    return (
        label,
        "",
        "",
        "",
        str(sum(r.pool.max_gpus for r in pool_rows)),
        str(sum(r.pool.max_slots for r in pool_rows)),
        "",
        "",
        _usd(_total([r.usd_min for r in pool_rows])),
        _usd(_total([r.usd_max for r in pool_rows])),
    )


def rows(spec: PlatformSpec) -> list[tuple[str, ...]]:
    """One row per pool, then the total of the pools the autoscaler scales at will, and, where there
    are any, the flex-start and queued pools' on its own: GPUs granted on request, not standing."""
    pool_rows = [PoolRow(pool) for pool in derive_pools(spec)]
    on_request = [r for r in pool_rows if r.pool.on_request]
    totals = [_sum_row("total", [r for r in pool_rows if not r.pool.on_request])]
    if on_request:
        totals.append(_sum_row("on request", on_request))
    return [r.cells() for r in pool_rows] + totals


def markdown(spec: PlatformSpec, stack: str) -> str:
    lines = [
        f"# {stack}: {spec.cloud} {spec.environment}, cluster {spec.cluster.name}"
        f" (Kubernetes {spec.cluster.kubernetes_version})",
        "",
        "| " + " | ".join(_HEADERS) + " |",
        "|" + "|".join("---" for _ in _HEADERS) + "|",
    ]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows(spec)]
    lines += [
        "",
        "GPU slots are what pods can request as `nvidia.com/gpu` at maximum scale"
        " (time-slicing and MPS replicas, MIG instances).",
        f"Prices: {catalog.PRICE_NOTE}; n/a for nodes of an existing cluster.",
    ]
    if any(p.on_request for p in derive_pools(spec)):
        lines.append(
            "On request: flex-start and queued pools hold no standing capacity; their GPUs come when GKE's Dynamic"
            " Workload Scheduler grants a request (queued: all of a job's nodes at once), for at most 7 days per node,"
            " and are counted apart from the total."
        )
    lines.append("")
    return "\n".join(lines)


def table(spec: PlatformSpec) -> str:
    """The same figures as a compact plain-text table for the terminal."""
    body = [_HEADERS, *rows(spec)]
    widths = [max(len(row[i]) for row in body) for i in range(len(_HEADERS))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in body)

"""The capacity and cost summary of a stack: what a reviewer asks first about GPU changes.

The GPU pools come first, as a table of their own; the whole stack's $/hour follows, with what
runs whatever the GPUs do (system nodes, the control plane, NAT, keys, node disks), each counted
from what the program declared. Every $ figure is an estimate, and the prices table names each
price, its source and the date it was read.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.facts import catalog, prices
from components.pools import Pool, derive_pools
from components.spec import PlatformSpec
from infra.synth import Synthesis

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


def _usd3(value: float | None) -> str:
    """Whole-stack figures to a tenth of a cent: a NAT gateway is $0.045/h."""
    return "n/a" if value is None else f"{value:,.3f}"


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


@dataclass(frozen=True)
class CostRow:
    """One part of the stack: how many, at what price, and $/hour at minimum and maximum scale
    (None where no price is known)."""

    part: str
    count: str
    price: prices.Price | None
    usd_min: float | None
    usd_max: float | None


def _range(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def _counted(part: str, count: int, price: prices.Price) -> CostRow:
    return CostRow(part, str(count), price, count * price.usd_per_hour, count * price.usd_per_hour)


def _nodes(part: str, low: int, high: int, price: prices.Price | None) -> CostRow:
    each = None if price is None else price.usd_per_hour
    return CostRow(part, _range(low, high), price, None if each is None else low * each, None if each is None else high * each)


def cost_rows(spec: PlatformSpec, synthesis: Synthesis) -> list[CostRow]:
    """The whole stack's parts with an hourly price, GPU pools first."""
    standing = [PoolRow(pool) for pool in derive_pools(spec) if not pool.on_request]
    on_request = [PoolRow(pool) for pool in derive_pools(spec) if pool.on_request]
    rows = [
        CostRow(
            "GPU pools (table above)",
            str(len(standing)),
            None,
            _total([r.usd_min for r in standing]),
            _total([r.usd_max for r in standing]),
        )
    ]
    if on_request:
        rows.append(
            CostRow(
                "GPU pools on request, once granted (table above)",
                str(len(on_request)),
                None,
                _total([r.usd_min for r in on_request]),
                _total([r.usd_max for r in on_request]),
            )
        )
    declared = {token: len(synthesis.by_type(token)) for token in {r["type"] for r in synthesis.resources}}
    gpu_min = sum(p.min_nodes for p in spec.node_pools)
    gpu_max = sum(p.max_nodes for p in spec.node_pools)
    if spec.cloud == "aws":
        system = spec.aws_settings.system_nodes
        gib_min = sum(p.root_volume_gib * p.min_nodes for p in spec.node_pools)
        gib_max = sum(p.root_volume_gib * p.max_nodes for p in spec.node_pools)
        gp3 = prices.EBS_GP3_GIB.usd_per_hour
        rows += [
            _nodes(f"system nodes ({system.instance_type})", system.min_nodes, system.max_nodes, prices.SYSTEM_INSTANCES.get(system.instance_type)),
            CostRow(f"GPU node root volumes (gp3, {_range(gib_min, gib_max)} GiB)", _range(gpu_min, gpu_max), prices.EBS_GP3_GIB, gib_min * gp3, gib_max * gp3),
            _counted("EKS control plane", declared.get("aws:eks/cluster:Cluster", 0), prices.EKS_CLUSTER),
            _counted("NAT gateways", declared.get("aws:ec2/natGateway:NatGateway", 0), prices.NAT_GATEWAY),
            _counted("public IPv4 addresses (NAT)", declared.get("aws:ec2/eip:Eip", 0), prices.PUBLIC_IPV4),
            _counted("KMS keys", declared.get("aws:kms/key:Key", 0), prices.KMS_KEY),
        ]
    elif spec.cloud == "gcp":
        assert spec.gcp is not None, "parse_spec requires the gcp section for cloud: gcp"
        system = spec.gcp.system_nodes
        nodes_min, nodes_max = system.min_nodes + gpu_min, system.max_nodes + gpu_max
        gateways = declared.get("gcp:compute/routerNat:RouterNat", 0)
        disk = prices.GKE_BOOT_DISK_GB * prices.PD_BALANCED_GB.usd_per_hour
        rows += [
            _nodes(f"system nodes ({system.machine_type})", system.min_nodes, system.max_nodes, prices.SYSTEM_INSTANCES.get(system.machine_type)),
            CostRow(
                f"node boot disks ({prices.GKE_BOOT_DISK_GB} GB pd-balanced, GKE's default)",
                _range(nodes_min, nodes_max), prices.PD_BALANCED_GB, nodes_min * disk, nodes_max * disk,
            ),
            _counted("GKE cluster management fee", declared.get("gcp:container/cluster:Cluster", 0), prices.GKE_CLUSTER),
            CostRow(
                f"Cloud NAT ({gateways} gateway(s), every node behind it)", _range(nodes_min, nodes_max), prices.CLOUD_NAT_PER_VM,
                gateways * prices.cloud_nat_per_hour(nodes_min), gateways * prices.cloud_nat_per_hour(nodes_max),
            ),
        ]
    return rows


def _price_lines(spec: PlatformSpec, rows: list[CostRow]) -> list[str]:
    """Every price the figures use, with its source: GPU instance types, then the rest."""
    lines = ["| item | list price | source |", "|---|---|---|"]
    shapes = sorted({p.instance_type.name: p.instance_type for p in derive_pools(spec) if p.instance_type}.items())
    for name, shape in shapes:
        source = "components/facts/catalog.py: " + ("EC2 accelerated computing instance pages" if shape.cloud == "aws" else "Compute Engine GPU machine types")
        lines.append(f"| {name} | ${shape.usd_per_hour:g}/h | {source} |")
    used = {r.price.item: r.price for r in rows if r.price is not None}
    if any(r.price is prices.CLOUD_NAT_PER_VM for r in rows):
        used[prices.CLOUD_NAT_FLAT.item] = prices.CLOUD_NAT_FLAT
    lines += [f"| {p.item} | {p.listed} | {p.source} |" for p in used.values()]
    return lines if len(lines) > 2 else ["No part of this stack has a price here."]


def markdown(spec: PlatformSpec, stack: str, synthesis: Synthesis) -> str:
    lines = [
        f"# {stack}: {spec.cloud} {spec.environment}, cluster {spec.cluster.name}"
        f" (Kubernetes {spec.cluster.kubernetes_version})",
        "",
        "## GPU pools",
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
            " and are counted apart from the total (the whole-stack maximum below includes them, once granted)."
        )
    lines += [
        "",
        f"## Whole stack, $/hour (estimate, list prices of {prices.PRICE_DATE})",
        "",
        "| part | count | $/h min | $/h max |",
        "|---|---|---|---|",
    ]
    costs = cost_rows(spec, synthesis)
    lines += [f"| {r.part} | {r.count} | {_usd3(r.usd_min)} | {_usd3(r.usd_max)} |" for r in costs]
    lines += [
        f"| **stack total** | | {_usd3(_total([r.usd_min for r in costs]))} | {_usd3(_total([r.usd_max for r in costs]))} |",
        "",
        "Minimum: every pool at its minimum node count; maximum: every pool at its maximum. n/a: no"
        " reference price, left out of the total. Billed by use and not in the total: "
        + "; ".join(prices.USAGE_BASED[spec.cloud])
        + ".",
        "",
        f"## Prices (estimates: on-demand list prices, us-east-1 / us-central1, read {prices.PRICE_DATE})",
        "",
        *_price_lines(spec, costs),
        "",
    ]
    lines.append("")
    return "\n".join(lines)


def stack_line(spec: PlatformSpec, synthesis: Synthesis) -> str:
    """The whole stack's $/hour as one terminal line."""
    costs = cost_rows(spec, synthesis)
    return (
        f"whole stack $/h (estimate, {prices.PRICE_DATE}): min {_usd3(_total([r.usd_min for r in costs]))},"
        f" max {_usd3(_total([r.usd_max for r in costs]))} (GPU pools, system nodes, control plane, NAT: summary.md)"
    )


def table(spec: PlatformSpec) -> str:
    """The same figures as a compact plain-text table for the terminal."""
    body = [_HEADERS, *rows(spec)]
    widths = [max(len(row[i]) for row in body) for i in range(len(_HEADERS))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in body)

"""The dispatch order of the fleet: which worker MultiKueue's Incremental dispatcher tries first.

Kueue v0.19.2 takes one order per ClusterQueue (the MultiKueueConfig of its one MultiKueue
check), not one per GPU model: a check cannot apply to some flavors only, nor a ClusterQueue carry
two (pkg/cache/scheduler/clusterqueue.go), and a LocalQueue feeds one ClusterQueue. So the
default order compares workers across models by relative price: for each GPU model the workers
share, a worker's cheapest $/GPU-hour for it over the fleet's cheapest, weighted by the slots the
fleet has of that model; cheapest first, then by free quota (slots no team holds, most first),
then by name. Per-model orders are reported beside it (`per_model`), so a reviewer sees where one
model would prefer another worker; `fleet.order` overrides.
"""

from __future__ import annotations

from typing import Mapping

from components.fleet.plan import Description, gpu_models


def model_prices(description: Description) -> dict[str, float]:
    """The worker's cheapest reference $/GPU-hour per GPU model it has."""
    prices: dict[str, float] = {}
    for pool in description["pools"].values():
        price = pool.get("usdPerGpuHour")
        if price is None:
            continue
        model = pool["gpuModel"]
        prices[model] = min(prices.get(model, price), price)
    return prices


def _slots(descriptions: Mapping[str, Description], model: str) -> int:
    return sum(int(p["maxSlots"]) for d in descriptions.values() for p in d["pools"].values() if p["gpuModel"] == model)


def free_quota(description: Description) -> int:
    return sum(int(v) for v in description["sharedQuota"].values())


def per_model(descriptions: Mapping[str, Description]) -> dict[str, list[str]]:
    """For each GPU model, the workers that have it, cheapest first (then free quota, name)."""
    out: dict[str, list[str]] = {}
    for model in gpu_models(descriptions):
        having = [w for w, d in descriptions.items() if model in model_prices(d)]
        out[model] = sorted(having, key=lambda w: (model_prices(descriptions[w])[model], -free_quota(descriptions[w]), w))
    return out


def default_order(descriptions: Mapping[str, Description]) -> list[str]:
    prices = {w: model_prices(d) for w, d in descriptions.items()}
    common = [m for m in gpu_models(descriptions) if all(m in p for p in prices.values())]
    models = common or gpu_models(descriptions)

    def score(worker: str) -> float:
        weighted = total = 0.0
        for model in models:
            offered = [p[model] for p in prices.values() if model in p]
            if model not in prices[worker] or not offered:
                continue
            weight = _slots(descriptions, model)
            weighted += weight * prices[worker][model] / min(offered)
            total += weight
        return weighted / total if total else float("inf")

    return sorted(descriptions, key=lambda w: (round(score(w), 6), -free_quota(descriptions[w]), w))


def dispatch_order(override: list[str] | None, descriptions: Mapping[str, Description]) -> list[str]:
    return list(override) if override is not None else default_order(descriptions)

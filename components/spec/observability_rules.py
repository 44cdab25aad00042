"""Observability rules: a metrics store the cloud offers, Grafana only beside a Prometheus."""

from __future__ import annotations

from components.spec.models import PlatformSpec
from components.spec.problems import ROOT, Problem


def observability_problems(spec: PlatformSpec) -> list[Problem]:
    at = f"{ROOT}.observability"
    obs = spec.observability
    problems: list[Problem] = []
    if obs.prometheus == "managed" and spec.cloud != "gcp":
        problems.append(
            Problem(
                f"{at}.prometheus",
                f"managed (Google Cloud Managed Service for Prometheus) needs cloud: gcp; on {spec.cloud} use"
                " kube-prometheus-stack or none",
            )
        )
    if obs.grafana and obs.backend(spec.cloud) == "none":
        problems.append(Problem(f"{at}.grafana", "shows the stack's Prometheus: needs prometheus other than none"))
    # The default tiers live with the layer (components.kubernetes.tiers), which the spec may not
    # import; the layer's test checks names against them.
    tiers = spec.scheduling.priority_tiers
    tier_names = [tier.name for tier in tiers] if tiers is not None else list(obs.pending_minutes_per_tier)
    for name in obs.pending_minutes_per_tier:
        if name not in tier_names:
            problems.append(
                Problem(
                    f"{at}.pendingMinutesPerTier.{name}",
                    f"is not a priority tier of this stack; tiers: {', '.join(tier_names)}",
                )
            )
    return problems

"""Observability rules: a metrics store the cloud offers, Grafana only beside the chart's Prometheus."""

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
    if obs.prometheus == "amp" and spec.cloud != "aws":
        problems.append(
            Problem(
                f"{at}.prometheus",
                f"amp (Amazon Managed Service for Prometheus) needs cloud: aws; on {spec.cloud} use"
                " kube-prometheus-stack or none",
            )
        )
    backend = obs.backend(spec.cloud)
    if obs.grafana and backend == "none":
        problems.append(Problem(f"{at}.grafana", "shows the stack's Prometheus: needs prometheus other than none"))
    elif obs.grafana and backend == "managed":
        # Grafana against GMP needs its query frontend or datasource syncer and a Google service
        # account with monitoring.viewer (GMP docs "Query using Grafana"); the platform does not
        # declare those, so it would show nothing (docs/observability.md, "Grafana on GKE").
        problems.append(
            Problem(
                f"{at}.grafana",
                "is not offered with prometheus: managed (metrics are in Cloud Monitoring, where Metrics"
                " Explorer and PromQL read them); set prometheus: kube-prometheus-stack for Grafana on GKE",
            )
        )
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

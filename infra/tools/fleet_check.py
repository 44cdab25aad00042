"""`gpu-platform check` on a fleet manager stack (docs/fleet.md, "Check").

The manager's own objects are validated like any stack's (Kubernetes schemas of its core objects;
its Kueue objects against their CRD schemas in the tests), and the fleet's fit proof (components.checks.fleet_fit) holds every job the manager
accepts against the workers' synthesized resources; every worker's API endpoint must admit the
manager's egress ranges (`fleet-worker-reachable`, components.checks.rules.fleet).
"""

from __future__ import annotations

from components.checks import fleet_fit
from components.checks.rules import base
from components.checks.rules import fleet as fleet_rules
from infra import offline
from infra.tools import check

FIT_RULE = "fleet-job-fits-worker"


def check_fleet(result: offline.FleetSynthesis) -> list[check.StackReport]:
    """The manager's report. Its workers are stacks of their own, checked when named (or with
    every stack), so their findings are not repeated here."""
    workers = {
        name: fleet_fit.Worker(spec, base.from_synthesis(synthesis.resources))
        for name, (spec, synthesis) in result.workers.items()
    }
    findings, validated, skipped = check.schema_findings(result.synthesis, result.spec.cluster.kubernetes_version)
    manager = result.synthesis
    key = f"{check.synth.STACK_TYPE}::{manager.project}-{manager.stack}"
    findings += [
        base.Finding(base.Violation(FIT_RULE, key, message), "mandatory") for message in fleet_fit.misfits(workers)
    ]
    findings += [
        base.Finding(base.Violation(fleet_rules.REACH_RULE, key, f"{name}: {why} (worker resource {resource})"), "mandatory")
        for name, worker in workers.items()
        for resource, why in fleet_rules.unreachable(worker.resources, result.spec.fleet.manager_cidrs)
    ]
    return [check.StackReport(manager.stack, manager.project, findings, validated, skipped)]

"""The manager reaches every worker's API endpoint from its egress ranges (fleet-worker-reachable)."""

from __future__ import annotations

import copy
from typing import Any

from components.checks.rules import base, fleet as fleet_rule
from infra import offline
from infra.tools import fleet_check

AWS, GCP = "organization/gpu-platform/prod-aws", "organization/gpu-platform/prod-gcp"
MANAGER = ["198.51.100.0/24"]


def cluster(fleet: offline.FleetSynthesis, worker: str) -> dict[str, Any]:
    records = copy.deepcopy(fleet.workers[worker][1].resources)
    return next(r for r in records if r["type"] in (fleet_rule.EKS_CLUSTER, fleet_rule.GKE_CLUSTER))


def why(record: dict[str, Any], cidrs: list[str] = MANAGER) -> list[str]:
    return [message for _, message in fleet_rule.unreachable(base.from_synthesis([record]), cidrs)]


def test_the_example_fleet_has_no_reach_finding(fleet: offline.FleetSynthesis) -> None:
    [report] = fleet_check.check_fleet(fleet)
    assert [f for f in report.findings if f.violation.rule == fleet_rule.REACH_RULE] == []


def test_both_example_workers_admit_the_manager_range(fleet: offline.FleetSynthesis) -> None:
    assert why(cluster(fleet, AWS)) == [] and why(cluster(fleet, GCP)) == []


def test_a_manager_range_outside_the_gke_authorized_networks_fails(fleet: offline.FleetSynthesis) -> None:
    assert why(cluster(fleet, GCP), ["192.0.2.0/24"]) == [
        "its GKE authorized networks do not admit the manager's range 192.0.2.0/24 "
        "(gcp.authorizedNetworks: 203.0.113.0/24, 198.51.100.0/24)"
    ]


def test_a_manager_range_wider_than_the_allowed_one_fails(fleet: offline.FleetSynthesis) -> None:
    assert len(why(cluster(fleet, AWS), ["198.51.0.0/16"])) == 1


def test_a_private_eks_endpoint_fails(fleet: offline.FleetSynthesis) -> None:
    record = cluster(fleet, AWS)
    record["inputs"]["vpcConfig"] = {"endpointPublicAccess": False, "endpointPrivateAccess": True}
    assert why(record)[0].startswith("its EKS API endpoint is private")


def test_a_public_eks_endpoint_without_cidrs_admits_everyone(fleet: offline.FleetSynthesis) -> None:
    record = cluster(fleet, AWS)
    del record["inputs"]["vpcConfig"]["publicAccessCidrs"]
    assert why(record, ["192.0.2.0/24"]) == []


def test_a_gke_private_endpoint_fails(fleet: offline.FleetSynthesis) -> None:
    record = cluster(fleet, GCP)
    record["inputs"]["privateClusterConfig"]["enablePrivateEndpoint"] = True
    assert why(record) == ["its GKE control plane has only a private endpoint: the manager reaches it only from inside the VPC"]


def test_the_check_reports_a_planted_unreachable_worker_as_mandatory(fleet: offline.FleetSynthesis) -> None:
    planted = copy.deepcopy(fleet)
    record = cluster(planted, GCP)
    records = planted.workers[GCP][1].resources
    index = next(i for i, r in enumerate(records) if r["type"] == fleet_rule.GKE_CLUSTER)
    record["inputs"]["masterAuthorizedNetworksConfig"]["cidrBlocks"] = [{"cidrBlock": "203.0.113.0/24"}]
    records[index] = record
    [report] = fleet_check.check_fleet(planted)
    [finding] = [f for f in report.findings if f.violation.rule == fleet_rule.REACH_RULE]
    assert finding.level == "mandatory"
    assert finding.violation.message.startswith(f"{GCP}: its GKE authorized networks do not admit the manager's range 198.51.100.0/24")

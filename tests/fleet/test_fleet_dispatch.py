"""The manager's Kueue and MultiKueue in the fleet simulation (infra.tools.simulate.fleet), one
instant at a time: the fleet example's manager and workers, with a few jobs placed by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from infra import offline
from infra.tools.simulate import fleet_report
from infra.tools.simulate.command import Options
from infra.tools.simulate.fleet import FleetSimulation
from infra.tools.simulate.model import PREEMPTION_S
from infra.tools.simulate.state import REJECTED

HEADER = "id,submit_s,team,tier,pool,nodes,gpus_per_node,duration_s,checkpoint_every_s\n"


def _fleet(synthesis: offline.FleetSynthesis, tmp_path: Path, rows: list[str], **quota: Any) -> FleetSimulation:
    """The simulation of `rows` (id,submit_s,team,tier[,nodes]: H100 jobs of 10 hours, one node
    unless said), not run; `quota` replaces fields of the manager's quota."""
    trace = tmp_path / "trace.csv"
    lines = [row.split(",") + ["1"] for row in rows]
    trace.write_text(HEADER + "".join(f"{','.join(line[:4])},H100-80GB,{line[4]},8,36000,1800\n" for line in lines))
    prepared = fleet_report.prepare("fleet", synthesis, Options(trace, tmp_path, 0, None, [], []))
    manager = dataclasses.replace(prepared.quota, **quota)
    sim = FleetSimulation(prepared.workers, manager, prepared.dispatch, prepared.jobs, 0, None)
    for worker in sim.workers:
        worker.start()
    return sim


def _arrive(sim: FleetSimulation, ids: list[str], now: float) -> None:
    for job_id in ids:
        sim._arrive(sim.by_id[job_id], now)
    sim._admission(now)


def _only_research(sim: FleetSimulation) -> None:
    """One 8-GPU job at a time on the manager: research's 8 H100 GPUs, nothing to borrow."""
    sim.quota = dataclasses.replace(sim.quota, nominal={**sim.quota.nominal, "H100-80GB": {"applied": 0, "research": 8}}, cohort_quota={**sim.quota.cohort_quota, "H100-80GB": {"fleet": 0}})


def test_a_winner_evicted_on_its_worker_queues_on_the_manager_from_its_eviction(fleet: offline.FleetSynthesis, tmp_path: Path) -> None:
    sim = _fleet(fleet, tmp_path, ["first,0,research,standard", "later,900,research,standard"])
    _only_research(sim)
    _arrive(sim, ["first"], 0.0)
    worker = sim.workers[0]
    worker._settle(0.0)
    _arrive(sim, ["later"], 900.0)
    worker._pods_ready_timeout(worker.by_id["first"], 1800.0)
    sim._take_back(1800.0)
    sim._admission(1800.0)
    assert sim.by_id["later"].reserved and not sim.by_id["first"].reserved


def test_a_preemptor_over_its_nominal_quota_preempts_only_what_it_needs_in_its_own_queue(fleet: offline.FleetSynthesis, tmp_path: Path) -> None:
    """applied borrows every H100 GPU of the cohort with best-effort jobs; its standard job,
    applied being over its nominal quota, may borrow after preempting (preemption.go: not
    under nominal, borrowing allowed): one best-effort job makes room."""
    rows = [f"fill-{i:02d},0,applied,best-effort" for i in range(16)] + ["urgent,3600,applied,standard"]
    sim = _fleet(fleet, tmp_path, rows)
    _arrive(sim, [f"fill-{i:02d}" for i in range(16)], 0.0)
    sim._arrive(sim.by_id["urgent"], 3600.0)
    assert len(sim._targets(sim.by_id["urgent"])) == 1


def test_a_reservation_the_manager_preempts_holds_its_quota_until_its_job_stops(fleet: offline.FleetSynthesis, tmp_path: Path) -> None:
    rows = [f"fill-{i:02d},0,applied,best-effort" for i in range(16)] + ["claim,3600,research,production"]
    sim = _fleet(fleet, tmp_path, rows)
    _arrive(sim, [f"fill-{i:02d}" for i in range(16)], 0.0)
    sim.workers[0]._settle(0.0)
    _arrive(sim, ["claim"], 3600.0)
    assert any(e.preempting and e.reserved for e in sim.entries)
    assert not sim.by_id["claim"].reserved


def test_a_head_within_its_nominal_quota_goes_before_a_higher_priority_head_that_would_borrow(fleet: offline.FleetSynthesis, tmp_path: Path) -> None:
    """8 GPUs free in the cohort: research's best-effort head fits its nominal quota, applied's
    production head would borrow; research reclaims nothing (reclaimWithinCohort Never here)."""
    rows = [f"a-{i},0,applied,production" for i in range(8)] + [f"r-{i},0,research,production" for i in range(7)]
    rows += ["applied-head,60,applied,production", "research-head,60,research,best-effort"]
    sim = _fleet(fleet, tmp_path, rows, reclaim={"applied": "Never", "research": "Never"})
    _arrive(sim, [f"a-{i}" for i in range(8)] + [f"r-{i}" for i in range(7)], 0.0)
    _arrive(sim, ["applied-head", "research-head"], 60.0)
    assert sim.by_id["research-head"].reserved and not sim.by_id["applied-head"].reserved


def test_a_winner_evicted_and_admitted_again_on_its_worker_at_one_instant_is_taken_back(fleet: offline.FleetSynthesis, tmp_path: Path) -> None:
    sim = _fleet(fleet, tmp_path, ["job,0,research,standard"])
    _arrive(sim, ["job"], 0.0)
    worker = sim.workers[0]
    worker._settle(0.0)
    sim.evicted(worker, "job")
    sim.admitted(worker, "job", 0.0)
    sim._take_back(0.0)
    assert sim.by_id["job"] in sim.pending


def test_a_copy_multikueue_deletes_is_removed_even_once_admitted(fleet: offline.FleetSynthesis, tmp_path: Path) -> None:
    sim = _fleet(fleet, tmp_path, ["job,0,research,standard"])
    _arrive(sim, ["job"], 0.0)
    worker = sim.workers[0]
    worker._settle(0.0)
    worker.withdraw("job", 0.0, "deleted")
    assert worker.by_id["job"].state == REJECTED




def test_a_copy_deleted_while_its_deactivation_is_pending_is_not_evicted_again(fleet: offline.FleetSynthesis, tmp_path: Path) -> None:
    """The manager preempts the winner (its copy marked for deactivation); the worker's Kueue
    preempts the copy first, and MultiKueue deletes it: the deactivation's eviction then finds
    nothing to evict."""
    sim = _fleet(fleet, tmp_path, ["job,0,research,standard"])
    _arrive(sim, ["job"], 0.0)
    worker = sim.workers[0]
    worker._settle(0.0)
    sim._preempt(sim.by_id["job"], 1.0)
    copy = worker.by_id["job"]
    worker._evict(worker.pools[copy.pool], copy, 2.0)
    sim._take_back(2.0)
    while worker.next_time() <= 1.0 + PREEMPTION_S:
        worker.handle_due(worker.next_time())
    assert copy.state == REJECTED


def test_a_waiting_preemptor_keeps_the_quota_it_waits_for_from_later_heads(fleet: offline.FleetSynthesis, tmp_path: Path) -> None:
    """8 H100 GPUs free; applied's 16-GPU head fits its nominal quota once it reclaims one of
    research's borrowing jobs, and waits for it. Research's heads that borrow then find the 8
    GPUs held: the first needs 16 and is set aside, the next, 8 GPUs, must not take them."""
    rows = [f"a-{i},0,applied,standard" for i in range(4)] + [f"r-{i:02d},0,research,standard" for i in range(11)]
    rows += ["applied-head,60,applied,standard,2", "research-big,60,research,standard,2", "research-small,60,research,standard"]
    sim = _fleet(fleet, tmp_path, rows)
    _arrive(sim, [f"a-{i}" for i in range(4)] + [f"r-{i:02d}" for i in range(11)], 0.0)
    _arrive(sim, ["applied-head", "research-big", "research-small"], 60.0)
    assert not sim.by_id["research-small"].reserved


def test_a_preemptor_stays_its_queues_head_until_admitted(fleet: offline.FleetSynthesis, tmp_path: Path) -> None:
    """applied's production head can never fit (56 GPUs, over its nominal 48) and is set aside;
    its next head reclaims 16 GPUs from research and waits. When they are released, it is still
    applied's head (sticky), ahead of the production one and of research's borrowing head."""
    rows = [f"a-{i},0,applied,standard" for i in range(4)] + [f"r-{i:02d},0,research,standard" for i in range(11)]
    rows += ["applied-top,60,applied,production,7", "applied-head,60,applied,standard,2"]
    rows += ["research-1,60,research,standard", "research-2,60,research,standard"]
    sim = _fleet(fleet, tmp_path, rows)
    _arrive(sim, [f"a-{i}" for i in range(4)] + [f"r-{i:02d}" for i in range(11)], 0.0)
    _arrive(sim, ["applied-top", "applied-head", "research-1", "research-2"], 60.0)
    for _, index, _ in sim.releases:
        sim._released(sim.entries[index])
    sim._admission(60.0 + PREEMPTION_S)
    assert sim.by_id["applied-head"].reserved

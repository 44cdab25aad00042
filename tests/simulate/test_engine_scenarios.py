"""Hand-computed simulations: each scenario's waits, ends, losses and costs are worked out in the
comments from the rules in infra/tools/simulate/engine.py, then checked exactly."""

from __future__ import annotations

import math
import random

import pytest
from sim_support import job, outcomes, pool, queue, segments, stack

from infra.tools.simulate import engine, state


def node_steps(p: state.PoolOutcome) -> list[tuple[float, int]]:
    steps: list[tuple[float, int]] = []
    for time, nodes, _ in p.series:
        if not steps or steps[-1][1] != nodes:
            steps.append((time, nodes))
    return steps


def test_one_pool_two_teams_wait_for_their_own_quota_then_borrow() -> None:
    # Two always-on nodes of 8 slots; teams a and b hold 8 each, nothing else to lend.
    # t=0: a1 and b1 fill both nodes until t=100. a2 (t=10) and b2 (t=20) wait for their own
    # queue's quota, back at t=100: both start then (waits 90 and 80). a3 (t=30) would have to
    # borrow b's quota, which b2 holds until t=130: a3 starts at 130 (wait 100), ends at 140.
    sim = stack(
        [pool(min_nodes=2, max_nodes=2, autoscaled=False)],
        [queue("a", {"p": 8}), queue("b", {"p": 8})],
    )
    trace = [
        job("a1", 0, "a"),
        job("b1", 0, "b"),
        job("a2", 10, "a", duration=50),
        job("b2", 20, "b", duration=30),
        job("a3", 30, "a", duration=10),
    ]
    jobs = outcomes(engine.simulate(sim, trace))
    waits = {j.id: j.first_start - j.submit for j in jobs.values() if j.first_start is not None}
    assert waits == {"a1": 0, "b1": 0, "a2": 90, "b2": 80, "a3": 100}
    assert {j.id: j.end for j in jobs.values()} == {"a1": 100, "b1": 100, "a2": 150, "b2": 130, "a3": 140}
    assert all(j.status == "finished" and j.preemptions == 0 for j in jobs.values())


def test_a_team_borrows_idle_quota_and_the_owner_reclaims_it() -> None:
    # Team a runs two best-effort jobs from t=0: one in its quota, one on b's idle quota. At
    # t=250 b submits a standard job that fits in b's nominal quota: Kueue reclaims from the
    # borrower, preempting the most recently admitted best-effort job (a2). a2 checkpoints every
    # 100 s, so it keeps 200 s of work and loses 50 s x 8 slots. b1 runs 250-350; a2 borrows again
    # at 350 and runs its remaining 800 s until 1150.
    sim = stack(
        [pool(min_nodes=2, max_nodes=2, autoscaled=False)],
        [queue("a", {"p": 8}), queue("b", {"p": 8})],
    )
    trace = [
        job("a1", 0, "a", "best-effort", duration=1000),
        job("a2", 0, "a", "best-effort", duration=1000, checkpoint=100),
        job("b1", 250, "b", "standard"),
    ]
    result = engine.simulate(sim, trace)
    jobs = outcomes(result)
    assert segments(result, "a2") == [(0, 250, "preempted"), (350, 1150, "finished")]
    assert (jobs["a2"].preemptions, jobs["a2"].lost_gpu_s) == (1, 50 * 8)
    assert segments(result, "b1") == [(250, 350, "finished")]
    assert segments(result, "a1") == [(0, 1000, "finished")]


def test_the_owner_cannot_reclaim_from_a_borrower_of_equal_priority() -> None:
    # reclaimWithinCohort LowerPriority: b's standard job waits for a's standard borrower to end.
    sim = stack(
        [pool(min_nodes=2, max_nodes=2, autoscaled=False)],
        [queue("a", {"p": 8}), queue("b", {"p": 8})],
    )
    trace = [job("a1", 0, "a", duration=1000), job("a2", 0, "a", duration=500), job("b1", 250, "b")]
    jobs = outcomes(engine.simulate(sim, trace))
    assert (jobs["b1"].first_start, jobs["a2"].preemptions) == (500, 0)


def test_production_preempts_best_effort_in_the_same_queue() -> None:
    # One node, one team. The best-effort job runs from 0 with a checkpoint every 60 s; the
    # production job arrives at 130 and preempts it (withinClusterQueue LowerPriority): 120 s are
    # saved, 10 s x 8 slots lost. Production runs 130-230; best-effort resumes at 230 with 380 s
    # left and ends at 610.
    sim = stack([pool(min_nodes=1, max_nodes=1, autoscaled=False)], [queue("a", {"p": 8}, cohort=None)])
    trace = [
        job("e1", 0, "a", "best-effort", duration=500, checkpoint=60),
        job("p1", 130, "a", "production"),
    ]
    result = engine.simulate(sim, trace)
    jobs = outcomes(result)
    assert segments(result, "p1") == [(130, 230, "finished")]
    assert segments(result, "e1") == [(0, 130, "preempted"), (230, 610, "finished")]
    assert (jobs["e1"].preemptions, jobs["e1"].lost_gpu_s, jobs["p1"].first_start) == (1, 80, 130)


def test_best_effort_never_preempts_a_standard_job() -> None:
    sim = stack([pool(min_nodes=1, max_nodes=1, autoscaled=False)], [queue("a", {"p": 8}, cohort=None)])
    jobs = outcomes(engine.simulate(sim, [job("s1", 0, "a"), job("e1", 10, "a", "best-effort")]))
    assert (jobs["s1"].preemptions, jobs["e1"].first_start) == (0, 100)


def test_a_spot_interruption_loses_the_work_since_the_last_checkpoint() -> None:
    # One always-on spot node. The pool's first interruption draw (seed 27) falls at t1 ~ 1756 s:
    # the job has saved 2 checkpoints (1200 s) and loses t1 - 1200 s x 8 slots. The group boots a
    # replacement (300 s); the job, still admitted, resumes on it at t1 + 300 with 2400 s left.
    rate = 20 / 86400
    draws = random.Random("27:spot")
    t1, replacement_lasts = draws.expovariate(rate), draws.expovariate(rate)
    assert 1200 < t1 < 1800 and replacement_lasts > 3000, "the seed's draws this scenario relies on"
    sim = stack(
        [pool("spot", min_nodes=1, max_nodes=1, spot=True, per_node_day=20, scale_up_s=300)],
        [queue("a", {"spot": 8}, cohort=None)],
    )
    result = engine.simulate(sim, [job("j", 0, "a", pool="spot", duration=3600, checkpoint=600)], seed=27)
    jobs = outcomes(result)
    assert segments(result, "j") == [(0, t1, "interrupted"), (t1 + 300, t1 + 2700, "finished")]
    assert jobs["j"].interruptions == 1
    assert jobs["j"].lost_gpu_s == pytest.approx((t1 - 1200) * 8)


def test_a_job_without_checkpoints_loses_everything_it_ran() -> None:
    rate = 20 / 86400
    t1 = random.Random("27:spot").expovariate(rate)
    sim = stack(
        [pool("spot", min_nodes=1, max_nodes=1, spot=True, per_node_day=20, scale_up_s=300)],
        [queue("a", {"spot": 8}, cohort=None)],
    )
    result = engine.simulate(sim, [job("j", 0, "a", pool="spot", duration=3600)], seed=27)
    assert segments(result, "j") == [(0, t1, "interrupted"), (t1 + 300, t1 + 3900, "finished")]
    assert outcomes(result)["j"].lost_gpu_s == pytest.approx(t1 * 8)


def test_jobs_too_large_for_their_pool_or_quota_are_rejected_not_queued() -> None:
    sim = stack(
        [pool(max_nodes=2), pool("shared", slots=4, gpus=1, sharing="shared", max_nodes=4)],
        [queue("a", {"p": 8, "shared": 4}, cohort=None)],
    )
    trace = [
        job("too-many-nodes", 0, "a", nodes=3),
        job("too-many-gpus", 0, "a", gpus=16),
        job("two-slots-of-a-shared-gpu", 0, "a", pool="shared", gpus=2),
        job("over-quota", 0, "a", nodes=2),
        job("fits", 0, "a"),
    ]
    jobs = outcomes(engine.simulate(sim, trace))
    assert {j.id for j in jobs.values() if j.status == "rejected"} == {
        "too-many-nodes", "too-many-gpus", "two-slots-of-a-shared-gpu", "over-quota"
    }
    assert jobs["too-many-nodes"].reason == "needs 3 nodes; pool p has at most 2"
    assert jobs["over-quota"].reason == (
        "needs 16 GPU slots; ClusterQueue a may hold at most 8 on pool p (nominal quota plus what its cohort can lend)"
    )
    assert all(j.first_start is None and j.end is None for j in jobs.values() if j.status == "rejected")
    assert (jobs["fits"].status, jobs["fits"].first_start) == ("finished", 0)


def test_nodes_boot_for_the_scale_up_delay_and_are_billed_until_removed_idle() -> None:
    # Scale from zero: the node boots 0-300, runs the job 300-400, is unneeded 400-1000 and then
    # removed. Billed 1000 s at $10/h, idle time included.
    sim = stack([pool(scale_up_s=300)], [queue("a", {"p": 16}, cohort=None)], unneeded_s=600)
    result = engine.simulate(sim, [job("j", 0, "a")], horizon_s=2000)
    assert segments(result, "j") == [(300, 400, "finished")]
    (p,) = result.pools
    assert p.node_seconds == 1000
    assert node_steps(p) == [(0, 1), (1000, 0)]
    assert [(t, queued) for t, _, queued in p.series] == [(0, 8), (300, 0), (1000, 0)]


def test_no_node_is_removed_within_the_delay_after_a_scale_up() -> None:
    # j1 runs on the first node 0-100; j2 (t=50) gets a second node at 50. The first node is
    # unneeded from 100, checked at 160, but the scale-up at 50 holds scale-down until 1050. The
    # second node ends its job at 2050 and goes at 2110.
    sim = stack(
        [pool(scale_up_s=0)], [queue("a", {"p": 16}, cohort=None)], unneeded_s=60, delay_after_add_s=1000
    )
    trace = [job("j1", 0, "a"), job("j2", 50, "a", duration=2000)]
    result = engine.simulate(sim, trace, horizon_s=5000)
    (p,) = result.pools
    assert node_steps(p) == [(0, 1), (50, 2), (1050, 1), (2110, 0)]


def test_opportunistic_jobs_never_cause_a_scale_up() -> None:
    # Below the autoscaler's expendable cutoff: on a pool scaled to zero it never starts.
    sim = stack([pool(scale_up_s=0)], [queue("a", {"p": 16}, cohort=None)])
    jobs = outcomes(engine.simulate(sim, [job("o", 0, "a", "opportunistic")], horizon_s=3600))
    assert (jobs["o"].status, jobs["o"].first_start) == ("unfinished", None)


def test_an_admitted_job_without_nodes_is_requeued_after_the_pods_ready_timeout() -> None:
    # One node, quota for 8 slots: two 4-slot jobs are both admitted, but a whole-GPU node runs
    # one job. j2 waits for a node 0-1800, is evicted and requeued after 60 s, admitted at 1860,
    # evicted at 3660, requeued after 120 s at 3780, and starts when j1 ends at 5000.
    sim = stack([pool(min_nodes=1, max_nodes=1, autoscaled=False)], [queue("a", {"p": 8}, cohort=None)])
    trace = [job("j1", 0, "a", gpus=4, duration=5000), job("j2", 0, "a", gpus=4, duration=5000)]
    result = engine.simulate(sim, trace)
    jobs = outcomes(result)
    assert segments(result, "j2") == [(5000, 10000, "finished")]
    assert [(r.start, r.end) for r in result.reservations if r.job == "j2"] == [
        (0, 1800), (1860, 3660), (3780, 10000)
    ]
    assert jobs["j2"].preemptions == 0


def test_the_horizon_cuts_running_jobs_and_leaves_them_unfinished() -> None:
    sim = stack([pool(min_nodes=1, max_nodes=1, autoscaled=False)], [queue("a", {"p": 8}, cohort=None)])
    result = engine.simulate(sim, [job("j", 0, "a", duration=1000), job("k", 10, "a")], horizon_s=400)
    jobs = outcomes(result)
    assert segments(result, "j") == [(0, 400, "horizon")]
    assert (jobs["j"].status, jobs["j"].end, jobs["k"].status, jobs["k"].first_start) == ("unfinished", None, "unfinished", None)
    assert result.horizon == 400


def packing_run(most_allocated: bool) -> dict[str, state.JobOutcome]:
    # Two MIG nodes of 4 slots; three 1-slot jobs, then one asking for a whole node's 4 slots.
    sim = stack(
        [pool("m", slots=4, gpus=1, sharing="mig", min_nodes=2, max_nodes=2, autoscaled=False)],
        [queue("a", {"m": 8}, cohort=None)],
        pack_most_allocated=most_allocated,
    )
    trace = [job(f"j{i}", i, "a", pool="m", gpus=1, duration=1000) for i in range(3)]
    return outcomes(engine.simulate(sim, [*trace, job("big", 10, "a", pool="m", gpus=4)]))


def test_most_allocated_packing_leaves_a_whole_node_free() -> None:
    assert packing_run(most_allocated=True)["big"].first_start == 10


def test_least_allocated_spreading_leaves_no_whole_node_free() -> None:
    # The 1-slot jobs spread: j0 and j2 on the first node, j1 on the second. The 4-slot job
    # waits until j1 (submitted at 1) leaves the second node at 1001.
    assert packing_run(most_allocated=False)["big"].first_start == 1001


def test_the_default_horizon_is_when_the_last_job_ends() -> None:
    sim = stack([pool(min_nodes=1, max_nodes=1, autoscaled=False)], [queue("a", {"p": 8}, cohort=None)])
    result = engine.simulate(sim, [job("j", 0, "a", duration=123.5)])
    assert result.horizon == 123.5
    assert math.isclose(result.pools[0].node_seconds, 123.5)


def test_spot_nodes_are_lost_as_often_as_the_pools_rate() -> None:
    # Ten busy spot nodes at 2 losses per node-day for 30 days: about 600 interruptions (Poisson,
    # standard deviation about 24); every loss hits a job, which restarts at once on the
    # replacement (no boot delay).
    sim = stack(
        [pool("spot", min_nodes=10, max_nodes=10, spot=True, per_node_day=2, scale_up_s=0)],
        [queue("a", {"spot": 80}, cohort=None)],
    )
    trace = [job(f"j{i}", 0, "a", pool="spot", duration=60 * 86400, checkpoint=3600) for i in range(10)]
    result = engine.simulate(sim, trace, seed=1, horizon_s=30 * 86400)
    assert 500 < sum(j.interruptions for j in result.jobs) < 700


def test_a_job_that_keeps_losing_its_work_ends_unfinished_at_the_run_cap() -> None:
    # A spot node lost every ~15 minutes and a 4-hour job without checkpoints: it never finishes,
    # and the default horizon stops at the last submission plus 10 x 4 h plus the stall time.
    sim = stack(
        [pool("spot", min_nodes=1, max_nodes=1, spot=True, per_node_day=96, scale_up_s=60)],
        [queue("a", {"spot": 8}, cohort=None)],
    )
    result = engine.simulate(sim, [job("j", 0, "a", pool="spot", duration=4 * 3600)], seed=3)
    stall = state.STALL_CYCLES * (1800 + 3600)
    assert result.horizon == state.RUN_CAP * 4 * 3600 + stall
    assert outcomes(result)["j"].status == "unfinished" and outcomes(result)["j"].interruptions > 100


def test_a_head_that_cannot_reclaim_reserves_its_quota_for_the_rest_of_the_cycle() -> None:
    # One MIG node of 16 slots; a and b hold 8 each, c nothing; reclaimWithinCohort
    # LowerPriority (Kueue's CanAlwaysReclaim is false). b1 (12 slots) borrows 4 of a's quota.
    # At t=10 a1 (8, within a's nominal quota) needs a preemption but b1 is of its own tier: no
    # target. Kueue reserves a's unused nominal 8 for the rest of the cycle
    # (reserveCapacityForUnreclaimablePreempt), so c1 (4, borrowing, ordered after a1) does not
    # take the 4 free slots: both start when b1 ends at 1000. Without the reservation c1 would
    # start at 10.
    sim = stack(
        [pool(slots=16, gpus=2, sharing="mig", min_nodes=1, max_nodes=1, autoscaled=False)],
        [queue("a", {"p": 8}), queue("b", {"p": 8}), queue("c", {"p": 0})],
    )
    trace = [
        job("b1", 0, "b", gpus=12, duration=1000),
        job("a1", 10, "a", gpus=8),
        job("c1", 10, "c", "best-effort", gpus=4),
    ]
    jobs = outcomes(engine.simulate(sim, trace))
    assert (jobs["a1"].first_start, jobs["c1"].first_start, jobs["b1"].preemptions) == (1000, 1000, 0)


def test_a_head_that_can_always_reclaim_reserves_nothing() -> None:
    # reclaimWithinCohort Any on every queue: a1 reclaims from b1 at once (any tier), and c1
    # takes what is left; the reservation never applies.
    sim = stack(
        [pool(slots=16, gpus=2, sharing="mig", min_nodes=1, max_nodes=1, autoscaled=False)],
        [queue("a", {"p": 8}, reclaim="Any"), queue("b", {"p": 8}, reclaim="Any"), queue("c", {"p": 0}, reclaim="Any")],
    )
    trace = [
        job("b1", 0, "b", gpus=12, duration=1000),
        job("a1", 10, "a", gpus=8),
        job("c1", 10, "c", "best-effort", gpus=4),
    ]
    jobs = outcomes(engine.simulate(sim, trace))
    assert (jobs["a1"].first_start, jobs["b1"].preemptions, jobs["c1"].first_start) == (10, 1, 10)


def test_a_higher_tier_admitted_during_scale_up_waits_for_its_node_and_evicts_no_pod() -> None:
    # Issue 21: the PriorityClasses are preemptionPolicy Never, so only Kueue preempts. One
    # always-on node runs standard s1 (0-2000). Production p1 arrives at 100; its team's quota
    # has room, so Kueue admits it without preempting; the autoscaler boots a node (600 s) and
    # p1's pods wait for it, though their priority is higher than s1's: p1 runs 700-1200, s1
    # runs to its end untouched.
    sim = stack(
        [pool(min_nodes=1, max_nodes=2, scale_up_s=600)],
        [queue("a", {"p": 16}, cohort=None)],
    )
    result = engine.simulate(sim, [job("s1", 0, "a", duration=2000), job("p1", 100, "a", "production", duration=500)])
    assert segments(result, "p1") == [(700, 1200, "finished")]
    assert segments(result, "s1") == [(0, 2000, "finished")]
    assert outcomes(result)["s1"].preemptions == 0
    (p,) = result.pools
    assert node_steps(p)[:2] == [(0, 1), (100, 2)]


def test_a_higher_tier_beyond_its_quota_is_given_room_by_kueue_not_the_scheduler() -> None:
    # The same with quota for one node: Kueue preempts s1 (withinClusterQueue LowerPriority) and
    # p1 starts at once on s1's node; no node is added.
    sim = stack([pool(min_nodes=1, max_nodes=2, scale_up_s=600)], [queue("a", {"p": 8}, cohort=None)])
    result = engine.simulate(sim, [job("s1", 0, "a", duration=2000), job("p1", 100, "a", "production", duration=500)])
    assert segments(result, "p1") == [(100, 600, "finished")]
    assert segments(result, "s1") == [(0, 100, "preempted"), (600, 2600, "finished")]
    (p,) = result.pools
    assert node_steps(p)[0] == (0, 1) and max(n for _, n in node_steps(p)) == 1

"""Kueue's fair sharing in the simulator, checked against scenarios of Kueue's own integration
tests (kubernetes-sigs/kueue@v0.19.2 test/integration/singlecluster/scheduler/fairsharing/
fair_sharing_test.go): the same cohort and quotas, the same workloads, the same admissions and
shares. Kueue's tests use CPU units; here they are GPU slots of one MIG node, so that placement
never stands in the way of what Kueue admits."""

from __future__ import annotations

import dataclasses

import pytest
from sim_support import KUEUE, job, pool, queue, stack

from infra.tools.simulate import engine, fair_sharing, model, state
from infra.tools.simulate.trace import TraceJob

FAIR = dataclasses.replace(KUEUE, fair_sharing=model.FAIR_SHARING_STRATEGIES)
LONG = 100_000.0


def fair_stack(slots: int, queues: list[model.QueueModel], cohort_quota: int = 0) -> model.StackModel:
    node = pool(slots=slots, gpus=1, sharing="mig", min_nodes=1, max_nodes=1, autoscaled=False)
    return dataclasses.replace(stack([node], queues, cohort_quota={"p": cohort_quota}), kueue=FAIR)


def run_until(sim: model.StackModel, trace: list[TraceJob], horizon: float) -> tuple[engine.Simulation, dict[str, set[str]]]:
    """The run cut at `horizon`, and the jobs each queue holds admitted there."""
    run = engine.Simulation(sim, trace, horizon_s=horizon)
    run.run()
    admitted = {q.name: set[str]() for q in sim.queues}
    for j in run.jobs:
        if j.state in (state.ADMITTED, state.RUNNING):
            admitted[sim.queues[j.queue].name].add(j.spec.id)
    return run, admitted


def share(run: engine.Simulation, name: str) -> float:
    assert run.shares is not None
    q = [x.name for x in run.model.queues].index(name)
    drs, _ = run.shares.of(q)
    return drs[1]


def preemption_enabled() -> model.StackModel:
    # "Preemption is enabled": ClusterQueues a, b and c of cohort `all`, 3 each, reclaimWithinCohort
    # Any, withinClusterQueue LowerPriority; all workloads of one priority.
    return fair_stack(9, [queue(n, {"p": 3}, cohort="all", reclaim="Any") for n in ("a", "b", "c")])


PREEMPTION_ENABLED_TRACE = [
    *(job(f"a{i}", 0, "a", pool="p", gpus=1, duration=LONG) for i in range(10)),
    *(job(f"b{i}", 10, "b", pool="p", gpus=1, duration=LONG) for i in range(5)),
    job("c0", 100, "c", pool="p", gpus=1, duration=LONG),
]


def test_kueue_preemption_enabled_admits_workloads_respecting_fair_share_a_borrows_up_to_nine() -> None:
    # "Saturating cq-a": 9 of a's 10 admitted, share 6 x 1000 / 9.
    run, admitted = run_until(preemption_enabled(), PREEMPTION_ENABLED_TRACE, 5)
    assert admitted == {"a": {f"a{i}" for i in range(9)}, "b": set(), "c": set()}
    assert (share(run, "a"), share(run, "b"), share(run, "c")) == (6.0 * 1000.0 / 9.0, 0.0, 0.0)


def test_kueue_preemption_enabled_b_takes_four_and_a_keeps_five() -> None:
    # "Finishing eviction of 4 running workloads in cqA": b is admitted 4 (3 within its nominal
    # quota, the 4th by LessThanOrEqualToFinalShare: 1000/9 <= 2000/9), a keeps 5 (the most
    # recently admitted are preempted); shares 2000/9 and 1000/9.
    # Each preemption takes model.PREEMPTION_S: b's four are admitted by 50.
    run, admitted = run_until(preemption_enabled(), PREEMPTION_ENABLED_TRACE, 90)
    assert admitted == {"a": {f"a{i}" for i in range(5)}, "b": {f"b{i}" for i in range(4)}, "c": set()}
    assert (share(run, "a"), share(run, "b"), share(run, "c")) == (2.0 * 1000.0 / 9.0, 1.0 * 1000.0 / 9.0, 0.0)


def test_kueue_preemption_enabled_c_reclaims_one_unit_from_the_highest_share_a() -> None:
    # "cq-c reclaims one unit, preemption happens in cq-a": a and b end at 1000/9 each.
    run, admitted = run_until(preemption_enabled(), PREEMPTION_ENABLED_TRACE, 200)
    assert admitted == {"a": {f"a{i}" for i in range(4)}, "b": {f"b{i}" for i in range(4)}, "c": {"c0"}}
    assert (share(run, "a"), share(run, "b"), share(run, "c")) == (1.0 * 1000.0 / 9.0, 1.0 * 1000.0 / 9.0, 0.0)


def preemption_disabled() -> model.StackModel:
    # "Preemption is disabled": a 3, b 1, shared 4 in cohort `all`, no preemption.
    return fair_stack(
        8,
        [
            queue("a", {"p": 3}, cohort="all", within="Never", reclaim="Never"),
            queue("b", {"p": 1}, cohort="all", within="Never", reclaim="Never"),
            queue("shared", {"p": 4}, cohort="all", within="Never", reclaim="Never"),
        ],
    )


# a's first four admitted workloads finish one by one (100..400 s), then two more at once (500 s),
# as the test terminates them; b's five come after a's ten.
FINISH_AT = [100.0, 200.0, 300.0, 400.0, 500.0, 500.0]
PREEMPTION_DISABLED_TRACE = [
    *(job(f"a{i}", 0, "a", pool="p", gpus=1, duration=FINISH_AT[i] if i < 6 else LONG) for i in range(10)),
    *(job(f"b{i}", 10, "b", pool="p", gpus=1, duration=LONG) for i in range(5)),
]


@pytest.mark.parametrize(
    ("horizon", "a", "b", "shares"),
    [
        # "Saturating cq-a": 8 admitted, 2 pending, share 625.
        (5, 8, 0, (625.0, 0.0)),
        # Each of the first three workloads a ends admits one of b's: 7/1, 6/2, 5/3.
        (150, 7, 1, (500.0, 0.0)),
        (250, 6, 2, (375.0, 125.0)),
        (350, 5, 3, (250.0, 250.0)),
        # The fourth admits a's own (a at 5 would be 250, b at 4 375): 5/3, shares 250 and 250.
        (450, 5, 3, (250.0, 250.0)),
        # "Terminating 2 more": a's last and one of b's; shares 125 and 375.
        (550, 4, 4, (125.0, 375.0)),
    ],
)
def test_kueue_preemption_disabled_admits_workloads_respecting_fair_share(
    horizon: float, a: int, b: int, shares: tuple[float, float]
) -> None:
    run, admitted = run_until(preemption_disabled(), PREEMPTION_DISABLED_TRACE, horizon)
    assert (len(admitted["a"]), len(admitted["b"]), admitted["shared"]) == (a, b, set())
    assert (share(run, "a"), share(run, "b")) == shares and share(run, "shared") == 0.0


def test_kueue_preemption_disabled_leaves_one_of_b_pending_at_the_end() -> None:
    run, admitted = run_until(preemption_disabled(), PREEMPTION_DISABLED_TRACE, 550)
    pending = {j.spec.id for j in run.jobs if j.state == state.PENDING}
    assert pending == {"b4"} and admitted["a"] == {"a6", "a7", "a8", "a9"}


def ineligible_head() -> model.StackModel:
    # "ClusterQueue head is ineligible for admission due to DominantResourceShare": the cohort
    # holds 9 itself, cq-p1 and cq-p2 hold 0, reclaimWithinCohort Any, withinClusterQueue
    # LowerPriority (its parent root-cohort adds nothing: the shares are over the same 9).
    queues = [queue(n, {"p": 0}, cohort="cohort-a", reclaim="Any") for n in ("cq-p1", "cq-p2")]
    return fair_stack(9, queues, cohort_quota=9)


def test_kueue_workload_of_size_5_preempts_using_less_than_initial_share_and_admits() -> None:
    # p1 holds 4 x 2. p2's 5: the first target passes LessThanOrEqualToFinalShare (5 <= 6), the
    # next fails it (5 <= 4) and passes LessThanInitialShare (5 < 6): two preempted, p2 admitted;
    # shares 4000/9 and 5000/9. p1's preempted workloads cannot preempt back (6 <= 0, 6 < 5 fail).
    trace = [job(f"p1-{i}", 0, "cq-p1", pool="p", gpus=2, duration=LONG) for i in range(4)]
    trace.append(job("p2-0", 10, "cq-p2", pool="p", gpus=5, duration=LONG))
    run, admitted = run_until(ineligible_head(), trace, 100)
    assert admitted == {"cq-p1": {"p1-0", "p1-1"}, "cq-p2": {"p2-0"}}
    assert (share(run, "cq-p1"), share(run, "cq-p2")) == (4.0 * 1000.0 / 9.0, 5.0 * 1000.0 / 9.0)
    assert sum(j.preemptions for j in run.jobs) == 2


def test_a_single_first_strategy_does_not_preempt_the_second_target() -> None:
    # Planted: with LessThanOrEqualToFinalShare alone, the second target fails and nothing is
    # preempted (the first target is put back: the preemptor would not fit).
    sim = dataclasses.replace(ineligible_head(), kueue=dataclasses.replace(FAIR, fair_sharing=(model.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,)))
    trace = [job(f"p1-{i}", 0, "cq-p1", pool="p", gpus=2, duration=LONG) for i in range(4)]
    trace.append(job("p2-0", 10, "cq-p2", pool="p", gpus=5, duration=LONG))
    _, admitted = run_until(sim, trace, 100)
    assert admitted == {"cq-p1": {f"p1-{i}" for i in range(4)}, "cq-p2": set()}


def test_the_share_is_over_every_pool_of_the_cohort_and_divided_by_the_weight() -> None:
    # Two pools of 8 in one cohort; a (weight 2) borrows 4 on one: 4 x 1000 / 16 / 2 = 125.
    pools = [pool("x", min_nodes=1, max_nodes=1, autoscaled=False), pool("y", min_nodes=1, max_nodes=1, autoscaled=False)]
    queues = [
        dataclasses.replace(queue("a", {"x": 4, "y": 4}), fair_weight=2.0),
        queue("b", {"x": 4, "y": 4}),
    ]
    sim = dataclasses.replace(stack(pools, queues), kueue=FAIR)
    run = engine.Simulation(sim, [job("j", 0, "a", pool="x", gpus=8, duration=LONG)], horizon_s=1)
    run.run()
    assert share(run, "a") == 125.0 and share(run, "b") == 0.0


def test_a_zero_weight_queue_that_borrows_ranks_above_any_weighted_share() -> None:
    # CompareDRS: a borrowing queue of weight 0 has an infinite share, ordered by its ratio.
    pools = [pool("x", min_nodes=1, max_nodes=1, autoscaled=False), pool("y", min_nodes=1, max_nodes=1, autoscaled=False)]
    queues = [dataclasses.replace(queue("a", {"x": 4, "y": 4}), fair_weight=0.0), queue("b", {"x": 4, "y": 4})]
    sim = dataclasses.replace(stack(pools, queues), kueue=FAIR)
    run = engine.Simulation(sim, [job("j", 0, "a", pool="x", gpus=8, duration=LONG)], horizon_s=1)
    run.run()
    assert run.shares is not None
    a, borrowing = run.shares.of(0)
    assert (a, borrowing) == ((True, 250.0), True)
    assert a > run.shares.of(1, run.pools[0], 8)[0] == (False, 250.0)


def test_kueue_preemption_enabled_c_reclaims_from_a_and_leaves_b_whole() -> None:
    # fair_sharing_test.go "cq-c reclaims one unit": the one preemption of that step is in cq-a.
    before, _ = run_until(preemption_enabled(), PREEMPTION_ENABLED_TRACE, 90)
    after, _ = run_until(preemption_enabled(), PREEMPTION_ENABLED_TRACE, 200)

    def lost(run: engine.Simulation, team: str) -> int:
        return sum(j.preemptions for j in run.jobs if j.spec.team == team)

    assert (lost(after, "a") - lost(before, "a"), lost(after, "b") - lost(before, "b")) == (1, 0)


def test_a_head_within_nominal_on_its_pool_goes_before_a_lower_share_that_would_borrow() -> None:
    # FairSharingPrioritizeNonBorrowing: a borrows 4 on y (share 4 x 1000 / 16 = 250); on x, a's
    # 4 (within a's nominal) goes before b's 2 (b would borrow: share 125) and takes the last 4.
    pools = [pool(n, slots=8, gpus=1, sharing="mig", min_nodes=1, max_nodes=1, autoscaled=False) for n in ("x", "y")]
    queues = [queue(n, {"x": 4, "y": 4}, cohort="all", within="Never", reclaim="Never") for n in ("a", "b")]
    sim = dataclasses.replace(stack(pools, queues), kueue=FAIR)
    trace = [
        job("b-x0", 0, "b", pool="x", gpus=4, duration=LONG),
        job("a-y", 0, "a", pool="y", gpus=8, duration=LONG),
        job("b-x1", 10, "b", pool="x", gpus=2, duration=LONG),
        job("a-x", 10, "a", pool="x", gpus=4, duration=LONG),
    ]
    _, admitted = run_until(sim, trace, 20)
    assert admitted == {"a": {"a-y", "a-x"}, "b": {"b-x0"}}


def test_of_two_heads_with_equal_shares_the_higher_priority_goes_first() -> None:
    # PrioritySortingWithinCohort: a's and b's heads would both borrow 4 (share 500); the 4 left
    # go to b's production job, though a's was submitted first.
    node = pool(slots=8, gpus=1, sharing="mig", min_nodes=1, max_nodes=1, autoscaled=False)
    queues = [queue(n, {"p": 2}, cohort="all", within="Never", reclaim="Never") for n in ("a", "b")]
    sim = dataclasses.replace(stack([node], queues, cohort_quota={"p": 4}), kueue=FAIR)
    trace = [
        job("a0", 0, "a", pool="p", gpus=2, duration=LONG),
        job("b0", 0, "b", pool="p", gpus=2, duration=LONG),
        job("a1", 10, "a", pool="p", gpus=4, duration=LONG),
        job("b1", 10, "b", "production", pool="p", gpus=4, duration=LONG),
    ]
    _, admitted = run_until(sim, trace, 20)
    assert admitted == {"a": {"a0"}, "b": {"b0", "b1"}}


def test_a_preemptor_within_nominal_on_its_pool_reclaims_whatever_its_share() -> None:
    # After preemption_fair_test.go "nominal first" (two flavors): a borrows 4 on y (share 250),
    # b borrows 2 on x (125). a's 4 on x, within a's nominal there, fails both share strategies
    # (250 <= 0, 250 < 125) and still preempts b's job (FairSharingPreemptWithinNominal).
    pools = [pool(n, slots=8, gpus=1, sharing="mig", min_nodes=1, max_nodes=1, autoscaled=False) for n in ("x", "y")]
    queues = [queue(n, {"x": 4, "y": 4}, cohort="all", within="Never", reclaim="Any") for n in ("a", "b")]
    sim = dataclasses.replace(stack(pools, queues), kueue=FAIR)
    trace = [
        job("b-x", 0, "b", pool="x", gpus=6, duration=LONG),
        job("a-y", 0, "a", pool="y", gpus=8, duration=LONG),
        job("a-x", 10, "a", pool="x", gpus=4, duration=LONG),
    ]
    run, admitted = run_until(sim, trace, 50)
    assert admitted == {"a": {"a-y", "a-x"}, "b": set()}
    assert [j.preemptions for j in run.jobs] == [1, 0, 0]


def test_kueue_zero_weight_queues_do_not_preempt_in_a_cycle() -> None:
    # fair_sharing_test.go "should not cause an infinite preemption cycle": the cohort holds 8,
    # cq-a and cq-b hold 0 with weight 0. b's 4 preempts a's lower-priority 4 once, and then
    # nothing more: both borrow 4, a's weight-0 share is not above b's.
    queues = [
        dataclasses.replace(queue(n, {"p": 0}, cohort="top", within="Never", reclaim="Any"), fair_weight=0.0) for n in ("a", "b")
    ]
    trace = [
        job("a1", 0, "a", "production", pool="p", gpus=4, duration=LONG),
        job("a2", 0, "a", pool="p", gpus=4, duration=LONG),
        job("b1", 10, "b", pool="p", gpus=4, duration=LONG),
    ]
    run, admitted = run_until(fair_stack(8, queues, cohort_quota=8), trace, 1000)
    assert admitted == {"a": {"a1"}, "b": {"b1"}}
    assert [j.preemptions for j in run.jobs] == [0, 1, 0]


def test_a_head_is_ordered_by_its_queues_share_with_its_own_request() -> None:
    # fair_sharing_iterator.go: the share with the head admitted. a borrows 1 and its head adds
    # 4 (5); b borrows 2 and its head adds 2 (4): b's head goes first and a's no longer fits.
    queues = [queue(n, {"p": 2}, cohort="all", within="Never", reclaim="Never") for n in ("a", "b")]
    trace = [
        job("a0", 0, "a", pool="p", gpus=3, duration=LONG),
        job("b0", 0, "b", pool="p", gpus=4, duration=LONG),
        job("a1", 10, "a", pool="p", gpus=4, duration=LONG),
        job("b1", 10, "b", pool="p", gpus=2, duration=LONG),
    ]
    _, admitted = run_until(fair_stack(12, queues, cohort_quota=8), trace, 20)
    assert admitted == {"a": {"a0"}, "b": {"b0", "b1"}}


def test_less_than_or_equal_to_final_share_admits_an_equal_final_share() -> None:
    # With LessThanOrEqualToFinalShare alone: p2's 4 takes a first 2 of p1 (4 <= 6) and a second
    # (4 <= 4: equal shares pass), and is admitted.
    sim = dataclasses.replace(ineligible_head(), kueue=dataclasses.replace(FAIR, fair_sharing=(model.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,)))
    trace = [job(f"p1-{i}", 0, "cq-p1", pool="p", gpus=2, duration=LONG) for i in range(4)]
    trace.append(job("p2-0", 10, "cq-p2", pool="p", gpus=4, duration=LONG))
    run, admitted = run_until(sim, trace, 100)
    assert admitted == {"cq-p1": {"p1-0", "p1-1"}, "cq-p2": {"p2-0"}}
    assert sum(j.preemptions for j in run.jobs) == 2

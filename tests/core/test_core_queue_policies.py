"""Queue policies through the Scheduler: order, head-of-line blocking, EASY backfill, SRTF and LAS
preemption. Timelines are replayed with the event-driven simulator; single decisions are checked on
the Scheduler directly."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.decision import Preempt
from gputwin.core.history import HistoryEstimator
from gputwin.core.model import JobSpec, OverheadModel, PolicySpec
from gputwin.core.policies import NEVER, Las, make_policy
from gputwin.core.scheduler import Scheduler
from gputwin.core.state import JobState, Phase
from gputwin.sim.engine import simulate

ONE_NODE = {"l0": [8]}


def _starts(outcome) -> dict[str, float]:
    return {j.job_id: j.first_start for j in outcome.finished}


def _ends(outcome) -> dict[str, float]:
    return {j.job_id: j.end for j in outcome.finished}


# O holds the whole node 0..10. J1..J3 queue behind it; no two of them fit together (5+6 > 8), so
# they run one at a time in the policy's order. Only the key differs between the cases:
#   fifo: submit 1, 2, 3             -> J1, J2, J3
#   sjf: duration 30, 10, 20         -> J2, J3, J1
#   priority: 1, 0, 2 (high first)   -> J3, J1, J2
#   qssf: predicted x GPUs; nothing has finished when they are submitted, so every prediction is
#         the estimator's prior and the key is 7, 6, 5 GPUs -> J3, J2, J1
ORDER_JOBS = [
    ("O", 0, 10, 8),
    ("J1", 1, 30, 7, {"priority": 1, "user": "u1", "name": "a"}),
    ("J2", 2, 10, 6, {"priority": 0, "user": "u2", "name": "b"}),
    ("J3", 3, 20, 5, {"priority": 2, "user": "u3", "name": "c"}),
]


@pytest.mark.parametrize(
    ("queue", "starts"),
    [
        pytest.param("fifo", {"O": 0, "J1": 10, "J2": 40, "J3": 50}, id="fifo"),
        pytest.param("sjf", {"O": 0, "J2": 10, "J3": 20, "J1": 40}, id="sjf"),
        pytest.param("priority", {"O": 0, "J3": 10, "J1": 30, "J2": 60}, id="priority"),
        pytest.param("qssf", {"O": 0, "J3": 10, "J2": 30, "J1": 40}, id="qssf"),
    ],
)
def test_non_preemptive_policies_differ_only_by_their_key(cluster, jobs, queue, starts) -> None:
    out = simulate(cluster(ONE_NODE, PolicySpec(queue=queue)), jobs(ORDER_JOBS))
    assert _starts(out) == starts
    assert all(j.preemptions == 0 for j in out.finished)


def test_qssf_orders_by_learnt_duration_times_gpus(cluster, jobs) -> None:
    # History says user u1's "a" runs 10 s and u2's "b" 1000 s. Key = prediction x GPUs:
    # A (u1/a, 8 GPUs) 80 < B (u2/b, 1 GPU) 1000, so A goes first although it asks for more GPUs.
    est = HistoryEstimator(prior=1.0)
    est.observe(JobSpec("h1", 0, 10, 8, "x", user="u1", name="a"), 10.0)
    est.observe(JobSpec("h2", 0, 1000, 1, "x", user="u2", name="b"), 1000.0)
    sched = Scheduler(cluster(ONE_NODE, PolicySpec(queue="qssf")), estimator=est)
    sched.submit(JobSpec("B", 0, 5, 1, "x", user="u2", name="b"), 0)
    sched.submit(JobSpec("A", 0, 5, 8, "x", user="u1", name="a"), 0)
    assert [j.job_id for j in sched.partitions["p"].queued_jobs()] == ["A", "B"]
    assert [s.job_id for s in sched.run_cycle(0).starts] == ["A"]  # B (1 GPU) is blocked behind A


# O holds 6 of 8 GPUs for 0..10; head H arrives at 1 and does not fit. S (2 GPUs, 5 s) and
# L (2 GPUs, 20 s) arrive behind it while 2 GPUs sit idle.
def _blocking_jobs(head_gpus: int) -> list[tuple]:
    return [("O", 0, 10, 6), ("H", 1, 10, head_gpus), ("S", 2, 5, 2), ("L", 3, 20, 2)]


@pytest.mark.parametrize(
    ("backfill", "head_gpus", "starts"),
    [
        # strict order: nothing passes H; at 10 H takes the node, S and L start when it ends at 20
        pytest.param(False, 8, {"O": 0, "H": 10, "S": 20, "L": 20}, id="strict-blocks-behind-head"),
        # H (4) starts at 10 with S and L beside it
        pytest.param(False, 4, {"O": 0, "H": 10, "S": 10, "L": 10}, id="strict-small-head"),
        # H needs all 8 at its reservation (t=10, no spare): S ends at 7 <= 10 so it backfills at 2;
        # L would end at 23 > 10 and there are no spare GPUs at 10, so it never jumps ahead
        pytest.param(True, 8, {"O": 0, "H": 10, "S": 2, "L": 20}, id="easy-short-job-only"),
        # H needs 4 of the 8 free at 10 -> 4 spare: L may outlast the reservation; it starts when S
        # frees its 2 GPUs at 7, and H still starts at 10
        pytest.param(True, 4, {"O": 0, "H": 10, "S": 2, "L": 7}, id="easy-long-job-on-spare-gpus"),
    ],
)
def test_strict_order_and_easy_backfill_never_delay_the_head(
    cluster, jobs, backfill, head_gpus, starts
) -> None:
    out = simulate(
        cluster(ONE_NODE, PolicySpec(queue="fifo", backfill=backfill)), jobs(_blocking_jobs(head_gpus))
    )
    assert _starts(out) == starts


# Regression guard; the core used to get this wrong: scheduler._backfill judges 'ends in time' by
# now + work_left, ignoring the overhead the candidate's placement adds; a 3-GPU 8 s job spread over 2
# nodes (cross_node=1.0) runs 16 s and delays the head from its reservation at 10 to 16
def test_backfill_counts_the_candidates_communication_overhead(cluster, jobs) -> None:
    # Two 4-GPU nodes on one leaf, cross_node = 1.0 (a 2-node job runs twice as long).
    # A (2 GPUs on n0) runs 0..10; head H (8) waits for t=10 with no spare GPUs.
    # B (3 GPUs, 8 s): 0 + 8 <= 10 looks in time, but first fit spreads it over n0 (2) + n1 (1).
    spec = cluster({"l0": [4, 4]}, PolicySpec(backfill=True), overhead=OverheadModel(cross_node=1.0))
    out = simulate(spec, jobs([("A", 0, 10, 2), ("H", 0, 5, 8), ("B", 0, 8, 3)]))
    assert _starts(out)["H"] == 10


def test_backfill_does_not_delay_a_head_waiting_for_topology(cluster, jobs) -> None:
    # Two leaves with one 4-GPU node each. H (6 GPUs) fits no leaf, so topology-aware holds it until
    # max_wait = 100 and then spreads it over both. B (4 GPUs, 1000 s) arrives at 1: at t=100 H needs
    # 6 of the 8 GPUs, so B may only start now if it ends by 100 - it does not. Without backfill H
    # starts at 100; backfill must not change that.
    policy = PolicySpec(placement="topology-aware", backfill=True, params={"max_wait": 100})
    out = simulate(cluster({"l0": [4], "l1": [4]}, policy), jobs([("H", 0, 10, 6), ("B", 1, 1000, 4)]))
    assert _starts(out)["H"] == 100


@pytest.mark.parametrize(
    ("layout", "gpus", "checkpoint", "l_end"),
    [
        # L runs 0..20 (80 s of work left), S runs 20..30, L resumes at 30 with 80 + checkpoint cost
        pytest.param({"l0": [1]}, 1, None, 30 + 80 + 7, id="1-gpu-costs-7s"),
        pytest.param({"l0": [8]}, 8, None, 30 + 80 + 30, id="8-gpus-cost-30s"),
        pytest.param({"l0": [8, 8]}, 16, None, 30 + 80 + 60, id="16-gpus-cost-60s"),
        pytest.param({"l0": [8]}, 8, 5.0, 30 + 80 + 5, id="policy-checkpoint-seconds"),
        pytest.param({"l0": [8]}, 8, 0.0, 30 + 80, id="free-checkpoint"),
    ],
)
def test_srtf_preempts_for_a_short_arrival_and_keeps_the_remaining_work(
    cluster, jobs, layout, gpus, checkpoint, l_end
) -> None:
    spec = cluster(layout, PolicySpec(queue="srtf", checkpoint_seconds=checkpoint))
    out = simulate(spec, jobs([("L", 0, 100, gpus), ("S", 20, 10, gpus)]))
    by_id = {j.job_id: j for j in out.finished}
    assert _ends(out) == {"S": 30, "L": l_end}
    assert (by_id["L"].preemptions, by_id["L"].wait, by_id["L"].first_start) == (1, 10.0, 0)
    assert (by_id["S"].preemptions, by_id["S"].wait) == (0, 0.0)


@pytest.mark.parametrize(
    ("s_duration", "ends"),
    [
        # S needs 90 > L's 80 left: no preemption, S waits for L
        pytest.param(90, {"L": 100, "S": 190}, id="longer-arrival-waits"),
        # equal remaining time: a queued job ranks before a running one (reference rule) and preempts;
        # L resumes at 100 with 80 + 30 left
        pytest.param(80, {"S": 100, "L": 210}, id="tie-queued-first-preempts"),
    ],
)
def test_srtf_preempts_only_for_shorter_or_equal_remaining_time(cluster, jobs, s_duration, ends) -> None:
    out = simulate(
        cluster(ONE_NODE, PolicySpec(queue="srtf")), jobs([("L", 0, 100, 8), ("S", 20, s_duration, 8)])
    )
    assert _ends(out) == ends


def test_srtf_decisions_carry_the_preemption_and_the_resumed_run_length(cluster) -> None:
    sched = Scheduler(cluster(ONE_NODE, PolicySpec(queue="srtf")))
    sched.submit(JobSpec("L", 0, 100, 8, "x"), 0)
    first = sched.run_cycle(0)
    assert [(s.job_id, s.run_seconds, s.generation) for s in first.starts] == [("L", 100.0, 1)]
    sched.submit(JobSpec("S", 20, 10, 8, "x"), 20)
    d = sched.run_cycle(20)
    assert d.preempts == (Preempt("L", "p", 30.0),)
    assert [(s.job_id, s.run_seconds) for s in d.starts] == [("S", 10.0)]
    assert sched.jobs["L"].phase is Phase.QUEUED
    assert sched.jobs["L"].work_left == 80 + 30
    sched.complete("S", 30)
    d = sched.run_cycle(30)
    assert [(s.job_id, s.run_seconds, s.generation) for s in d.starts] == [("L", 110.0, 2)]


@pytest.mark.parametrize(
    ("attained", "level"),
    [(0.0, 0), (3599.9, 0), (3600.0, 1), (35999.0, 1), (36000.0, 2), (1e9, 2)],
)
def test_las_level_counts_thresholds_passed(attained, level) -> None:
    assert Las().level(attained) == level


def test_las_thresholds_come_from_params_sorted() -> None:
    policy = make_policy("las", {"las_thresholds": "100,10"})
    assert policy.thresholds == (10.0, 100.0)  # type: ignore[attr-defined]
    assert make_policy("las", {"las_thresholds": [5, 50]}).thresholds == (5.0, 50.0)  # type: ignore[attr-defined]


def test_unknown_queue_policy_lists_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match="unknown queue policy 'edf'; known: fifo, sjf, priority, qssf, srtf, las"
    ):
        make_policy("edf")


LAS_100 = PolicySpec(queue="las", params={"las_thresholds": "100"})


def test_las_wakes_at_the_demotion_time_and_demotes_there(cluster) -> None:
    # One 4-GPU node, one threshold at 100 GPU-seconds. A (4 GPUs) reaches it at 100 / 4 = 25 s.
    sched = Scheduler(cluster({"l0": [4]}, LAS_100))
    sched.submit(JobSpec("A", 0, 100, 4, "x"), 0)
    d = sched.run_cycle(0)
    assert [s.job_id for s in d.starts] == ["A"]
    assert d.wakes == ((25.0, "p"),)
    # B arrives at 5: both at level 0, A submitted first -> A keeps running; wake still at 25
    # (A has 20 GPU-s at 5, 80 to go at 4 GPU/s).
    sched.submit(JobSpec("B", 5, 10, 4, "x"), 5)
    d = sched.run_cycle(5)
    assert (d.starts, d.preempts, d.wakes) == ((), (), ((25.0, "p"),))
    # At 25 A is demoted to level 1 and yields to B; A keeps 75 s of work + 30 s checkpoint.
    sched.wake("p")
    d = sched.run_cycle(25)
    assert [p.job_id for p in d.preempts] == ["A"]
    assert [s.job_id for s in d.starts] == ["B"]
    assert sched.jobs["A"].work_left == 75 + 30
    assert sched.jobs["A"].key == (1.0, 0.0)


def test_las_timeline_in_the_simulator(cluster, jobs) -> None:
    # Same as above, end to end: B runs 25..35, A resumes at 35 with 105 s left -> ends 140.
    out = simulate(cluster({"l0": [4]}, LAS_100), jobs([("A", 0, 100, 4), ("B", 5, 10, 4)]))
    assert _starts(out) == {"A": 0, "B": 25}
    assert _ends(out) == {"B": 35, "A": 140}
    assert {j.job_id: j.preemptions for j in out.finished} == {"A": 1, "B": 0}


# Regression guard; the core used to get this wrong: policies.Las.next_change multiplies the time
# to the next threshold by job.slowdown, but JobState.attained_at counts wall-clock GPU-seconds; with
# overhead 1.0 an 8-GPU job crosses 80 GPU-s at t=10 (its key changes then) while the scheduler asks
# to be woken at t=20
def test_las_wake_matches_the_key_change_under_overhead(cluster) -> None:
    # Two 4-GPU nodes, cross_node 1.0: an 8-GPU job spans both and runs at slowdown 2.
    spec = cluster({"l0": [4, 4]}, PolicySpec(queue="las", params={"las_thresholds": "80"}),
                   overhead=OverheadModel(cross_node=1.0))  # fmt: skip
    sched = Scheduler(spec)
    sched.submit(JobSpec("A", 0, 100, 8, "x"), 0)
    d = sched.run_cycle(0)
    ((wake, _),) = d.wakes
    job, policy = sched.jobs["A"], sched.partitions["p"].policy
    # Whatever "attained" means, the wake must fall where the job's level changes.
    assert policy.key(job, wake - 1e-6)[0] == 0.0
    assert policy.key(job, wake)[0] == 1.0


def _running(order: int, seg_start: float, attained: float, gpus: int) -> JobState:
    job = JobState(JobSpec(f"j{order}", 0.0, 1e9, gpus, "x"), "p", gpus, 1e9, 1e9)
    job.phase, job.order, job.seg_start, job.attained = Phase.RUNNING, order, seg_start, attained
    return job


@settings(max_examples=150, deadline=None)
@given(
    thresholds=st.lists(st.floats(1.0, 1e6), min_size=1, max_size=3),
    segments=st.lists(st.tuples(st.floats(0.0, 1e7), st.floats(0.0, 2e6), st.integers(1, 64)), min_size=1, max_size=6),
    steps=st.lists(st.tuples(st.integers(0, 5), st.integers(-2, 2), st.floats(-1e4, 1e5)), max_size=12),
)
def test_las_cached_levels_give_the_exact_keys_and_soonest_change(thresholds, segments, steps) -> None:
    """Las.running_entries reuses a running job's level until shortly before its next threshold
    crossing, and soonest_change refines estimates: both must equal key / next_change exactly, also
    a float's width either side of a crossing (where the cache must not be trusted)."""
    policy = Las(thresholds)
    jobs = [_running(i, start, attained, gpus) for i, (start, attained, gpus) in enumerate(segments)]
    now = max(j.seg_start for j in jobs)
    for pick, ulps, jump in steps:
        target = policy.next_change(jobs[pick % len(jobs)], now)
        if target is not None and ulps:  # land next to a crossing
            now = max(now, target)
            for _ in range(abs(ulps)):
                now = math.nextafter(now, math.inf if ulps > 0 else -math.inf)
        else:
            now += jump  # sometimes back: a driver's wall clock may step back
        entries = policy.running_entries(jobs, now)
        assert [e[0] for e in entries] == [policy.key(j, now) for j in jobs]
        changes = [c for c in (policy.next_change(j, now) for j in jobs) if c is not None]
        assert policy.soonest_change(entries, now) == min(changes, default=NEVER)

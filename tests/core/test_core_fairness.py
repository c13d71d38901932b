"""Fairness among tenants (gputwin.core.fairness, docs/tenancy.md): the tenant key leads, the queue
policy's key orders within a tenant, the job's order breaks ties. Whole timelines through the
simulator, then invariants of the real Scheduler driven event by event (hypothesis)."""

from __future__ import annotations

import dataclasses
import heapq
import math

import pytest
from cluster_builders import build_cluster, build_jobs
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.fairness import Fairness, fairness_problem
from gputwin.core.model import JobSpec, PolicySpec, QuotaSpec
from gputwin.core.scheduler import Scheduler
from gputwin.sim.engine import simulate

# (id, policy, quotas, jobs (id, submit, duration, GPUs, user), expected first starts of some jobs)
ORDERS = [
    ("none-is-the-queue-order", PolicySpec(), (),
     [("a1", 0, 100, 8, "a"), ("a2", 50, 10, 8, "a"), ("b1", 60, 10, 8, "b")], {"a2": 100, "b1": 110}),
    ("fairshare-least-usage-first", PolicySpec(fairness="fairshare"), (),
     [("a1", 0, 100, 8, "a"), ("a2", 50, 10, 8, "a"), ("b1", 60, 10, 8, "b")], {"b1": 100, "a2": 110}),
    ("fairshare-weights-divide-usage", PolicySpec(fairness="fairshare", weights={"a": 4.0}), (),
     [("a1", 0, 10, 8, "a"), ("b1", 10, 5, 8, "b"), ("a2", 11, 1, 8, "a"), ("b2", 12, 1, 8, "b")],
     {"a2": 15, "b2": 16}),  # a: 80 GPU-s / 4 = 20 < b: 40
    ("fairshare-equal-weights", PolicySpec(fairness="fairshare"), (),
     [("a1", 0, 10, 8, "a"), ("b1", 10, 5, 8, "b"), ("a2", 11, 1, 8, "a"), ("b2", 12, 1, 8, "b")],
     {"b2": 15, "a2": 16}),  # a: 80 > b: 40
    ("long-half-life-remembers", PolicySpec(fairness="fairshare", half_life=1e6), (),
     [("a1", 0, 10, 8, "a"), ("b1", 1000, 5, 8, "b"), ("b2", 1001, 1, 8, "b"), ("a2", 1002, 1, 8, "a")],
     {"b2": 1005, "a2": 1006}),  # a: ~80 > b: 40
    ("short-half-life-forgets", PolicySpec(fairness="fairshare", half_life=100.0), (),
     [("a1", 0, 10, 8, "a"), ("b1", 1000, 5, 8, "b"), ("b2", 1001, 1, 8, "b"), ("a2", 1002, 1, 8, "a")],
     {"a2": 1005, "b2": 1006}),  # a: 80 halved ten times < b: ~40
    ("policy-key-within-a-tenant", PolicySpec(queue="sjf", fairness="fairshare"), (),
     [("a1", 0, 10, 8, "a"), ("b1", 5, 9, 8, "b"), ("b2", 6, 1, 8, "b"), ("a2", 7, 1, 8, "a")],
     {"b2": 10, "b1": 11, "a2": 20}),  # b (no usage) first, its shortest job first, then a
    ("ties-follow-the-policy-key", PolicySpec(queue="sjf", fairness="fairshare"), (),
     [("a1", 0, 1, 8, "a"), ("b1", 0, 1, 8, "b"), ("a2", 0, 3, 8, "a"), ("b2", 0, 2, 8, "b")],
     {"a1": 0, "b1": 1, "a2": 2, "b2": 5}),  # at 0 none used: sjf, then order; at 1 b used less; at 2
    # both used 8 GPU-s, a's a second earlier and so decayed a little more: a goes first
    ("drf-fills-progressively", PolicySpec(fairness="drf"), (),
     [(f"a{i}", 0, 10, 1, "a") for i in range(6)] + [(f"b{i}", 0, 10, 1, "b") for i in range(6)],
     {"a3": 0, "b3": 0, "a4": 10, "b4": 10}),  # 8 GPUs: 4 each, where fifo alone gives a 6
    ("drf-weights", PolicySpec(fairness="drf", weights={"b": 3.0}), (),
     [(f"a{i}", 0, 10, 1, "a") for i in range(6)] + [(f"b{i}", 0, 10, 1, "b") for i in range(6)],
     {"a1": 0, "a2": 10, "b5": 0}),  # b weighs 3: 6 of b's jobs, 2 of a's
    ("tenants-are-the-quota-accounts", PolicySpec(fairness="fairshare"),
     (QuotaSpec("vision", 8, users=("alice", "bob")), QuotaSpec("nlp", 8, users=("carol",))),
     [("x1", 0, 10, 8, "alice"), ("x2", 5, 1, 8, "bob"), ("y1", 6, 1, 8, "carol")], {"y1": 10, "x2": 11}),
    ("preemptive-ranks-running-jobs-too", PolicySpec(queue="srtf", fairness="drf", checkpoint_seconds=0.0), (),
     [("a1", 0, 100, 8, "a"), ("b1", 10, 50, 4, "b")], {"a1": 0, "b1": 10}),
]  # fmt: skip


def _run(policy: PolicySpec, quotas: tuple[QuotaSpec, ...], rows: list[tuple]) -> dict[str, float | None]:
    cluster = build_cluster({"l0": [8]}, policy)
    if quotas:
        cluster = dataclasses.replace(cluster, partitions=(dataclasses.replace(cluster.partitions[0], quotas=quotas),))
    jobs = build_jobs([(i, s, d, g, {"user": u}) for i, s, d, g, u in rows])
    return {j.job_id: j.first_start for j in simulate(cluster, jobs).finished}


@pytest.mark.parametrize("policy,quotas,rows,expected", [c[1:] for c in ORDERS], ids=[c[0] for c in ORDERS])
def test_fairness_orders_tenants_ahead_of_the_queue_key(policy, quotas, rows, expected) -> None:
    starts = _run(policy, quotas, rows)
    assert {k: starts[k] for k in expected} == expected


def test_fairshare_usage_decays_with_the_half_life() -> None:
    fair = Fairness("fairshare", 8, half_life=100.0)
    job = build_jobs([("a1", 0, 1, 4, {"user": "a"})])[0]
    state = _job_state(job)
    fair.change(0.0, state, 4)
    fair.change(100.0, state, -4)  # 4 GPUs for 100 s: 400 GPU-s, decayed while it accrued
    assert fair.usage("a", 100.0) == pytest.approx(4 * 100 / math.log(2) * 0.5)
    assert fair.usage("a", 200.0) == pytest.approx(fair.usage("a", 100.0) / 2)  # one half-life on


PROBLEMS = [
    ("unknown-mode", ("fair", 1.0, {}), "fairness: expected one of none, drf, fairshare, got 'fair'"),
    ("zero-half-life", ("fairshare", 0.0, {}), "halfLifeSeconds: expected a number of seconds > 0"),
    ("bad-weight", ("drf", 1.0, {"a": 0.0}), "weights.a: expected a number > 0"),
]


@pytest.mark.parametrize("args,reason", [c[1:] for c in PROBLEMS], ids=[c[0] for c in PROBLEMS])
def test_fairness_settings_are_checked(args, reason) -> None:
    assert (fairness_problem(*args) or "").startswith(reason)


def _job_state(spec: JobSpec):  # noqa: ANN202 - a JobState, made the scheduler's way
    from gputwin.core.state import JobState

    return JobState(spec, "p", spec.gpus, spec.duration, spec.duration)


# --- invariants of the real Scheduler, driven event by event -------------------------------------

_jobs = st.lists(
    st.tuples(st.sampled_from("abc"), st.integers(0, 50), st.integers(1, 40), st.integers(1, 8)),
    min_size=1, max_size=40,
)  # fmt: skip


def _drive(policy: PolicySpec, rows: list[tuple[str, int, int, int]], check) -> None:  # noqa: ANN001
    """Submit, complete and cycle like a driver; after every cycle, `check(part, started)`."""
    sched = Scheduler(build_cluster({"l0": [8]}, policy))
    part = sched.partitions["p"]
    specs = build_jobs([(f"j{i}", s, d, g, {"user": u}) for i, (u, s, d, g) in enumerate(rows)])
    arrivals = [(s.submit, 1, s.job_id, s) for s in specs]
    events: list = list(arrivals)
    heapq.heapify(events)
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, kind, job_id, spec = heapq.heappop(events)
            if kind == 0:
                sched.complete(job_id, now)
            else:
                sched.submit(spec, now)
        decision = sched.run_cycle(now)
        for start in decision.starts:
            heapq.heappush(events, (now + start.run_seconds, 0, start.job_id, None))
        check(part, [sched.jobs[s.job_id] for s in decision.starts], now)


@settings(max_examples=60, deadline=None)
@given(_jobs)
def test_fairshare_never_starts_a_tenant_while_one_with_less_usage_waits(rows) -> None:
    def check(part, started, now) -> None:  # noqa: ANN001
        fair = part.fair
        waiting = {fair.tenant_of(j) for j in part.queued.values()}
        for job in started:
            mine = fair.usage(fair.tenant_of(job), now)
            assert all(mine <= fair.usage(t, now) * (1 + 1e-9) + 1e-9 for t in waiting)

    _drive(PolicySpec(fairness="fairshare", half_life=30.0), rows, check)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 5), st.integers(1, 40), st.just(1)),
                min_size=1, max_size=40))  # fmt: skip
def test_drf_with_one_gpu_jobs_keeps_a_waiting_tenant_within_one_gpu_of_any_it_started(rows) -> None:
    # Each start went to a tenant holding no more than any waiting tenant; a waiting tenant's
    # holding does not shrink within a cycle, so a started tenant ends at most one GPU above it.
    def check(part, started, now) -> None:  # noqa: ANN001
        fair = part.fair
        waiting = {fair.tenant_of(j) for j in part.queued.values()}
        for job in started:
            mine = fair.held[fair.tenant_of(job)]
            assert all(mine <= fair.held.get(t, 0) + 1 for t in waiting)

    _drive(PolicySpec(fairness="drf"), rows, check)

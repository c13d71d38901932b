"""EASY backfill's reservation (`gputwin.core.reservation`).

`_first_enough` against the plain definition: running jobs sorted by (end, GPUs), GPUs added until
the head's need is met; ends are drawn from a few values so that ties - where the order among jobs
ending together decides the GPUs to spare - are common. Then the running set a backfilling
partition keeps sorted by end (`PartitionState.ends`) against the one re-derived from its running
jobs, through random submits, starts, ends, aborted starts, cancels and quota reclaims; a partition
that does not backfill keeps none."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings, strategies as st

from cluster_builders import build_cluster
from gputwin.core.model import JobSpec, PolicySpec, QuotaSpec
from gputwin.core.reservation import _first_enough, ending
from gputwin.core.scheduler import Scheduler
from gputwin.core.state import JobState, Phase


def _job(i: int, end: float, gpus: int) -> JobState:
    job = JobState(JobSpec(f"j{i}", 0.0, 1.0, gpus, "t"), "p", gpus, 1.0, 1.0)
    job.seg_end, job.order = end, i
    return job


def _reference(jobs: list[JobState], free: int, need: int) -> tuple[float, int]:
    for end, gpus in sorted((j.seg_end, j.gpus) for j in jobs):
        free += gpus
        if free >= need:
            return end, free - need
    return float("inf"), 0


@given(st.lists(st.tuples(st.sampled_from([10.0, 20.0, 20.0, 35.5, 90.0]), st.sampled_from([1, 2, 4, 8, 16])),
                max_size=40),
       st.integers(0, 8), st.integers(1, 64))  # fmt: skip
def test_first_enough_matches_the_sorted_pairs_walk(ends: list[tuple[float, int]], free: int, need: int) -> None:
    jobs = [_job(i, end, gpus) for i, (end, gpus) in enumerate(ends)]
    assert _first_enough(ending(jobs), free, need) == _reference(jobs, free, need)


LAYOUT = {"l0": [8, 8], "l1": [8, 4]}
# A quota on "p" makes a guaranteed tenant reclaim borrowed GPUs: the strict loop preempts then.
QUOTAS = (QuotaSpec("a", 14, ("ua",), cohort="c"), QuotaSpec("b", 14, ("ub",), cohort="c"))
STEPS = st.lists(st.tuples(st.sampled_from(["submit", "cycle", "complete", "abort", "cancel"]),
                           st.integers(0, 10_000)), max_size=60)  # fmt: skip


def _scheduler(backfill: bool, quotas: bool) -> Scheduler:
    cluster = build_cluster(LAYOUT, PolicySpec(queue="fifo", backfill=backfill))
    if quotas:
        parts = tuple(dataclasses.replace(p, quotas=QUOTAS) for p in cluster.partitions)
        cluster = dataclasses.replace(cluster, partitions=parts)
    return Scheduler(cluster)


def _step(sched: Scheduler, kind: str, n: int, now: float) -> None:
    jobs = sorted(sched.jobs)
    running = [j for j in jobs if sched.jobs[j].phase is Phase.RUNNING]
    if kind == "submit":
        user = "ua" if n % 3 else "ub"
        sched.submit(JobSpec(f"j{now:g}", now, 1.0 + n % 50, 1 + n % 12, "t", user=user), now)
    elif kind == "cycle":
        sched.run_cycle(now)
    elif kind in ("complete", "abort") and running:
        (sched.complete if kind == "complete" else sched.abort_start)(running[n % len(running)], now)
    elif kind == "cancel" and jobs:
        sched.cancel(jobs[n % len(jobs)], now)


@settings(max_examples=60, deadline=None)
@given(STEPS, st.booleans())
def test_a_backfilling_partition_keeps_its_running_jobs_sorted_by_end(steps: list[tuple[str, int]],
                                                                     quotas: bool) -> None:  # fmt: skip
    sched = _scheduler(True, quotas)
    part = sched.partitions["p"]
    for t, (kind, n) in enumerate(steps):
        _step(sched, kind, n, float(t))
        assert part.ends is not None and list(part.ends) == ending(part.running.values())


def test_a_quota_reclaim_takes_the_victim_out_of_the_ends() -> None:
    sched = _scheduler(True, True)
    part = sched.partitions["p"]
    for t in range(3):
        sched.submit(JobSpec(f"b{t}", 0.0, 100.0, 8, "t", user="ub"), 0.0)  # b borrows 10 of a's 14
    sched.run_cycle(0.0)
    sched.submit(JobSpec("a0", 1.0, 100.0, 8, "t", user="ua"), 1.0)
    decision = sched.run_cycle(1.0)
    assert decision.preempts and part.ends is not None
    assert list(part.ends) == ending(part.running.values())


def test_a_partition_without_backfill_keeps_no_ends() -> None:
    sched = _scheduler(False, False)
    for t in range(4):
        _step(sched, "submit", 7, float(t))
    sched.run_cycle(4.0)
    part = sched.partitions["p"]
    assert part.running and part.ends is None

"""EASY backfill's reservation (`gputwin.core.reservation`).

`_first_enough` against the plain definition: running jobs sorted by (end, GPUs), GPUs added until
the head's need is met; ends are drawn from a few values so that ties - where the order among jobs
ending together decides the GPUs to spare - are common. Then the running set a backfilling
partition keeps sorted by end (`PartitionState.ends`) against the one re-derived from its running
jobs, through random submits, starts, ends, aborted starts, cancels and quota reclaims; a partition
that does not backfill keeps none. `first_candidate` (where may the backfill walk start?) against
the walk's own first two tests, asked of the window from scratch, at every step of such a run: the
least works it keeps for a window must not outlive whatever changed the window in between."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from cluster_builders import build_cluster
from gputwin.core.model import JobSpec, PolicySpec, QuotaSpec
from gputwin.core.reservation import _first_enough, ending, first_candidate, reservation
from gputwin.core.scheduler import Scheduler
from gputwin.core.state import JobState, PartitionState, Phase


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


def _first(part: PartitionState, head: JobState, now: float, depth: int) -> int:
    """The first job of the window that passes the backfill walk's GPU and time tests (`Cycle._backfill`)."""
    free, (shadow, extra) = part.ledger.free_gpus, reservation(part, head, now)
    window = [part.queued[order] for _, order in part.order[1:1 + depth]]
    passing = (i for i, j in enumerate(window)
               if j.gpus <= free and not (now + j.work_left > shadow and j.gpus > extra))  # fmt: skip
    return next(passing, len(window))


# Few run times, on whole seconds: a job ending exactly at the head's shadow time is common.
RUNS = st.lists(st.tuples(st.sampled_from(["submit", "submit", "cycle", "complete", "abort", "cancel"]),
                          st.integers(0, 10_000)), max_size=80)  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(RUNS, st.sampled_from([2, 256]))
def test_first_candidate_is_the_windows_first_job_to_pass_the_walks_tests(steps: list[tuple[str, int]],
                                                                         depth: int) -> None:  # fmt: skip
    sched = _scheduler(True, False)
    part = sched.partitions["p"]
    asked = 0
    for t, (kind, n) in enumerate(steps):
        _step(sched, kind, n, float(t))
        head = part.head()
        if head is not None:
            now = float(t) + 0.5 * (n % 3)
            first, shadow, extra = first_candidate(part, part.order[1:1 + depth], head, now)
            expected = _first(part, head, now, depth)
            # A kept window says only "none" or "one of them": the walk then starts at the beginning.
            assert first == expected or first == 0 and expected < len(part.order[1:1 + depth])
            assert shadow < 0.0 or (shadow, extra) == reservation(part, head, now)
            asked += 1
    assert asked or not any(kind == "submit" for kind, _ in steps)


@pytest.mark.parametrize(("free_after", "runs", "expected"), [
    (0, (10.0, 10.0), 3),  # no GPU free: nothing fits, however short (none: the window's length)
    (2, (150.0,), 2),  # 2 GPUs free, but the new job too ends after the head's shadow time
    (2, (150.0, 10.0), 2),  # the second new one ends in time: the window changed, and its least work
])  # fmt: skip
def test_first_candidate_follows_a_changed_window(free_after: int, runs: tuple[float, ...],
                                                  expected: int) -> None:  # fmt: skip
    """A 16-GPU node: one job runs until t = 100 leaving `free_after` GPUs, the head wants all 16
    (its shadow time: 100), 1-GPU jobs queue behind it; asked first, then again once more came."""
    sched = Scheduler(build_cluster({"l0": [16]}, PolicySpec(queue="fifo", backfill=True)))
    part = sched.partitions["p"]
    sched.submit(JobSpec("r", 0.0, 100.0, 16 - free_after, "t"), 0.0)
    sched.run_cycle(0.0)
    sched.submit(JobSpec("head", 1.0, 10.0, 16, "t"), 1.0)
    sched.submit(JobSpec("w0", 1.0, 150.0, 1, "t"), 1.0)
    head = part.head()
    assert head is not None and head.job_id == "head"
    assert first_candidate(part, part.order[1:], head, 1.0)[0] == 1  # w0 ends at 151, after the shadow (100)
    assert first_candidate(part, part.order[1:], head, 1.0)[0] == 1  # again: the kept least works
    for i, run in enumerate(runs):
        sched.submit(JobSpec(f"w{i + 1}", 2.0, run, 1, "t"), 2.0)
    assert first_candidate(part, part.order[1:], head, 2.0)[0] == expected


@pytest.mark.parametrize(("last_run", "expected"), [
    (150.0, 2),  # the job that came into the window ends late too: none, from the kept bounds
    (10.0, 1),  # it ends in time: the kept bounds say "may", and walking the window finds it
])  # fmt: skip
def test_first_candidate_keeps_lower_bounds_while_jobs_only_leave(last_run: float, expected: int) -> None:
    """As above (2 GPUs free, the head's shadow at t = 100), a window of 2 behind the head: w0 and w1
    end too late; w0 is cancelled and w2 moves into the window, nothing queued meanwhile."""
    sched = Scheduler(build_cluster({"l0": [16]}, PolicySpec(queue="fifo", backfill=True)))
    part = sched.partitions["p"]
    sched.submit(JobSpec("r", 0.0, 100.0, 14, "t"), 0.0)
    sched.run_cycle(0.0)
    for job_id, run in (("head", 10.0), ("w0", 150.0), ("w1", 150.0), ("w2", last_run)):
        sched.submit(JobSpec(job_id, 1.0, run, 16 if job_id == "head" else 1, "t"), 1.0)
    head = part.head()
    assert head is not None and first_candidate(part, part.order[1:3], head, 1.0)[0] == 2
    sched.cancel("w0", 1.0)
    assert first_candidate(part, part.order[1:3], head, 1.0)[0] == expected == _first(part, head, 1.0, 2)
    assert part.window is not None and part.window[3] is False  # bounds (w0 left), not the window's own

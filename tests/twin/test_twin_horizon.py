"""Snapshots along one replay, the oracle's view, and start-time errors bucketed by horizon.

The replay cases run on a hand-made cluster (one partition `p`: one node of 8 GPUs), whose starts
are worked out by hand in each case; no trace is needed.
"""

from __future__ import annotations

import math

import pytest

from gputwin.core.model import ClusterSpec, JobSpec, NodeSpec, PartitionSpec, PolicySpec, SwitchSpec, TopologySpec
from gputwin.twin.forecast import Forecast, JobForecast, forecast
from gputwin.twin.horizon import Bucket, by_horizon, ended_by, snapshots_along, start_errors, told
from gputwin.twin.replayed import snapshot_at
from gputwin.twin.seed import LIVE_POLICY
from gputwin.twin.snapshot import PendingJob, RunningJob, SnapPartition, Snapshot

TOPO = TopologySpec("t", (SwitchSpec("s"),), (NodeSpec("n1", 8, "s"),))


def cluster(policy: PolicySpec = PolicySpec()) -> ClusterSpec:
    return ClusterSpec(TOPO, (PartitionSpec("p", ("n1",), ("p",), policy),))


def job(job_id: str, submit: float, duration: float, gpus: int = 8, seq: int = 0) -> JobSpec:
    return JobSpec(job_id, submit, duration, gpus, "p", seq=seq)


# a: 0-100 on the whole node; b waits for it (100-150); c waits for b (150-160).
CHAIN = [job("a", 0, 100, seq=0), job("b", 10, 50, seq=1), job("c", 20, 10, seq=2)]
# EASY backfill: big (8 GPUs) waits for a to end at 100; d (4 GPUs, 30 s) arrives at 40 and fits
# beside a before then (40-70); e (4 GPUs, 200 s) arrives at 50 and would pass 100: it waits.
BACKFILL = [job("a", 0, 100, 4, 0), job("big", 5, 50, 8, 1), job("d", 40, 30, 4, 2), job("e", 50, 200, 4, 3)]


@pytest.mark.parametrize("jobs, at, running, pending, starts", [
    (CHAIN, 15.0, ["a"], ["b"], {"a": 0, "b": 100, "c": 150}),
    (CHAIN, 100.0, ["b"], ["c"], {"a": 0, "b": 100, "c": 150}),
    (CHAIN, 500.0, [], [], {"a": 0, "b": 100, "c": 150}),
    (BACKFILL, 45.0, ["a", "d"], ["big"], {"a": 0, "big": 100, "d": 40, "e": 150}),
], ids=["first-waits", "at-an-end", "after-all", "backfill"])  # fmt: skip
def test_snapshots_along_one_replay_hold_its_present_and_its_starts(
    jobs: list[JobSpec], at: float, running: list[str], pending: list[str], starts: dict[str, float]
) -> None:
    the_cluster = cluster(LIVE_POLICY)
    along = snapshots_along(the_cluster, jobs, [at])
    (snap,) = along.snapshots
    assert ([r.job_id for r in snap.running], [p.job_id for p in snap.pending]) == (running, pending)
    assert dict(along.starts) == starts
    assert snap == snapshot_at(the_cluster, jobs, at)  # pausing one replay = a fresh replay to `at`


def test_snapshots_come_in_time_order_whatever_the_order_asked() -> None:
    along = snapshots_along(cluster(), CHAIN, [100.0, 15.0])
    assert [s.taken_at for s in along.snapshots] == [15.0, 100.0]
    assert [[p.job_id for p in s.pending] for s in along.snapshots] == [["b"], ["c"]]


@pytest.mark.parametrize("jobs, at, policy, errors", [
    (CHAIN, 15.0, PolicySpec(), [(85.0, 0.0)]),  # fifo: nothing later overtakes b
    # told the truth, big's start is exact; d, which arrives later, does not move it
    (BACKFILL, 30.0, LIVE_POLICY, [(70.0, 0.0)]),
], ids=["fifo", "backfill"])  # fmt: skip
def test_the_oracle_forecast_from_a_snapshot_meets_the_replays_future(
    jobs: list[JobSpec], at: float, policy: PolicySpec, errors: list[tuple[float, float]]
) -> None:
    the_cluster = cluster(policy)
    along = snapshots_along(the_cluster, jobs, [at])
    truth = {j.job_id: j.duration for j in jobs}
    result = forecast(the_cluster, told(along.snapshots[0], truth), samples=1, sigma=0.0)
    assert start_errors(result, along.starts) == errors


def test_the_oracle_misses_where_a_later_arrival_takes_the_place() -> None:
    """c (8 GPUs) queues behind a; at 30 nothing else is known. x (8 GPUs, priority 5) arrives
    at 50 and goes first under the priority order: c starts 40 s later than told."""
    jobs = [job("a", 0, 100, seq=0), job("c", 20, 10, seq=1),
            JobSpec("x", 50, 40, 8, "p", priority=5, seq=2)]  # fmt: skip
    the_cluster = cluster(LIVE_POLICY)
    along = snapshots_along(the_cluster, jobs, [30.0])
    result = forecast(the_cluster, told(along.snapshots[0], {j.job_id: j.duration for j in jobs}), samples=1, sigma=0)
    assert (along.starts["c"], start_errors(result, along.starts)) == (140.0, [(70.0, 40.0)])


def test_told_sets_true_run_times_and_keeps_unknown_ones() -> None:
    snap = Snapshot(10.0, "t", TOPO, (SnapPartition("p", ("n1",)),),
                    (RunningJob("r", "p", 0, 0, (("n1", 4),), estimate=7.0),),
                    (PendingJob("q", "p", 5, 4, estimate=9.0), PendingJob("z", "p", 6, 4)))  # fmt: skip
    got = told(snap, {"r": 100.0, "q": 30.0})
    assert [j.estimate for j in (*got.running, *got.pending)] == [100.0, 30.0, None]


def test_ended_by_lists_what_a_history_knew_in_end_order() -> None:
    starts = {"a": 0.0, "b": 100.0, "c": 150.0}
    assert [j.job_id for j in ended_by(CHAIN, starts, 149.0)] == ["a"]
    assert [j.job_id for j in ended_by(CHAIN, starts, 160.0)] == ["a", "b", "c"]
    assert ended_by(CHAIN, {}, 1e9) == []  # never started: never ended


def _forecast(*jobs: tuple[str, float | None]) -> Forecast:
    return Forecast(1000.0, 1e6, 1, 0, tuple(JobForecast(j, "p", 1, s, s, None, None, 1.0) for j, s in jobs), (), (),
                    1, 0.0)  # fmt: skip


@pytest.mark.parametrize("predicted, actual, pairs", [
    ([("a", 1100.0)], {"a": 1150.0}, [(100.0, 50.0)]),
    ([("a", 1100.0)], {"a": 1000.0}, [(100.0, 100.0)]),  # early or late: absolute
    ([("a", None), ("b", 1010.0)], {"a": 5.0, "b": 1010.0}, [(10.0, 0.0)]),  # beyond the horizon: skipped
    ([("a", 1100.0)], {}, []),  # never started in the replay: skipped
], ids=["late", "early", "no-forecast", "no-actual"])  # fmt: skip
def test_start_errors_pair_horizon_and_absolute_error(
    predicted: list[tuple[str, float | None]], actual: dict[str, float], pairs: list[tuple[float, float]]
) -> None:
    assert start_errors(_forecast(*predicted), actual) == pairs


@pytest.mark.parametrize("pairs, edges, counts, medians", [
    ([], (60.0,), [0, 0], [None, None]),
    ([(0, 5), (59.9, 7), (60, 100), (1e6, 9)], (60.0,), [2, 2], [5, 9]),
    ([(-1, 3), (10, 1), (10, 2), (10, 4)], (60.0, 300.0), [4, 0, 0], [2, None, None]),  # negative: first
    ([(300, 1), (299, 2)], (60.0, 300.0), [0, 1, 1], [None, 2, 1]),  # a bound opens its bucket
], ids=["empty", "two", "median-nearest-rank", "bounds"])  # fmt: skip
def test_by_horizon_buckets(pairs: list[tuple[float, float]], edges: tuple[float, ...], counts: list[int],
                            medians: list[float | None]) -> None:  # fmt: skip
    buckets = by_horizon(pairs, edges)
    assert ([b.count for b in buckets], [b.median for b in buckets]) == (counts, medians)
    assert [b.low for b in buckets] == [0.0, *edges] and math.isinf(buckets[-1].high)


@pytest.mark.parametrize("low, high, label", [
    (0.0, 60.0, "0s-1m"), (60.0, 300.0, "1m-5m"), (900.0, 3600.0, "15m-1h"), (10800.0, math.inf, "3h-inf"),
    (0.0, 90.0, "0s-90s"),
], ids=["seconds", "minutes", "to-hour", "open", "odd"])  # fmt: skip
def test_bucket_labels(low: float, high: float, label: str) -> None:
    assert Bucket(low, high, 0, None, None).label == label

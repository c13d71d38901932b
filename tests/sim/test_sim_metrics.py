"""Simulation metrics: percentiles, busy-time integration into buckets, and per-partition summaries."""

from __future__ import annotations

import pytest

from gputwin.sim.engine import simulate
from gputwin.sim.metrics import (
    MAX_BUCKETS,
    BusyTracker,
    job_metrics,
    percentile,
    summarize,
    utilization,
    utilization_series,
)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        pytest.param([], 50, 0.0, id="empty"),
        pytest.param([5.0], 99, 5.0, id="single"),
        pytest.param([1, 2, 3, 4], 0, 1.0, id="q0-is-min"),
        pytest.param([1, 2, 3, 4], 100, 4.0, id="q100-is-max"),
        pytest.param([1, 2, 3, 4], 50, 2.5, id="median-between-ranks"),  # pos 1.5
        pytest.param([1, 2, 3, 4], 95, 3.85, id="p95"),  # pos 2.85 -> 3 + 0.85 * 1
        pytest.param([10, 20], 25, 12.5, id="quarter"),  # pos 0.25
        pytest.param([0, 10, 20, 30, 40], 99, 39.6, id="p99"),  # pos 3.96 -> 30 + 0.96 * 10
        pytest.param([7, 7, 7], 60, 7.0, id="all-equal"),
    ],
)
def test_percentile_interpolates_between_closest_ranks(values, q, expected) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_busy_tracker_integrates_area_and_splits_it_across_bucket_borders() -> None:
    t = BusyTracker({"p": 8}, interval=10.0)
    t.change("p", 0, +2)  # 2 busy over 0..5          -> bucket 0: 10
    t.change("p", 5, +3)  # 5 busy over 5..25         -> bucket 0: 25, bucket 1: 50, bucket 2: 25
    t.change("p", 25, -5)  # idle 25..40
    t.change("p", 40, +1)  # 1 busy over 40..45       -> bucket 4: 5
    t.change("p", 45, -1)
    assert t.area["p"] == 115.0
    assert t.busy["p"] == 0
    assert {b: v for b, v in t.buckets["p"].items() if v} == {0: 35.0, 1: 50.0, 2: 25.0, 4: 5.0}
    assert utilization(t, ["p"], 0, 50) == round(115 / (8 * 50), 4)
    series = utilization_series(t, ["p"])
    assert [(row["t"], row["gpu_utilization"]) for row in series if row["gpu_utilization"]] == [
        (0.0, 35 / 80), (10.0, 50 / 80), (20.0, round(25 / 80, 4)), (40.0, round(5 / 80, 4)),
    ]  # fmt: skip


def test_busy_tracker_keeps_partitions_apart() -> None:
    t = BusyTracker({"a": 4, "b": 2}, interval=100.0)
    t.change("a", 0, +4)
    t.change("b", 10, +2)
    t.change("a", 50, -4)
    t.change("b", 30, -2)
    assert t.area == {"a": 200.0, "b": 40.0}
    assert utilization(t, ["a", "b"], 0, 50) == round(240 / (6 * 50), 4)
    assert utilization(t, ["a"], 0, 0) == 0.0  # empty span


# Regression guard; the core used to get this wrong: BusyTracker._spread adds a 0.0 entry for the
# bucket that starts exactly where a busy period ends, so utilization_series reports an extra interval
# (t=20, 0 %) after the last busy second
def test_busy_period_ending_on_a_bucket_border_adds_no_empty_interval() -> None:
    t = BusyTracker({"p": 1}, interval=10.0)
    t.change("p", 0, +1)
    t.change("p", 20, -1)
    assert [row["t"] for row in utilization_series(t, ["p"])] == [0.0, 10.0]


def test_job_metrics_of_no_jobs_are_zero() -> None:
    assert job_metrics([]).jobs == 0
    assert job_metrics([]).avg_jct == 0.0


def test_summary_overall_and_per_partition(sim_cluster, sim_jobs) -> None:
    # Partition a: one 4-GPU node; b: one 2-GPU node.
    # a1 runs 0..10; a2 waits for it and runs 10..30; b1 runs 5..15 on 1 of b's 2 GPUs.
    spec = sim_cluster({"l0": [4], "l1": [2]}, partitions=[("a", [0], ["a"]), ("b", [1], ["b"])])
    specs = sim_jobs([
        ("a1", 0, 10, 4, {"task_type": "a"}),
        ("a2", 0, 20, 4, {"task_type": "a"}),
        ("b1", 5, 10, 1, {"task_type": "b"}),
    ])  # fmt: skip
    out = simulate(spec, specs)
    s = summarize(out.finished, out.busy).to_json()
    # JCTs 10, 30, 10 and queues 0, 10, 0.
    assert s["jobs"] == 3
    assert s["avg_jct"] == round(50 / 3, 3)
    assert s["avg_queue"] == round(10 / 3, 3)
    assert s["p50_jct"] == 10.0
    assert s["p95_jct"] == 28.0  # sorted [10, 10, 30], pos 1.9 -> 10 + 0.9 * 20
    assert s["p99_queue"] == 9.8  # sorted [0, 0, 10], pos 1.98
    assert s["makespan"] == 30.0
    # busy GPU-seconds: a 4*10 + 4*20 = 120, b 1*10 = 10, over 6 GPUs x 30 s
    assert s["gpu_utilization"] == round(130 / 180, 4)
    a, b = s["partitions"]["a"], s["partitions"]["b"]
    keys = ("jobs", "avg_jct", "avg_queue", "gpus", "gpu_utilization")
    assert [a[k] for k in keys] == [2, 20.0, 5.0, 4, 1.0]
    assert [b[k] for k in keys] == [1, 10.0, 0.0, 2, round(10 / 60, 4)]


def test_busy_tracker_widens_its_buckets_instead_of_growing_past_max_buckets() -> None:
    t = BusyTracker({"p": 2}, interval=10.0)
    t.change("p", 0, +1)
    t.change("p", 25, +1)  # 1 busy 0..25, 2 busy 25..30
    t.change("p", 30, -2)
    before = {b: v for b, v in t.buckets["p"].items()}
    assert before == {0: 10.0, 1: 10.0, 2: 15.0}
    t.change("p", 10.0 * MAX_BUCKETS * 3, +1)  # a busy period far out: 3 x MAX_BUCKETS buckets of 10 s away
    t.change("p", 10.0 * MAX_BUCKETS * 3 + 5, -1)
    assert t.interval == 40.0  # doubled twice: 3 x MAX_BUCKETS buckets fit into MAX_BUCKETS at width 40
    assert t.buckets["p"][0] == 35.0  # the first three 10 s buckets merged into 0..40
    assert t.area["p"] == 40.0
    assert len(t.buckets["p"]) <= MAX_BUCKETS


@pytest.mark.parametrize("duration", [1e10, 1e13], ids=["1e10s", "1e13s"])
def test_one_very_long_job_keeps_metrics_small_and_exact(sim_cluster, sim_jobs, duration) -> None:
    spec = sim_cluster({"l0": [4]}, partitions=[("a", [0], ["a"])])
    out = simulate(spec, sim_jobs([("long", 0, duration, 4, {"task_type": "a"})]))
    s = summarize(out.finished, out.busy).to_json()
    series = utilization_series(out.busy, ["a"])
    assert s["avg_jct"] == duration and s["gpu_utilization"] == 1.0
    assert 0 < len(series) <= MAX_BUCKETS
    assert {row["gpu_utilization"] for row in series[:-1]} == {1.0}  # the last bucket may be partial

"""GPU sizing from history (claim 3), the scaling model, and the run-time estimator QSSF uses."""

from __future__ import annotations

import dataclasses
import math

import pytest
from cluster_builders import build_cluster

from gputwin.core.decision import Resize
from gputwin.core.history import HistoryEstimator, JobHistory
from gputwin.core.model import JobSpec, PolicySpec
from gputwin.core.plugins import make_sizer
from gputwin.core.scheduler import Scheduler
from gputwin.core.sizing import AsRequested, HistorySizing, SizeChoice, model_speed, scaled_run


@pytest.mark.parametrize(
    ("duration", "requested", "gpus", "efficiency", "expected"),
    [
        pytest.param(100, 4, 4, 0.9, 100.0, id="same-size"),
        pytest.param(100, 4, 2, 0.9, 200.0, id="half-the-gpus-twice-as-long"),
        pytest.param(100, 4, 1, 0.9, 400.0, id="work-is-conserved-going-down"),
        pytest.param(100, 4, 8, 0.9, 100 * 4 / 8 / 0.9, id="one-doubling-loses-10pct"),  # 55.56
        pytest.param(100, 1, 4, 0.9, 100 / 4 / 0.81, id="two-doublings"),  # 30.86
        pytest.param(100, 2, 8, 1.0, 25.0, id="perfect-scaling"),
        pytest.param(120, 4, 6, 0.9, 120 * 4 / 6 / 0.9 ** math.log2(1.5), id="non-power-of-two"),
    ],
)
def test_scaled_run(duration, requested, gpus, efficiency, expected) -> None:
    assert scaled_run(duration, requested, gpus, efficiency) == pytest.approx(expected, rel=1e-12)


def test_as_requested_keeps_the_request() -> None:
    job = JobSpec("j", 0, 100, 4, "x")
    assert AsRequested().size(job, "p", 16, JobHistory()) == SizeChoice(4, 100)


@pytest.mark.parametrize(
    ("requested", "capacity", "allowed", "max_factor", "candidates"),
    [
        pytest.param(4, 16, (), 2.0, [2, 4, 8], id="powers-of-two-within-factor-2"),
        pytest.param(3, 16, (), 2.0, [2, 3, 4], id="request-always-a-candidate"),
        pytest.param(4, 6, (), 2.0, [2, 4], id="no-bigger-than-the-partition"),
        pytest.param(1, 16, (), 2.0, [1, 2], id="from-one"),
        pytest.param(4, 16, (4, 6, 12), 4.0, [4, 6, 12], id="allowed-sizes-only"),
        pytest.param(8, 16, (), 0.5, [8], id="max-factor-below-one-means-one"),
    ],
)
def test_history_sizing_candidates(requested, capacity, allowed, max_factor, candidates) -> None:
    sizer = HistorySizing(allowed=allowed, max_factor=max_factor)
    assert sizer.candidates(requested, capacity) == candidates


def _history(rows: list[tuple[int, float, float, int]]) -> JobHistory:
    """(gpus, run seconds, wait seconds, how many jobs) per row, partition "p", task type "x"."""
    hist = JobHistory()
    for gpus, run, wait, count in rows:
        for i in range(count):
            hist.record("p", JobSpec(f"h{gpus}-{i}", 0, run, gpus, "x"), gpus, run, wait)
    return hist


# Size 4 jobs waited 1000 s and ran 100 s; size 8 jobs did not wait and ran 60 s.
FAST_EIGHTS = [(4, 100, 1000, 5), (8, 60, 0, 5)]


@pytest.mark.parametrize(
    ("requested", "rows", "sizer_args", "capacity", "gpus"),
    [
        # expected(4) = 1000 + 100 = 1100; expected(8) = 0 + 100 * 60/100 = 60 -> 8
        pytest.param(4, FAST_EIGHTS, {}, 16, 8, id="bigger-size-waits-less"),
        pytest.param(4, [(4, 100, 1000, 5), (8, 60, 0, 4)], {}, 16, 4, id="too-few-samples-keeps-request"),
        pytest.param(
            4, [(4, 100, 1000, 5), (8, 60, 0, 4)], {"min_samples": 4}, 16, 8, id="min-samples-param"
        ),
        pytest.param(4, FAST_EIGHTS, {"max_factor": 1.5}, 16, 4, id="outside-max-factor"),
        pytest.param(4, FAST_EIGHTS, {"allowed": (2, 4)}, 16, 4, id="not-an-allowed-size"),
        pytest.param(4, FAST_EIGHTS, {}, 6, 4, id="bigger-than-capacity"),
        # request 8: size 8 waited 1000, size 4 did not; 4 runs 100 * 100/50 = 200 -> 0 + 200 < 1100
        pytest.param(8, [(8, 50, 1000, 5), (4, 100, 0, 5)], {}, 16, 4, id="smaller-size-waits-less"),
        # no history at 4 (W = 0, R = 100); at 8: W = 50, R = model 100*4/8/1.0 = 50 -> 100 = 100: tie
        pytest.param(4, [(8, 50, 50, 5)], {"efficiency": 1.0}, 16, 4, id="tie-keeps-request"),
        # 8 claims a 10x speed-up (run 10 vs 100): clipped to linear (50); 60 + 50 = 110 > 100 -> keep 4
        pytest.param(4, [(4, 100, 0, 5), (8, 10, 60, 5)], {}, 16, 4, id="implausible-speedup-clipped"),
        # 8 claims it runs slower (150): clipped to no speed-up (100); 0 + 100 < 1 + 100 -> 8
        pytest.param(4, [(4, 100, 1, 5), (8, 150, 0, 5)], {}, 16, 8, id="slowdown-clipped-still-wins"),
    ],
)
def test_history_sizing_picks_the_smallest_expected_completion(
    requested, rows, sizer_args, capacity, gpus
) -> None:
    sizer = HistorySizing(**sizer_args)
    choice = sizer.size(JobSpec("j", 0, 100, requested, "x"), "p", capacity, _history(rows))
    assert choice.gpus == gpus
    # the run time moves with the size through the scaling model, never through history
    assert choice.duration == pytest.approx(scaled_run(100, requested, gpus, sizer.efficiency))


def test_history_is_per_partition_and_task_type() -> None:
    sizer = HistorySizing()
    hist = _history(FAST_EIGHTS)
    assert sizer.size(JobSpec("j", 0, 100, 4, "x"), "other", 16, hist).gpus == 4
    assert sizer.size(JobSpec("j", 0, 100, 4, "y"), "p", 16, hist).gpus == 4


def test_history_sizer_from_policy_params() -> None:
    sizer = make_sizer("history", {"allowed_gpus": "2,4,6", "max_factor": "3", "min_samples": "2"})
    assert (sizer.allowed, sizer.max_factor, sizer.min_samples) == ((2, 4, 6), 3.0, 2)  # type: ignore[attr-defined]


def test_scheduler_resizes_from_history_and_says_so(cluster) -> None:
    sched = Scheduler(cluster({"l0": [8, 8]}, PolicySpec(sizing="history")))
    for gpus, run, wait, count in FAST_EIGHTS:
        for i in range(count):
            sched.history.record("p", JobSpec(f"h{i}", 0, run, gpus, "x"), gpus, run, wait)
    d = sched.submit(JobSpec("j", 0, 100, 4, "x"), 0)
    assert d.resizes == (Resize("j", 4, 8),)
    (start,) = sched.run_cycle(0).starts
    assert start.slots == ((0, 8),)
    assert start.run_seconds == pytest.approx(100 * 4 / 8 / 0.9)


# Regression guard; the core used to get this wrong: Scheduler.submit sizes with capacity =
# partition total GPUs and never re-checks PartitionSpec.max_gpus_per_job, so a 4-GPU job in a
# partition limited to 4 per job is resized to 8
def test_sizing_respects_the_partitions_per_job_limit(cluster) -> None:
    sched = Scheduler(cluster({"l0": [8, 8]}, PolicySpec(sizing="history"), max_gpus_per_job=4))
    for gpus, run, wait, count in FAST_EIGHTS:
        for i in range(count):
            sched.history.record("p", JobSpec(f"h{i}", 0, run, gpus, "x"), gpus, run, wait)
    sched.submit(JobSpec("j", 0, 100, 4, "x"), 0)
    assert sched.jobs["j"].gpus <= 4


def test_completed_jobs_feed_the_sizing_history(cluster) -> None:
    sched = Scheduler(cluster({"l0": [8]}, PolicySpec(sizing="history")))
    sched.submit(JobSpec("a", 0, 30, 2, "x"), 0)
    sched.run_cycle(0)
    sched.submit(JobSpec("b", 5, 40, 8, "x"), 5)
    sched.run_cycle(5)  # b waits for a
    sched.complete("a", 30)
    sched.run_cycle(30)
    sched.complete("b", 70)
    assert (sched.history.run_stats("p", "x", 2).mean, sched.history.wait_stats("p", "x", 2).mean) == (30, 0)
    assert (sched.history.run_stats("p", "x", 8).mean, sched.history.wait_stats("p", "x", 8).mean) == (40, 25)


# --- the run-time estimator (QSSF) -------------------------------------------------------------------

SEEN = [
    JobSpec("1", 0, 100, 1, "a", user="u1", name="train-7"),
    JobSpec("2", 0, 200, 1, "a", user="u1", name="train-8"),
    JobSpec("3", 0, 50, 1, "b", user="u2", name="eval"),
]


@pytest.mark.parametrize(
    ("user", "name", "task_type", "predicted"),
    [
        pytest.param("u1", "train-7", "a", 100.0, id="same-user-and-name"),
        pytest.param("u1", "train-9", "a", 150.0, id="same-name-stem"),  # mean of train-7 and train-8
        pytest.param("u1", "other", "a", 150.0, id="same-user"),
        pytest.param("u3", "x", "b", 50.0, id="same-task-type"),
        pytest.param("u3", "x", "c", 350.0 / 3, id="everything-seen"),
        pytest.param("u2", "train-7", "a", 50.0, id="name-is-per-user"),  # u2 has only "eval"
    ],
)
def test_history_estimator_uses_the_most_specific_group_seen(user, name, task_type, predicted) -> None:
    est = HistoryEstimator(prior=999.0)
    for job in SEEN:
        est.observe(job, job.duration)
    assert est.predict(JobSpec("q", 0, 1, 1, task_type, user=user, name=name)) == pytest.approx(predicted)


def test_history_estimator_uses_its_prior_before_any_job() -> None:
    assert HistoryEstimator(prior=42.0).predict(SEEN[0]) == 42.0


# Size 4 jobs did not wait and ran 100 s; size 8 jobs waited 40 s and ran 50 s (speed-1 seconds).
WAIT_FOR_EIGHT = [(4, 100, 0, 5), (8, 50, 40, 5)]


@pytest.mark.parametrize(("speed", "gpus"), [
    # expected(4) = 0 + 100/1 = 100; expected(8) = 40 + 50/1 = 90 -> 8
    pytest.param(1.0, 8, id="speed-one-waits-for-eight"),
    # expected(4) = 0 + 100/2 = 50; expected(8) = 40 + 50/2 = 65 -> 4: fast GPUs gain less from more
    pytest.param(2.0, 4, id="fast-model-keeps-request"),
    # expected(4) = 200; expected(8) = 40 + 100 = 140 -> 8
    pytest.param(0.5, 8, id="slow-model-waits-for-eight"),
])  # fmt: skip
def test_history_sizing_weighs_run_time_at_the_models_speed(speed: float, gpus: int) -> None:
    choice = HistorySizing().size(JobSpec("j", 0, 100, 4, "x"), "p", 16, _history(WAIT_FOR_EIGHT), speed)
    assert choice.gpus == gpus
    assert choice.duration == pytest.approx(scaled_run(100, 4, gpus, 0.9))  # still speed-1 seconds


@pytest.mark.parametrize(("model", "speeds", "models", "want"), [
    pytest.param("a100", {"a100": 2.0}, ("a100", "v100"), 2.0, id="named-model"),
    pytest.param("v100", {"a100": 2.0}, ("a100", "v100"), 1.0, id="model-without-speed-is-one"),
    pytest.param("", {"a100": 2.0, "v100": 1.5}, ("a100", "v100"), 1.5, id="any-model-slowest"),
    pytest.param("", {}, (), 1.0, id="no-models"),
])  # fmt: skip
def test_the_speed_a_job_would_run_at(model: str, speeds: dict, models: tuple, want: float) -> None:
    assert model_speed(model, speeds, models) == want


class RecordingSizerMock:
    """A mock sizer: keeps the request and records the speed the Scheduler hands it."""

    name = "history"

    def __init__(self) -> None:
        self.speeds: list[float] = []

    def size(self, job: JobSpec, partition: str, capacity: int, history: JobHistory, speed: float = 1.0
             ) -> SizeChoice:  # fmt: skip
        self.speeds.append(speed)
        return SizeChoice(job.gpus, job.duration)


def test_mock_sizer_gets_the_speed_of_the_model_a_job_asks_for() -> None:
    base = build_cluster({"l0": [8, 8]}, PolicySpec(sizing="history"))
    nodes = tuple(dataclasses.replace(n, model=m) for n, m in zip(base.topology.nodes, ("a100", "v100")))
    topology = dataclasses.replace(base.topology, nodes=nodes, speeds={"a100": 2.0, "v100": 0.5})
    sched = Scheduler(dataclasses.replace(base, topology=topology))
    mock = RecordingSizerMock()
    (part,) = sched.partitions.values()
    part.sizer = mock
    for i, model in enumerate(("a100", "v100", "")):
        sched.submit(JobSpec(f"j{i}", 0, 10, 4, base.partitions[0].task_types[0], model=model), 0.0)
    assert mock.speeds == [2.0, 0.5, 0.5]

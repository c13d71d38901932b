"""Run-time draws: which point a job gets, the bounds every draw keeps, seeds, and the interval hook."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputwin.core.history import DEFAULT_PRIOR, HistoryEstimator
from gputwin.core.model import JobSpec, NodeSpec, SwitchSpec, TopologySpec
from gputwin.twin.draws import draw_running_columns
from gputwin.twin.sampling import (
    DEFAULT_SIGMA,
    Draw,
    draw_all_pending,
    draw_bounded,
    draw_pending,
    draw_running,
    plan,
    running_bounds,
    running_columns,
    sample_rng,
)
from gputwin.twin.snapshot import PendingJob, RunningJob, SnapPartition, Snapshot

TOPO = TopologySpec("t", (SwitchSpec("s"),), (NodeSpec("n1", 8, "s"),))


def snap(*pending: PendingJob, running: tuple[RunningJob, ...] = ()) -> Snapshot:
    return Snapshot(100.0, "test", TOPO, (SnapPartition("p", ("n1",)),), running, pending)


class MockIntervalEstimator:
    """A mock of the learned estimator: a fixed p10/p50/p90 for every job."""

    def predict(self, job: JobSpec) -> float:
        return 999.0

    def observe(self, job: JobSpec, run_seconds: float) -> None:
        return None

    def interval(self, job: JobSpec) -> tuple[float, float, float]:
        return (50.0, 100.0, 400.0)


def learnt(user: str, seconds: float) -> HistoryEstimator:
    estimator = HistoryEstimator()
    estimator.observe(JobSpec("old", 0, seconds, 1, "p", user, "train"), seconds)
    return estimator


@pytest.mark.parametrize(
    ("job", "estimator", "median"),
    [
        (PendingJob("a", "p", 0, 1, estimate=77.0), learnt("u", 500.0), 77.0),
        (PendingJob("a", "p", 0, 1, user="u", name="train"), learnt("u", 500.0), 500.0),
        (PendingJob("a", "p", 0, 1, time_limit=600.0), HistoryEstimator(), 600.0),
        (PendingJob("a", "p", 0, 1), HistoryEstimator(), DEFAULT_PRIOR),
        (PendingJob("a", "p", 0, 1, estimate=0.25), HistoryEstimator(), 1.0),
    ],
    ids=["snapshot-estimate-first", "estimator-next", "time-limit-next", "prior-last", "at-least-a-second"],
)
def test_each_job_gets_the_first_point_known(job: PendingJob, estimator: HistoryEstimator, median: float) -> None:
    (_, draw), = plan(snap(job), estimator).pending
    assert draw == Draw(median, DEFAULT_SIGMA, job.time_limit or math.inf)


class PerJob:
    """The history estimator behind a wrapper: `plan` asks it job by job (its batch is for
    `HistoryEstimator` itself only)."""

    def __init__(self, inner: HistoryEstimator) -> None:
        self.inner = inner

    def predict(self, job: JobSpec) -> float:
        return self.inner.predict(job)

    def observe(self, job: JobSpec, run_seconds: float) -> None:
        self.inner.observe(job, run_seconds)


@pytest.mark.parametrize("learnt_before", [False, True])
def test_the_history_estimators_batch_plans_what_asking_per_job_does(learnt_before: bool) -> None:
    estimator = HistoryEstimator()
    if learnt_before:
        for i, (user, name, kind) in enumerate([("u", "train-1", "p"), ("v", "eval", "q"), ("u", "x", "p")]):
            estimator.observe(JobSpec(f"h{i}", 0, 0, 1, kind, user, name), 100.0 * (i + 1))
    pending = (PendingJob("a", "p", 0, 1, user="u", name="train-2"), PendingJob("b", "p", 0, 1, estimate=5.0),
               PendingJob("c", "p", 0, 1, user="w", name="eval", time_limit=900.0), PendingJob("d", "p", 0, 1),
               PendingJob("e", "p", 0, 1, user="v", name="eval", estimate=-3.0))  # fmt: skip
    running = (RunningJob("r", "p", 0.0, 10.0, (("n1", 2),), user="u", name="y"),
               RunningJob("s", "p", 0.0, 20.0, (("n1", 1),), time_limit=50.0, estimate=30.0))  # fmt: skip
    want = plan(snap(*pending, running=running), PerJob(estimator))
    assert plan(snap(*pending, running=running), estimator) == want
    batch = estimator.predict_group([(j.user, j.name, j.partition) for j in pending])
    one_by_one = [estimator.predict(JobSpec(j.job_id, 0, 0, 1, j.partition, j.user, j.name)) for j in pending]
    assert list(map(repr, batch)) == list(map(repr, one_by_one))  # `UNKNOWN` is NaN: equal only as text


def test_an_interval_estimator_sets_median_and_a_skewed_spread() -> None:
    (_, draw), = plan(snap(PendingJob("a", "p", 0, 1)), MockIntervalEstimator()).pending
    assert (draw.median, draw.sigma, draw.sigma_low) == pytest.approx((100.0, math.log(4) / 1.2815516,
                                                                       math.log(2) / 1.2815516))
    rng = sample_rng(0, 0)
    draws = sorted(draw_pending(draw, rng) for _ in range(4000))
    assert (draws[400], draws[2000], draws[3600]) == pytest.approx((50, 100, 400), rel=0.1)


def test_a_running_job_knows_how_long_it_has_run() -> None:
    run = RunningJob("r", "p", 0.0, 40.0, (("n1", 2),), time_limit=300.0)
    (_, draw, elapsed), = plan(snap(running=(run,)), HistoryEstimator()).running
    assert (draw.median, draw.limit, elapsed) == (300.0, 300.0, 60.0)


@given(
    median=st.floats(1.0, 1e6), sigma=st.floats(0.0, 3.0), elapsed=st.floats(0.0, 1e6),
    limit=st.one_of(st.just(math.inf), st.floats(1.0, 2e6)), seed=st.integers(0, 2**32),
)  # fmt: skip
def test_draws_stay_within_their_bounds(median: float, sigma: float, elapsed: float, limit: float, seed: int) -> None:
    draw, rng = Draw(median, sigma, limit), sample_rng(seed, 0)
    pending = draw_pending(draw, rng)
    assert 1.0 <= pending <= max(limit, 1.0)
    running = draw_running(draw, elapsed, rng)
    assert running >= min(elapsed + 1.0, limit) or running == elapsed + 1.0
    assert running <= max(limit, elapsed + 1.0) and math.isfinite(running)


def test_running_draws_follow_the_conditional_distribution() -> None:
    """Past its median, a job's remaining time is drawn from the tail, not piled up at 'now'."""
    draw, rng = Draw(100.0, 0.5, math.inf), sample_rng(1, 0)
    totals = [draw_running(draw, 150.0, rng) for _ in range(3000)]
    assert min(totals) >= 151.0
    assert 180.0 < statistics.median(totals) < 240.0  # the median of a log-normal past 1.5x its median


@pytest.mark.parametrize(("seed", "sample"), [(0, 0), (0, 1), (5, 0)], ids=["s0-0", "s0-1", "s5-0"])
def test_a_sample_draws_the_same_numbers_every_time(seed: int, sample: int) -> None:
    assert sample_rng(seed, sample).random() == sample_rng(seed, sample).random()
    assert sample_rng(seed, sample).random() != sample_rng(seed + 1, sample).random()


_DRAWS = st.builds(Draw, st.floats(1.0, 1e6), st.floats(0.0, 2.0), st.one_of(st.just(math.inf), st.floats(1.0, 1e6)),
                   st.one_of(st.none(), st.floats(0.0, 2.0)))  # fmt: skip


@given(st.lists(_DRAWS, max_size=30), st.integers(0, 2**32))
def test_drawing_every_pending_job_at_once_gives_the_same_numbers(draws: list[Draw], seed: int) -> None:
    one_by_one = sample_rng(seed, 0)
    assert draw_all_pending(draws, sample_rng(seed, 0)) == [draw_pending(d, one_by_one) for d in draws]


@given(st.lists(st.tuples(_DRAWS, st.floats(0.0, 2e6)), max_size=30), st.integers(0, 2**32))
def test_drawing_every_running_job_at_once_gives_the_same_numbers(runs: list[tuple[Draw, float]],
                                                                  seed: int) -> None:  # fmt: skip
    """`draw_running_columns` (compiled, a forecast's every sample) is `draw_bounded` per job, in order."""
    bounded = [(d, running_bounds(d, elapsed)) for d, elapsed in runs]
    one_by_one = sample_rng(seed, 0)
    expected = [draw_bounded(d, bounds, one_by_one) for d, bounds in bounded]
    assert draw_running_columns(running_columns(bounded), sample_rng(seed, 0)) == expected

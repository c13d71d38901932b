"""The learned estimator (gputwin.estimators): features, honest online training, determinism.

Fixtures are excerpts of the shared real traces (../shared/traces/README.md): the first 4,000 jobs
of the Philly-shaped `philly_mix1/jobs.csv` on its own 11-partition cluster, and the 8,152-pod
Alibaba `openb_pod_list_default.csv` on the embedded demo cluster.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from pathlib import Path

import pytest
from gputwin.adapters.traces import read_trace
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.api.loader import load_cluster
from gputwin.api.resources import demo_cluster_path
from gputwin.core.history import Estimator
from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.estimators import factory
from gputwin.estimators.features import FEATURES, FeatureState
from gputwin.estimators.online import LearnedConfig, LearnedEstimator, OracleEstimator
from gputwin.sim.run import Overrides, run_summary

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared traces not found at {SHARED}")
# Small enough to refit several times within a 4,000-job excerpt.
SMALL = LearnedConfig(min_train=200, retrain_jobs=600, rounds=20, residuals=500, window=60.0)


@pytest.fixture(scope="module")
def philly() -> tuple[ClusterSpec, tuple[JobSpec, ...]]:
    return load_cluster(SHARED / "philly_mix1" / "cluster.csv"), read_trace(
        SHARED / "philly_mix1" / "jobs.csv"
    ).jobs[:4000]


@pytest.fixture(scope="module")
def philly_all() -> tuple[ClusterSpec, tuple[JobSpec, ...]]:
    return load_cluster(SHARED / "philly_mix1" / "cluster.csv"), read_trace(
        SHARED / "philly_mix1" / "jobs.csv"
    ).jobs


@pytest.fixture(scope="module")
def alibaba() -> tuple[ClusterSpec, tuple[JobSpec, ...]]:
    return load_cluster(demo_cluster_path()), read_trace(
        SHARED / "alibaba_openb" / "openb_pod_list_default.csv"
    ).jobs


class Recorder:
    """Wraps an estimator and keeps what each `predict` returned, with the job's submit time."""

    def __init__(self, inner: Estimator) -> None:
        self.inner = inner
        self.seen: dict[str, tuple[float, float]] = {}

    def predict(self, job: JobSpec) -> float:
        value = self.inner.predict(job)
        self.seen[job.job_id] = (job.submit, value)
        return value

    def observe(self, job: JobSpec, run_seconds: float) -> None:
        self.inner.observe(job, run_seconds)


def replay(
    cluster: ClusterSpec, jobs: Sequence[JobSpec], make: Estimator
) -> tuple[Recorder, dict[str, float]]:
    recorder = Recorder(make)
    _, outcome = run_summary(cluster, jobs, overrides=Overrides(queue="qssf"), estimator=lambda: recorder)
    return recorder, {j.spec.job_id: j.end for j in outcome.finished}


def learned(jobs: Sequence[JobSpec]) -> LearnedEstimator:
    return LearnedEstimator(SMALL, upcoming=jobs, record=True)


def shuffled_after(jobs: Sequence[JobSpec], ends: dict[str, float], starts: dict[str, float], cut: float,
                   seed: int) -> list[JobSpec]:  # fmt: skip
    """The jobs with the durations of those not finished by `cut` permuted among themselves (a job
    running at `cut` keeps running past it, so nothing finishes earlier than it did)."""
    open_jobs = [j for j in jobs if ends.get(j.job_id, math.inf) > cut]
    durations = [j.duration for j in open_jobs]
    random.Random(seed).shuffle(durations)
    new = {}
    for job, duration in zip(open_jobs, durations):
        started = starts.get(job.job_id, math.inf)
        new[job.job_id] = duration if started + duration > cut else job.duration + 1.0
    return [dataclasses.replace(j, duration=new[j.job_id]) if j.job_id in new else j for j in jobs]


@pytest.mark.parametrize(
    "make, leaks",
    [
        pytest.param(learned, False, id="learned-honest"),
        # The oracle reads each job's duration: the check must catch it, or it proves nothing.
        pytest.param(lambda jobs: OracleEstimator(), True, id="oracle-leaks-by-design"),
    ],
)
def test_no_future_leaks_in(philly, make, leaks) -> None:  # type: ignore[no-untyped-def]
    cluster, jobs = philly
    first, ends = replay(cluster, jobs, make(jobs))
    starts = {
        job_id: ends[job_id] - job.duration for job in jobs for job_id in (job.job_id,) if job_id in ends
    }
    cut = jobs[2500].submit
    changed_jobs = shuffled_after(jobs, ends, starts, cut, seed=7)
    assert sum(a.duration != b.duration for a, b in zip(jobs, changed_jobs)) > 1000
    second, _ = replay(cluster, changed_jobs, make(changed_jobs))
    before = {k: v for k, v in first.seen.items() if v[0] <= cut}
    differ = [k for k, v in before.items() if second.seen.get(k) != v]
    assert bool(differ) is leaks, differ[:5]
    if not leaks:  # the shuffle did change what came after: the model saw different jobs later
        later = [k for k, v in first.seen.items() if v[0] > cut and second.seen.get(k) != v]
        assert later
        assert first.inner.fits >= 3  # type: ignore[attr-defined]


def test_the_same_seed_gives_the_same_predictions(philly) -> None:  # type: ignore[no-untyped-def]
    cluster, jobs = philly
    a, _ = replay(cluster, jobs, learned(jobs))
    b, _ = replay(cluster, jobs, learned(jobs))
    assert a.seen == b.seen


@pytest.mark.parametrize("trace", ["philly_all", "alibaba"])
def test_intervals_are_ordered_and_cover_about_four_in_five(
    trace: str, request: pytest.FixtureRequest
) -> None:
    # The shipped configuration, on whole traces: the adaptive step needs thousands of jobs.
    cluster, jobs = request.getfixturevalue(trace)
    estimator = LearnedEstimator(upcoming=jobs, record=True)
    _, ends = replay(cluster, jobs, estimator)
    preds = [(estimator.prediction(j.job_id), j.duration) for j in jobs if j.job_id in ends]
    with_interval = [(p, d) for p, d in preds if p is not None and not math.isnan(p.low)]
    assert len(with_interval) > len(preds) // 2
    assert all(0 <= p.low <= p.high and p.seconds > 0 and p.median > 0 for p, _ in with_interval)
    coverage = sum(p.low <= d <= p.high for p, d in with_interval) / len(with_interval)
    assert 0.6 <= coverage <= 0.95, coverage


def _geo(*runs: float) -> float:
    return math.expm1(sum(math.log1p(r) for r in runs) / len(runs))


@pytest.mark.parametrize(
    "finished, expected",
    [
        # (GPUs, seconds) runs of user u's job n, then a 1-GPU n is predicted.
        pytest.param([], math.nan, id="nothing-finished-unknown"),  # the partition's qssf_prior decides
        pytest.param([(1, 100.0)], 100.0, id="one-run"),
        # HistoryEstimator would answer the arithmetic 505 s: the one long run dominates it.
        pytest.param([(1, 10.0), (1, 1000.0)], _geo(10.0, 1000.0), id="geometric-not-arithmetic"),
        # n at 4 GPUs is another (user, name) group: the user's group (both runs) answers instead.
        pytest.param([(4, 1000.0)], 1000.0, id="other-size-falls-back-to-the-user"),
        pytest.param([(4, 1000.0), (1, 10.0)], 10.0, id="own-size-first"),
    ],
)
def test_no_model_yet_answers_the_groups_geometric_mean(finished: list[tuple[int, float]],
                                                          expected: float) -> None:  # fmt: skip
    estimator = LearnedEstimator(SMALL)
    for i, (gpus, run) in enumerate(finished):
        estimator.observe(JobSpec(f"h{i}", 0.0, run, gpus, "t", "u", "n"), run)
    got = estimator.predict(JobSpec("x", 1.0, 5.0, 1, "t", "u", "n"))
    assert estimator.fits == 0
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


@pytest.mark.parametrize(
    "history, job, column, expected",
    [
        pytest.param([], JobSpec("a", 90000.0, 5.0, 4, "t", "u", "n1"), "submit_hour", 1.0, id="hour-of-day"),
        pytest.param([], JobSpec("a", 90000.0, 5.0, 4, "t", "u", "n1"), "submit_weekday", 1.0, id="weekday"),
        pytest.param([], JobSpec("a", 0.0, 5.0, 4, "t", "u", "n1"), "gpus_log2", 2.0, id="gpus"),
        pytest.param([], JobSpec("a", 0.0, 5.0, 4, "t", "u", "n1"), "user_count_log", 0.0, id="new-user"),
        pytest.param(
            [("u", "n1", 99.0), ("u", "n2", 9.0), ("u", "n3", 0.0)],
            JobSpec("a", 0.0, 5.0, 1, "t", "u", "n9"),
            "user_median_log",
            math.log1p(9.0),
            id="user-median",
        ),
        pytest.param(
            [("u", "n1", 99.0), ("v", "n1", 9.0)],
            JobSpec("a", 0.0, 5.0, 1, "t", "u", "n1"),
            "name_mean_log",
            math.log1p(99.0),
            id="same-user-and-name",
        ),
        pytest.param(
            [("u", "n1", 99.0)],
            JobSpec("a", 0.0, 5.0, 2, "t", "u", "n1"),
            "name_count_log",
            0.0,
            id="same-name-other-gpus-is-another-group",
        ),
        pytest.param(
            [("u", "n1", 99.0)],
            JobSpec("a", 0.0, 5.0, 1, "t", "u", "n1", gpu_milli=500),
            "name_mean_log",
            math.nan,
            id="same-name-other-share-is-another-group",
        ),
        pytest.param(
            [("u", "train-1", 99.0)],
            JobSpec("a", 0.0, 5.0, 1, "t", "u", "train-2"),
            "stem_mean_log",
            math.log1p(99.0),
            id="name-stem",
        ),
        pytest.param(
            [("v", "x", 9.0)],
            JobSpec("a", 0.0, 5.0, 1, "t", "u", "n"),
            "history_log",
            math.log1p(9.0),
            id="history-falls-back-to-all",
        ),
        pytest.param(
            [("v", "x", 9.0)],
            JobSpec("a", 0.0, 12345.0, 1, "t", "u", "n"),
            "user_mean_log",
            math.nan,
            id="own-duration-never-read",
        ),
    ],
)
def test_feature_rows(
    history: list[tuple[str, str, float]], job: JobSpec, column: str, expected: float
) -> None:
    state = FeatureState()
    for user, name, run in history:
        state.observe(JobSpec("h", 0.0, run, 1, "t", user, name), run)
    value = state.row(job)[FEATURES.index(column)]
    assert (math.isnan(value) and math.isnan(expected)) or value == pytest.approx(expected)


@pytest.mark.parametrize(
    ("history", "job", "column", "expected"),
    [
        pytest.param([], JobSpec("a", 0.0, 5.0, 1, "t", "u", gpu_milli=470), "gpu_share", 0.47, id="share"),
        pytest.param([], JobSpec("a", 0.0, 5.0, 2, "t", "u"), "gpu_share", 1.0, id="whole-gpus"),
        pytest.param(
            [(470, "", 99.0), (810, "", 9.0), (470, "", 0.0)],
            JobSpec("a", 0.0, 5.0, 1, "t", "u", "openb-pod-7", gpu_milli=470),
            "shape_mean_log",
            (math.log1p(99.0) + math.log1p(0.0)) / 2,
            id="same-share-unique-names",
        ),
        pytest.param(
            [(1000, "V100", 99.0), (1000, "", 9.0)],
            JobSpec("a", 0.0, 5.0, 1, "t", "u", "x", model="V100"),
            "shape_count_log",
            math.log1p(1),
            id="same-model",
        ),
        pytest.param(
            [(1000, "", 99.0)],
            JobSpec("a", 0.0, 5.0, 1, "t", "u", "x"),
            "shape_mean_log",
            math.nan,
            id="whole-gpus-of-any-model-have-no-shape",
        ),
    ],
)
def test_shape_rows(history: list[tuple[int, str, float]], job: JobSpec, column: str, expected: float) -> None:
    # Alibaba's pods: unique names and a QoS class for a user, so the request is what repeats.
    state = FeatureState()
    for i, (milli, model, run) in enumerate(history):
        state.observe(JobSpec("h", 0.0, run, 1, "t", "u", f"openb-pod-{i}", model=model, gpu_milli=milli), run)
    value = state.row(job)[FEATURES.index(column)]
    assert (math.isnan(value) and math.isnan(expected)) or value == pytest.approx(expected)


def test_factory_refuses_an_unknown_name() -> None:
    with pytest.raises(ValueError, match="unknown estimator 'magic'; known: history, learned, oracle"):
        factory("magic")


_names = st.sampled_from(["train-1", "train-2", "eval", "job7", ""])
_jobs = st.builds(JobSpec, job_id=st.just("j"), submit=st.floats(0, 1e7), duration=st.floats(0, 1e6),
                  gpus=st.integers(0, 64), task_type=st.sampled_from(["a", "b"]),
                  user=st.sampled_from(["u", "v"]), name=_names, gpu_milli=st.sampled_from([1000, 470, 810]),
                  model=st.sampled_from(["", "V100"]))  # fmt: skip


@given(history=st.lists(_jobs, max_size=30), job=_jobs, other=st.floats(0, 1e6))
@settings(max_examples=60, deadline=None)
def test_a_row_never_depends_on_the_jobs_own_duration(
    history: list[JobSpec], job: JobSpec, other: float
) -> None:
    state = FeatureState()
    for done in history:
        state.observe(done, done.duration)
    first = state.row(job)
    second = state.row(dataclasses.replace(job, duration=other))
    assert len(first) == len(FEATURES)
    assert [math.isnan(v) for v in first] == [math.isnan(v) for v in second]
    assert [v for v in first if not math.isnan(v)] == [v for v in second if not math.isnan(v)]


def _same(first: Sequence[float], second: Sequence[float]) -> bool:
    return [math.isnan(v) for v in first] == [math.isnan(v) for v in second] and [
        v for v in first if not math.isnan(v)
    ] == [v for v in second if not math.isnan(v)]


@given(history=st.lists(_jobs, max_size=30), batch=st.lists(_jobs, min_size=1, max_size=8))
@settings(max_examples=60, deadline=None)
def test_a_batch_describes_each_job_as_a_fresh_state_describes_it_alone(
    history: list[JobSpec], batch: list[JobSpec]
) -> None:
    # Two states with the same history: category codes are handed out in first-seen order, so
    # each lone row is asked of a state that has described the batch's earlier jobs the same way.
    together, alone = FeatureState(), FeatureState()
    for done in history:
        together.observe(done, done.duration)
        alone.observe(done, done.duration)
    rows = together.rows(batch)
    assert all(_same(row, alone.row(job)) for row, job in zip(rows, batch))


@given(
    alpha=st.floats(0.01, 0.9),
    misses=st.lists(st.booleans(), max_size=300),
    step=st.sampled_from([0.005, 0.05, 0.3]),
)
@settings(max_examples=80, deadline=None)
def test_batched_conformal_steps_are_the_step_by_step_loop_bit_for_bit(
    alpha: float, misses: list[bool], step: float
) -> None:
    import numpy as np

    from gputwin.estimators.online import _adapt

    config = LearnedConfig(miss_step=step)
    want = alpha
    for missed in misses:
        want = min(0.9, max(0.01, want + config.miss_step * (config.miss - missed)))
    assert _adapt(alpha, config, np.asarray(misses, dtype=float), np) == want


@given(chunks=st.lists(st.lists(st.floats(-5, 5), max_size=40), max_size=12), size=st.integers(1, 50))
@settings(max_examples=80, deadline=None)
def test_the_residual_ring_holds_the_last_residuals(chunks: list[list[float]], size: int) -> None:
    import numpy as np

    estimator = LearnedEstimator(LearnedConfig(residuals=size))
    for chunk in chunks:
        estimator._keep_residuals(np.asarray(chunk, dtype=float), np)
    every = [v for chunk in chunks for v in chunk]
    kept = [] if estimator._residuals is None else estimator._residuals[: estimator._residual_count].tolist()
    assert sorted(kept) == sorted(every[len(every) - min(size, len(every)) :])


@pytest.mark.parametrize(
    "config, fits",
    [
        # Default: refit once a day of simulated time has passed, however few jobs finished in it
        # (Alibaba's 6,203 pods over 149 days: refits every 5,000 jobs gave one fit for the whole trace).
        pytest.param(LearnedConfig(min_train=50, rounds=5), [1, 1, 2], id="daily-by-default"),
        pytest.param(LearnedConfig(min_train=50, rounds=5, retrain_seconds=0.0), [1, 1, 1], id="off"),
        pytest.param(LearnedConfig(min_train=50, rounds=5, retrain_jobs=10), [1, 2, 3], id="by-jobs"),
    ],
)
def test_refits_after_a_day_or_after_retrain_jobs(config: LearnedConfig, fits: list[int]) -> None:
    estimator = LearnedEstimator(config)
    rng = random.Random(3)
    made, seen = 0, []
    for at in (3600.0, 3600.0 + 43_200.0, 3600.0 + 86_400.0):
        for _ in range(60 if made == 0 else 10):  # finished before `at`
            run = rng.choice((10.0, 1000.0))
            estimator.observe(JobSpec(f"h{made}", at - 3000.0, run, 1, "t", "u", f"n{run:.0f}"), run)
            made += 1
        estimator.predict(JobSpec(f"p{at}", at, 5.0, 1, "t", "u", "n10"))
        seen.append(estimator.fits)
    assert seen == fits

"""Warm refits (`LearnedConfig.warm_rounds`, `max_trees`, `warm_bins`; on by default): once the
window is full a refit boosts a few trees on the model it has, and is cold again past `max_trees`;
honest and deterministic like the cold ones."""

from __future__ import annotations

import dataclasses
import random

import pytest
from test_estimators_online import SMALL, philly, replay, shuffled_after  # noqa: F401  (philly: a fixture)

from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.estimators.online import LearnedConfig, LearnedEstimator

COLD = LearnedConfig(min_train=50, rounds=5, retrain_jobs=10, retrain_seconds=0.0, max_rows=60, warm_rounds=0,
                     warm_bins=False)  # fmt: skip
WARM = dataclasses.replace(COLD, warm_rounds=2, max_trees=9)


def _refits(config: LearnedConfig, refits: int = 5) -> tuple[list[int], LearnedEstimator]:
    """Observe 60 jobs, then 10 more before each prediction (a refit by `retrain_jobs` each time);
    the model's trees after each refit."""
    estimator, rng, made, trees = LearnedEstimator(config), random.Random(5), 0, []
    for k in range(refits):
        at = 3600.0 * (k + 1)
        for _ in range(60 if k == 0 else 10):
            run = rng.choice((10.0, 100.0, 1000.0))
            job = JobSpec(f"h{made}", at - 3000.0, run, 1 + made % 2, "t", f"u{made % 3}", f"n{run:.0f}")
            estimator.observe(job, run)
            made += 1
        estimator.predict(JobSpec(f"p{k}", at, 5.0, 1, "t", "u0", "n10"))
        trees.append(estimator._booster.num_trees())
    assert estimator.fits == refits
    return trees, estimator


@pytest.mark.parametrize(
    ("config", "trees"),
    [
        pytest.param(COLD, [5, 5, 5, 5, 5], id="off"),
        pytest.param(WARM, [5, 7, 9, 5, 7], id="warm-until-max-trees-then-cold"),
        pytest.param(dataclasses.replace(WARM, warm_bins=True), [5, 7, 9, 5, 7], id="warm-bins"),
        # The window (60 rows) never fills at 1,000: every refit is cold (a model of the first jobs
        # is not kept as the base of later ones).
        pytest.param(dataclasses.replace(WARM, max_rows=1000), [5, 5, 5, 5, 5], id="window-not-full"),
    ],
)
def test_warm_refits_add_warm_rounds_until_max_trees(config: LearnedConfig, trees: list[int]) -> None:
    assert _refits(config)[0] == trees


def test_warm_bins_bin_a_warm_refit_with_the_last_cold_fits_bins() -> None:
    _, estimator = _refits(dataclasses.replace(WARM, warm_bins=True), refits=3)  # cold, warm, warm
    assert estimator._bins is not None and estimator._booster.train_set.reference is estimator._bins
    _, plain = _refits(WARM, refits=3)
    assert plain._bins is None and plain._booster.train_set.reference is None


def test_the_default_config_refits_warm_with_the_last_cold_fits_bins() -> None:
    """The default's warm refits (3 trees each, binned as the last cold fit), on COLD's small window."""
    default = LearnedConfig()
    assert (default.warm_rounds, default.max_trees, default.warm_bins) == (3, 60, True)
    trees, estimator = _refits(dataclasses.replace(default, **{k: getattr(COLD, k) for k in
                                                               ("min_train", "rounds", "retrain_jobs",
                                                                "retrain_seconds", "max_rows")}))  # fmt: skip
    assert trees == [5, 8, 11, 14, 17]
    assert estimator._booster.train_set.reference is estimator._bins is not None


WARM_PHILLY = dataclasses.replace(SMALL, max_rows=600, warm_rounds=3, max_trees=29)


@pytest.mark.parametrize("config", [WARM_PHILLY, dataclasses.replace(WARM_PHILLY, warm_bins=True)],
                         ids=["warm", "warm-bins"])  # fmt: skip
def test_warm_refits_are_honest_and_deterministic(
    philly: tuple[ClusterSpec, tuple[JobSpec, ...]], config: LearnedConfig  # noqa: F811
) -> None:
    """As `test_no_future_leaks_in`: durations of jobs unfinished at a cut shuffled, the predictions
    made by then unchanged; and the same config twice gives the same predictions."""
    cluster, jobs = philly
    first, ends = replay(cluster, jobs, LearnedEstimator(config, upcoming=jobs))
    assert first.inner.fits >= 4 and first.inner._booster.num_trees() > config.rounds  # warm ones happened
    again, _ = replay(cluster, jobs, LearnedEstimator(config, upcoming=jobs))
    assert again.seen == first.seen
    starts = {job.job_id: ends[job.job_id] - job.duration for job in jobs if job.job_id in ends}
    cut = jobs[2500].submit
    changed = shuffled_after(jobs, ends, starts, cut, seed=7)
    second, _ = replay(cluster, changed, LearnedEstimator(config, upcoming=changed))
    before = {k: v for k, v in first.seen.items() if v[0] <= cut}
    assert [k for k, v in before.items() if second.seen.get(k) != v] == []
    assert any(v[0] > cut and second.seen.get(k) != v for k, v in first.seen.items())

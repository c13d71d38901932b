"""The learned estimator's interval in forecasts: each job's draw goes through the model's own
p10/p50/p90, a model saved by `estimator train` gives the same draws as one fitted here, seeds
repeat, and a history too short to learn from is refused in one line.

Fixtures: the snapshot of tests/twin/data (see data/make_snapshot.py) and, as the history, the first
3,000 jobs of the shared Philly-shaped trace (../shared/traces/philly_mix1/jobs.csv).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from gputwin.adapters.traces import read_trace
from gputwin.errors import InputError
from gputwin.twin.forecast import forecast
from gputwin.twin.learned import LearnedIntervals, learned_intervals
from gputwin.twin.sampling import Z90, job_spec, plan
from gputwin.twin.seed import default_cluster
from gputwin.twin.snapfile import load_snapshot

DATA = Path(__file__).resolve().parent / "data"
TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "philly_mix1"
pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared traces not found at {TRACES}")
SNAP = load_snapshot(DATA / "philly-mix1-2vc.snapshot.json")


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("learned") / "philly-3000.csv"
    with (TRACES / "jobs.csv").open() as src:
        path.write_text("".join(itertools.islice(src, 3001)))
    return path


@pytest.fixture(scope="module")
def fitted(history: Path) -> LearnedIntervals:
    trace = read_trace(history)
    return learned_intervals(SNAP, trace.jobs, trace.origin)


def test_each_draw_passes_through_the_models_p10_p50_p90(fitted: LearnedIntervals) -> None:
    the_plan = plan(SNAP, fitted)
    checked = 0
    for job, draw in the_plan.pending:
        p10, p50, p90 = fitted.interval(job_spec(job, 0.0, job.partition, 0))
        if not 0 < p10 <= p50 <= p90:
            continue  # the default spread around the point (the sampling module's fallback)
        assert (draw.at(-Z90), draw.median, draw.at(Z90)) == pytest.approx((p10, p50, p90), rel=1e-9)
        checked += 1
    assert checked >= 0.9 * len(SNAP.pending)  # the model placed nearly every job


def test_the_model_is_used_as_given_with_no_refit_on_the_history(fitted: LearnedIntervals) -> None:
    """The history (3,000 finished jobs, more than a fit needs) feeds the features only: neither
    the refit by jobs nor the daily one replaces the model trained on it before the batch."""
    plan(SNAP, fitted)
    assert fitted.learned.fits == 0 and fitted.learned._booster is not None


def test_the_forecast_is_seeded_and_moves_with_the_estimator(fitted: LearnedIntervals) -> None:
    cluster = default_cluster(SNAP)
    runs = [forecast(cluster, SNAP, fitted, samples=3, seed=seed, horizon=86400.0) for seed in (5, 5, 6)]
    starts = [[j.start_p50 for j in run.jobs] for run in runs]
    assert starts[0] == starts[1] and starts[0] != starts[2]
    history = forecast(cluster, SNAP, samples=3, seed=5, horizon=86400.0)
    assert [j.start_p50 for j in history.jobs] != starts[0]


def test_a_saved_model_gives_the_draws_of_one_trained_the_same_way(history: Path, tmp_path: Path) -> None:
    from gputwin.estimators.model import save, train
    from gputwin.estimators.online import LearnedConfig

    trace = read_trace(history)
    save(train(trace.jobs, LearnedConfig(), origin=trace.origin), tmp_path)
    loaded = learned_intervals(SNAP, model=tmp_path)
    draws = [d for _, d in plan(SNAP, loaded).pending]
    assert all(d.median > 0 and math.isfinite(d.sigma) for d in draws)
    again = [d for _, d in plan(SNAP, learned_intervals(SNAP, model=tmp_path)).pending]
    assert draws == again


@pytest.mark.parametrize("count", [0, 500], ids=["empty", "short"])
def test_a_history_too_short_is_refused(history: Path, count: int) -> None:
    jobs = read_trace(history).jobs[:count]
    with pytest.raises(InputError, match=f"^jobs: {count} in the history; training needs at least 2000$"):
        learned_intervals(SNAP, jobs)


def test_a_folder_without_a_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"model.json: model: not found"):
        learned_intervals(SNAP, model=tmp_path)
    (tmp_path / "model.json").write_text("{not json")
    (tmp_path / "model.txt").write_text("")
    with pytest.raises(InputError, match=r"model\.json:1: model\.json: not JSON$"):  # estimators.model's own check
        learned_intervals(SNAP, model=tmp_path)

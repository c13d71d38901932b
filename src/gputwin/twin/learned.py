"""The learned run-time estimator (`gputwin.estimators`) as the forecast's interval estimator.

`LearnedIntervals` answers `interval(job) -> (p10, p50, p90)` from the LightGBM model's
prediction (its conformal p10/p90 and its median), which `gputwin.twin.sampling` turns into a
two-piece log-normal through those three points; a job the model cannot place (no model yet, an
interval reaching below a second) falls back to the point with the default spread there.

The model comes trained offline (`gputwin estimator train --out DIR`, loaded from DIR) or is trained
here the same way on a history of finished jobs; a history also feeds the features (users' and names' recent
run times) either way. Times: the snapshot's are taken as epoch seconds (a live cluster's are), so
the history's jobs are moved onto that clock by the trace's origin. Every job of the snapshot is
predicted in one batch (one LightGBM call) the first time any is asked for, with the history as of
then; the replays ask nothing more (`gputwin.twin.forecast.Points`), so the draws stay seeded.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gputwin.core.model import JobSpec
from gputwin.errors import InputError
from gputwin.twin.sampling import job_spec
from gputwin.twin.snapshot import PendingJob, RunningJob, Snapshot

if TYPE_CHECKING:
    from gputwin.estimators.online import LearnedEstimator


class LearnedIntervals:
    """A `LearnedEstimator` seen through `IntervalEstimator` (and `Estimator`, for its points)."""

    def __init__(self, learned: LearnedEstimator) -> None:
        self.learned = learned

    def predict(self, job: JobSpec) -> float:
        return self.learned.predict(job)

    def observe(self, job: JobSpec, run_seconds: float) -> None:
        self.learned.observe(job, run_seconds)

    def interval(self, job: JobSpec) -> tuple[float, float, float]:
        got = self.learned.forecast(job)
        return got.low, got.median, got.high


def learned_intervals(snap: Snapshot, history: Sequence[JobSpec] = (), origin: float = 0.0,
                      model: Path | None = None, seed: int = 0) -> LearnedIntervals:  # fmt: skip
    """The estimator for `snap`: loaded from `model` or trained on `history` (finished jobs, times
    relative to `origin`), which it observes in the order they ended."""
    from gputwin.estimators.model import train
    from gputwin.estimators.online import LearnedConfig, LearnedEstimator

    jobs: list[RunningJob | PendingJob] = [*snap.running, *snap.pending]
    upcoming = sorted((job_spec(j, 0.0, j.partition, 0) for j in jobs), key=lambda s: s.submit)
    finished = sorted((dataclasses.replace(j, submit=j.submit + origin) for j in history
                       if j.state == "COMPLETED" and j.duration > 0), key=lambda j: (j.submit, j.seq))  # fmt: skip
    if model is not None:
        learned = _load(model, upcoming)
    else:
        # Trained offline (holdout-scored): its p10/p90 offsets are there from the first prediction,
        # where a model fitted online would have no honest residuals yet.
        trained = train(finished, LearnedConfig(seed=seed))
        learned = LearnedEstimator(LearnedConfig(seed=seed), upcoming=upcoming)
        meta = trained.metadata
        learned.start_from(trained.booster, (meta["offsets"][0], meta["offsets"][1]), meta["smear"])
    # The whole snapshot in one batch, with the model as given: no refit on the history below, by
    # jobs or by time (the daily refit would otherwise replace the model at the first prediction).
    learned.config = dataclasses.replace(learned.config, window=math.inf, retrain_jobs=sys.maxsize,
                                         retrain_seconds=0.0)  # fmt: skip
    for job in sorted(finished, key=lambda j: (j.submit + j.duration, j.seq)):
        learned.observe(job, job.duration)
    if upcoming:
        learned.predict(upcoming[0])
    return LearnedIntervals(learned)


def _load(folder: Path, upcoming: Sequence[JobSpec]) -> LearnedEstimator:
    from gputwin.estimators.model import META, MODEL, load

    for name in (META, MODEL):
        if not (folder / name).is_file():
            raise InputError(f"{folder / name}: model: not found (write one with gputwin estimator train --out DIR)")
    try:
        return load(folder, upcoming)
    except InputError:
        raise
    except Exception as exc:  # a damaged file: JSON, metadata fields, LightGBM's own parse errors
        raise InputError(f"{folder / META}: model: cannot be loaded: {str(exc).splitlines()[0][:120]}") from None


__all__ = ["LearnedIntervals", "learned_intervals"]

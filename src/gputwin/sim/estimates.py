"""How good a run-time estimator is: its errors on a replayed trace and the QSSF JCT it leads to.

`evaluate` replays the trace once per estimator with every partition on QSSF, then compares each
finished job's prediction (made at its submission, as QSSF used it: `UNKNOWN` becomes the
partition's prior) with its true run time: mean absolute error, median absolute percentage error,
Spearman rank correlation, and for the learned estimator the share of true run times inside its
p10-p90 interval (over the jobs it gave one for: none before its first fit). The oracle's run is
QSSF with perfect knowledge, the bound the others are measured against.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gputwin.core.history import DEFAULT_PRIOR, Estimator, or_prior
from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.sim.run import Overrides, run_summary

if TYPE_CHECKING:
    from gputwin.estimators.online import LearnedConfig


@dataclass(frozen=True, slots=True)
class Scores:
    """One estimator's figures (seconds; NaN where not defined, such as the oracle's errors)."""

    jobs: int
    mae_s: float
    median_ape: float
    spearman: float
    qssf_avg_jct: float
    wall_s: float
    coverage: float = math.nan
    covered_jobs: int = 0

    def to_json(self, name: str) -> dict[str, Any]:
        keys = {"oracle": ("qssf_avg_jct",), "learned": ("mae_s", "median_ape", "spearman", "qssf_avg_jct",
                "coverage")}.get(name, ("mae_s", "median_ape", "spearman", "qssf_avg_jct"))  # fmt: skip
        return {k: _round(getattr(self, k)) for k in keys}


def evaluate(cluster: ClusterSpec, jobs: Sequence[JobSpec], names: Sequence[str] = ("history", "learned", "oracle"),
             seed: int = 0, origin: float = 0.0,
             config: LearnedConfig | None = None) -> dict[str, Scores]:  # fmt: skip
    """Replay `jobs` under QSSF once per estimator in `names` (`gputwin.estimators.ESTIMATORS`);
    `config`: the learned estimator's (default `LearnedConfig(seed=seed)`)."""
    return {name: _one(cluster, jobs, name, seed, origin, config) for name in names}


def _one(cluster: ClusterSpec, jobs: Sequence[JobSpec], name: str, seed: int, origin: float,
         config: LearnedConfig | None) -> Scores:  # fmt: skip
    from gputwin.estimators import factory

    made: list[Estimator] = []
    build = factory(name, jobs, seed, origin, record=True, config=config)

    def keep() -> Estimator:
        made.append(build())
        return made[-1]

    started = time.perf_counter()
    summary, outcome = run_summary(
        cluster, jobs, overrides=Overrides(queue="qssf"), seed=seed, estimator=keep
    )
    wall = time.perf_counter() - started
    true = [job.spec.duration for job in outcome.finished]
    predicted = [or_prior(job.predicted, DEFAULT_PRIOR) for job in outcome.finished]
    coverage, covered = _coverage(made[0] if made else None, outcome.finished)
    return Scores(len(true), _mae(predicted, true), _median_ape(predicted, true), _spearman(predicted, true),
                  summary.avg_jct, wall, coverage, covered)  # fmt: skip


def _coverage(estimator: object, finished: Sequence[Any]) -> tuple[float, int]:
    forecasts: Callable[[str], Any] | None = getattr(estimator, "prediction", None)
    if forecasts is None:
        return math.nan, 0
    hits = total = 0
    for job in finished:
        pred = forecasts(job.spec.job_id)
        if pred is None or math.isnan(pred.low):
            continue
        total += 1
        hits += pred.low <= job.spec.duration <= pred.high
    return (hits / total if total else math.nan), total


def _mae(predicted: Sequence[float], true: Sequence[float]) -> float:
    return statistics.fmean(abs(p - t) for p, t in zip(predicted, true)) if true else math.nan


def _median_ape(predicted: Sequence[float], true: Sequence[float]) -> float:
    errors = [abs(p - t) / t for p, t in zip(predicted, true) if t > 0]
    return statistics.median(errors) if errors else math.nan


def _spearman(predicted: Sequence[float], true: Sequence[float]) -> float:
    if len(true) < 2 or len(set(predicted)) < 2 or len(set(true)) < 2:
        return math.nan
    from scipy.stats import spearmanr

    return float(spearmanr(predicted, true).statistic)


def _round(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)

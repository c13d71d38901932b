"""A learned run-time estimator: gradient-boosted trees over submit-time features, trained online.

`LearnedEstimator` implements the core's `Estimator` protocol (`predict`, `observe`), so QSSF and
the scheduler use it exactly as they use `HistoryEstimator`; the simulator injects it through
`SchedulerOptions.estimator` (`gputwin simulate --estimator learned`).

Honest by construction: a model is fitted only on jobs the scheduler has reported finished
(`observe`), and the driver reports an end before it submits anything at the same instant, so at a
prediction made at time t every training row finished at or before t. Rows are the features the
job had when it was predicted (`features.FeatureState`; never its duration).

Batched: the model changes only when it is refitted, so when the driver passes the trace
(`upcoming`: the jobs it will submit, read for submit-time fields only), one `predict` at time t
describes and predicts every job submitted in [t, t + window) in one LightGBM call, with the
history as of t. Refits happen at those batch starts: after `retrain_jobs` newly finished jobs, or
`retrain_seconds` of simulated time (default a day; 0: off), once `min_train` jobs have finished;
the training window keeps the last `max_rows` finished jobs (bounded memory and fit time). The
daily refit is for slow sites: Alibaba's 6,203 pods span 149 days, and refits every 5,000 jobs gave
one fit, on the first 1,000, for the whole trace (Spearman 0.42 -> 0.47 with it); the Philly-shaped
trace's 30,756 jobs span 5.6 h, so its refits are those of `retrain_jobs` alone. Until the first
fit the answer is the geometric running mean of the job's groups (`_geometric`).

The model predicts log(1 + run seconds) (squared error); `predict` answers the expected run time
(times Duan's smearing factor: QSSF orders by expected GPU time), `Prediction.median` the median.
The p10/p90 pair is the log prediction plus percentiles of its recent honest residuals (errors of
earlier predictions, known once those jobs finished): conformal, with the adaptive step of Gibbs
and Candes so coverage holds while run times drift. Why not LightGBM's quantile objective: on the
Philly trace its p10-p90 covered 36 % of later jobs, not 80 %.

Why LightGBM and not scikit-learn's HistGradientBoostingRegressor (measured on the Philly-shaped
trace's features, 100k rows, one core, load ~4, 3 models of 100 rounds): LightGBM fitted in 3.1 s
against 11.3 s, predicted one row in 56 us against 6.8 ms (per-call overhead: it matters for
online use), with the same accuracy (Spearman 0.177 against 0.172 on the last 30 % of jobs);
scikit-learn also failed on a constant feature column (a trace spanning less than a day).
"""

from __future__ import annotations

import bisect
import math
import struct
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gputwin.core.history import UNKNOWN
from gputwin.core.model import JobSpec
from gputwin.estimators.features import CATEGORICAL, FEATURES, FeatureState, Handle

_WIDTH = len(FEATURES)
_HISTORY = FEATURES.index("history_log")  # the geometric running mean, the answer before a fit


@dataclass(frozen=True, slots=True)
class LearnedConfig:
    """How often to refit, how much to keep, and the trees' size (all deterministic given `seed`)."""

    retrain_jobs: int = 7500
    retrain_seconds: float = 86_400.0  # simulated seconds: refit at least daily (0: only by jobs)
    min_train: int = 1000
    max_rows: int = 5000
    window: float = 60.0
    rounds: int = 40
    leaves: int = 15
    residuals: int = 2000  # honest residuals the p10/p90 offsets are taken from
    miss: float = 0.2  # the interval's target miss rate (p10-p90), kept by adaptive conformal steps
    miss_step: float = 0.005
    smear: bool = True  # predict the expected run time, not exp(expected log run time)
    seed: int = 0
    # Warm refits (see `_fit`; 0: every refit cold): a refit boosts `warm_rounds` more trees on top
    # of the model it has, while the model stays within `max_trees`; then the next refit is cold.
    # The defaults are the cheapest setting measured to meet issue 14's accuracy targets on both
    # shared traces, at about half the overhead of cold refits (benchmarks/README.md, estimator.py).
    warm_rounds: int = 3
    max_trees: int = 60
    warm_bins: bool = True  # a warm refit bins its rows with the last cold fit's bin mappers


@dataclass(frozen=True, slots=True)
class Prediction:
    """One prediction: when it was made (simulated s), and the run time with its p10/p90 (s)."""

    at: float
    seconds: float
    low: float
    high: float
    median: float = UNKNOWN  # exp of the predicted log run time; `seconds` is the mean (see `smear`)


# What a prediction keeps: features, log prediction, made at, seconds, p10 and p90 log offsets,
# and the feature groups the job's run time joins when it finishes.
_Entry = tuple[Any, float, float, float, float, float, Handle]


class LearnedEstimator:
    """Trees fitted on finished jobs; the groups' geometric running mean until the first fit."""

    def __init__(self, config: LearnedConfig = LearnedConfig(), upcoming: Sequence[JobSpec] = (),
                 record: bool = False, origin: float = 0.0) -> None:  # fmt: skip
        self.config = config
        self.features = FeatureState(origin=origin)
        self.fits = 0
        self.predictions: dict[str, _Entry] | None = {} if record else None
        self._upcoming = upcoming
        self._submits = [job.submit for job in upcoming]
        self._booster: Any = None
        self._trees = 0  # trees in the model this estimator fitted (0: none, or one from `start_from`)
        self._bins: Any = None  # the last cold fit's Dataset, whose bin mappers warm refits reuse
        self._full = False  # whether the last fit had a full window (`max_rows` rows): warm refits may follow
        self._offsets = (math.nan, math.nan)
        self._alpha = config.miss
        # What a model trained offline brings (`model.load`): used until live residuals replace them.
        self._prior_offsets = (math.nan, math.nan)
        self._prior_smear = 1.0
        self._rows: deque[Any] = deque(maxlen=config.max_rows)  # feature lists, or numpy row views
        self._targets: deque[float] = deque(maxlen=config.max_rows)
        # The last `residuals` honest residuals, a numpy ring once there is a model (`_settle`).
        self._residuals: Any = None
        self._residual_count = 0
        self._residual_next = 0
        # Target, log, p10 and p90 offsets (flat, 4 a job) of model predictions whose jobs finished
        # since the last batch: scored at the next one (`_settle`), where the residuals are read.
        self._fresh: list[float] = []
        self._smear_now = 1.0
        self._pending: dict[str, _Entry] = {}
        self._new = 0
        self._fitted_at = -math.inf
        self._window_end = -math.inf

    # --- the Estimator protocol ---------------------------------------------------------------

    def predict(self, job: JobSpec) -> float:
        pending = self._pending.get(job.job_id)
        if pending is None:
            self._start_batch(job)
            pending = self._pending[job.job_id]
        return pending[3]

    def observe(self, job: JobSpec, run_seconds: float) -> None:
        # Once per finished job: O(1) appends; the residual bookkeeping waits for the next batch.
        pending = self._pending.pop(job.job_id, None)
        target = math.log1p(max(run_seconds, 0.0))  # features.log_seconds, inlined
        if pending is None:
            row, handles = self.features.describe([job])
            handle = handles[0]
        else:
            row, log, _, _, low_off, high_off, handle = pending
            if log == log:  # not NaN: the model made it, so its error is an honest residual
                self._fresh.extend((target, log, low_off, high_off))
        self._rows.append(row)
        self._targets.append(target)
        self._new += 1
        FeatureState.learn(handle, target)

    # --- intervals ----------------------------------------------------------------------------

    def forecast(self, job: JobSpec) -> Prediction:
        """The run time of `job` with its p10/p90, predicted at its submit time (memoised)."""
        self.predict(job)
        return _prediction(self._pending[job.job_id])

    def prediction(self, job_id: str) -> Prediction | None:
        """What was predicted for `job_id` (None if nothing, or if not built with `record`)."""
        got = self.predictions.get(job_id) if self.predictions is not None else None
        return _prediction(got) if got is not None else None

    def _start_batch(self, job: JobSpec) -> None:
        now = job.submit
        if self._due(now):
            self._fit(now)
        batch = [job]
        if now >= self._window_end:
            self._window_end = now + self.config.window
            lo = bisect.bisect_left(self._submits, now)
            hi = bisect.bisect_left(self._submits, self._window_end)
            batch += [
                j for j in self._upcoming[lo:hi] if j.job_id not in self._pending and j.job_id != job.job_id
            ]
        self._predict_batch(batch, now)

    def _due(self, now: float) -> bool:
        cfg = self.config
        if len(self._rows) < cfg.min_train or not self._new:
            return False
        if self._booster is None or self._new >= cfg.retrain_jobs:
            return True
        return cfg.retrain_seconds > 0 and now - self._fitted_at >= cfg.retrain_seconds

    def _predict_batch(self, batch: list[JobSpec], now: float) -> None:
        flat, handles = self.features.describe(batch)
        if self._booster is None:
            rows: Sequence[Any] = [flat[i : i + _WIDTH] for i in range(0, len(flat), _WIDTH)]
            logs = [math.nan] * len(batch)
            points = [_geometric(flat[i + _HISTORY]) for i in range(0, len(flat), _WIDTH)]
            self._offsets = self._prior_offsets  # no residuals before a model
        else:
            import numpy as np

            self._settle(np)
            matrix = _floats(flat, np).reshape(-1, _WIDTH)
            rows = list(matrix)  # a view of each row: kept for training if the job finishes
            predicted = self._booster.predict(matrix, num_threads=1)
            smear = self._smear_now if self._residual_count >= 50 else self._prior_smear
            smear = smear if self.config.smear else 1.0
            logs, points = predicted.tolist(), np.maximum(np.exp(predicted) * smear - 1.0, 0.0).tolist()
        low_off, high_off = self._offsets
        entries = {j.job_id: (row, log, now, point, low_off, high_off, handle)
                   for j, row, log, point, handle in zip(batch, rows, logs, points, handles)}  # fmt: skip
        self._pending.update(entries)
        if self.predictions is not None:
            self.predictions.update(entries)

    def _settle(self, np: Any) -> None:
        """Score the predictions whose jobs finished since the last batch, in finishing order: their
        residuals (the p10/p90 offsets and Duan's smearing factor, mean(exp(residual)): exp of a
        mean log run time is a median-like guess, times this factor the expected run time QSSF's
        order needs), and the adaptive conformal step of each (Gibbs and Candes 2021: widen the
        interval after a miss, narrow it after a hit, so the long-run miss rate stays at `miss`)."""
        fresh, self._fresh = self._fresh, []
        if fresh:
            target, log, low, high = _floats(fresh, np).reshape(-1, 4).T
            self._keep_residuals(target - log, np)
            scored = ~np.isnan(low)  # a prediction made without an interval takes no step
            hit = (log + low <= target) & (target <= log + high)
            self._alpha = _adapt(self._alpha, self.config, (~hit[scored]).astype(float), np)
        n = self._residual_count
        if n < 50:
            self._offsets = self._prior_offsets
            return
        if fresh or math.isnan(self._offsets[0]):
            values = self._residuals[:n]
            self._smear_now = float(np.exp(values).sum() / n)
            low_k, high_k = (min(n - 1, int(q * n)) for q in (self._alpha / 2, 1 - self._alpha / 2))
            ordered = np.partition(values, (low_k, high_k))  # the two order statistics sorting gives
            self._offsets = (float(ordered[low_k]), float(ordered[high_k]))

    def _keep_residuals(self, values: Any, np: Any) -> None:
        """Write `values` into the residual ring, the oldest overwritten first."""
        size = self.config.residuals
        if self._residuals is None:
            self._residuals = np.empty(size)
        values = values[-size:]
        start, count = self._residual_next, len(values)
        first = min(count, size - start)
        self._residuals[start : start + first] = values[:first]
        self._residuals[: count - first] = values[first:]
        self._residual_next = (start + count) % size
        self._residual_count = min(size, self._residual_count + count)

    def start_from(self, booster: Any, offsets: tuple[float, float], smear: float) -> None:
        """Begin with a model fitted elsewhere (`model.load`); it is refitted on live jobs as usual."""
        self._booster, self._prior_offsets, self._prior_smear = booster, offsets, smear

    def _fit(self, now: float) -> None:
        """Refit on the kept rows: a new model of `rounds` trees (cold), or with `warm_rounds` set,
        `warm_rounds` more trees on the model this estimator fitted last (warm), fitted to its
        errors on the current window, as long as the model stays within `max_trees`; the refit
        after that is cold again, so old windows' trees do not stay for good. A warm refit grows a
        few trees instead of `rounds` (LightGBM's tree growing is most of a refit's cost); with
        `warm_bins` it also skips bin finding, reusing the last cold fit's bin mappers (categories
        first seen since then share LightGBM's bin for unseen values until the next cold fit).
        Only a model fitted on a full window (`max_rows` rows) is boosted on: while the window
        fills, refits are cold, so trees grown on the first thousand jobs do not stay on as the
        base of every later model (the one-fit problem on the Alibaba trace: a model of its first
        1,000 pods predicting the rest ranked them at Spearman 0.40; its windows never fill at
        10,000 rows, so a warm setting leaves it as it is)."""
        from gputwin.estimators.trees import boost, fit

        import numpy as np

        cfg = self.config
        # One concatenation of the kept rows (numpy row views, or lists before the first fit):
        # cheaper than np.asarray's shape discovery on a list of 10,000 rows; the same values.
        rows = np.concatenate(self._rows).reshape(-1, _WIDTH)
        targets = list(self._targets)
        if cfg.warm_rounds and self._full and self._trees + cfg.warm_rounds <= cfg.max_trees:
            bins = self._bins if cfg.warm_bins else None
            self._booster = boost(self._booster, rows, targets, cfg, bins)
            self._trees += cfg.warm_rounds
        else:
            self._booster = fit(rows, targets, cfg)
            self._trees, self._bins = cfg.rounds, self._booster.train_set if cfg.warm_bins else None
        self._full = len(targets) == cfg.max_rows
        self._new = 0
        self._fitted_at = now
        self.fits += 1


def _floats(values: list[float], np: Any) -> Any:
    """`values` as a float64 array, the same doubles np.array(values) gives. struct packs a list of
    Python floats in one C loop; np.array inspects each item for its dtype and shape first (callgrind,
    philly_mix1 QSSF replay: ~340 instructions a float against ~95)."""
    return np.frombuffer(bytearray(struct.pack(f"{len(values)}d", *values)))


def _geometric(log_mean: float) -> float:
    """The answer before the first fit: exp of the most specific group's mean log run time (the
    `history_log` column; NaN, `UNKNOWN`, when no job has finished). Not `HistoryEstimator`'s
    arithmetic mean: a group's few very long runs pull that far above most of its runs. On the
    Alibaba trace (1,222 pods answered before the first fit) the arithmetic answers doubled QSSF's
    average JCT (121,645 against 60,210 s, means of 8 tie-noise replays, benchmarks/README.md)."""
    return UNKNOWN if log_mean != log_mean else math.expm1(log_mean)


def _prediction(entry: _Entry) -> Prediction:
    log, at, point, low_off, high_off = entry[1:6]
    if math.isnan(log):
        return Prediction(at, point, UNKNOWN, UNKNOWN)
    return Prediction(at, point, math.expm1(log + low_off), math.expm1(log + high_off), math.expm1(log))


def _adapt(alpha: float, config: LearnedConfig, misses: Any, np: Any) -> float:
    """`alpha` after one adaptive step per prediction scored (`misses`: 1.0 a miss, 0.0 a hit),
    kept within [0.01, 0.9]: one running sum unless a step reaches a bound (then step by step)."""
    steps = config.miss_step * (config.miss - misses)
    path = np.cumsum(np.concatenate(([alpha], steps)))  # sequential sums: the loop's own floats
    if 0.01 <= path.min() and path.max() <= 0.9:
        return float(path[-1])
    for step in steps.tolist():
        alpha = min(0.9, max(0.01, alpha + step))
    return alpha


class OracleEstimator:
    """Knows every job's true run time: the bound a learned estimator is measured against."""

    def predict(self, job: JobSpec) -> float:
        return job.duration

    def observe(self, job: JobSpec, run_seconds: float) -> None:
        pass


__all__ = ["CATEGORICAL", "LearnedConfig", "LearnedEstimator", "OracleEstimator", "Prediction"]

"""Run times nobody knows yet, drawn: one `Plan` of points per job, then seeded draws around them.

The point for a job is, first found: the snapshot's own `estimate`, the estimator's prediction
(`gputwin.core.history.Estimator`, e.g. the history one), the user's time limit, `DEFAULT_PRIOR`.
Draws are log-normal around the point. An estimator that also has `interval(job) -> (p10, p50,
p90)` (the learned one, `IntervalEstimator`) sets each job's median and spread - two-piece, so an
interval skewed to the right (p90/p50 > p50/p10, as run times are) is met exactly; any other gets
`DEFAULT_SIGMA`, a documented placeholder spread (p10 = 0.53x, p90 = 1.9x the point) until the
learned interval exists. A draw never passes the time limit (the cluster ends the job there), and
a running job's draw is conditioned on the time it has already run (inverse CDF on [elapsed, limit]).
Sample `i` of seed `s` always draws the same numbers, whichever process runs it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from statistics import NormalDist
from typing import NamedTuple, Protocol, Sequence, runtime_checkable

from gputwin.core.history import DEFAULT_PRIOR, Estimator, HistoryEstimator
from gputwin.core.model import JobSpec
from gputwin.twin.draws import MIN_SECONDS, Columns, RunningColumns, draw_columns
from gputwin.twin.snapshot import PendingJob, RunningJob, Snapshot

DEFAULT_SIGMA = 0.5
Z90 = NormalDist().inv_cdf(0.9)  # 1.2816: p90 / p50 = exp(sigma * Z90) for a log-normal
_UNIT = NormalDist()


@runtime_checkable
class IntervalEstimator(Protocol):
    """An estimator that knows how sure it is: p10, p50 and p90 of the job's run time (seconds)."""

    def interval(self, job: JobSpec) -> tuple[float, float, float]: ...


class Draw(NamedTuple):
    """A job's run time as a two-piece log-normal: median `median`, log-space spread `sigma` above
    it and `sigma_low` below it (None: the same), cut at `limit`. A NamedTuple, not a frozen
    dataclass: a forecast makes one per job (12,600 at issue 15's size), and a frozen dataclass's
    __init__ (a `setattr` per field, interpreted) cost several times what the tuple does."""

    median: float
    sigma: float
    limit: float  # inf when the job has none
    sigma_low: float | None = None

    def at(self, z: float) -> float:
        """The run time at standard-normal quantile `z`."""
        spread = self.sigma if z >= 0 or self.sigma_low is None else self.sigma_low
        return self.median * math.exp(spread * z)

    def z_of(self, seconds: float) -> float:
        spread = self.sigma if seconds >= self.median or self.sigma_low is None else self.sigma_low
        return math.log(seconds / self.median) / spread


@dataclass(frozen=True, slots=True)
class Plan:
    """Per job id its `Draw`; running jobs also their elapsed time at the snapshot."""

    running: tuple[tuple[RunningJob, Draw, float], ...]
    pending: tuple[tuple[PendingJob, Draw], ...]


def job_spec(job: RunningJob | PendingJob, duration: float, task_type: str, seq: int) -> JobSpec:
    gpus = job.gpus
    nodes = len(job.slots) if isinstance(job, RunningJob) else job.num_nodes
    priority = job.priority if isinstance(job, PendingJob) else 0
    return JobSpec(job.job_id, job.submit, duration, gpus, task_type, job.user, job.name, "PENDING",
                   priority, nodes, seq, job.model, job.gpu_milli, job.gpu_profile)  # fmt: skip


def plan(snap: Snapshot, estimator: Estimator, sigma: float = DEFAULT_SIGMA) -> Plan:
    """Each job's draw, asking the estimator once per job (never once per sample)."""
    if type(estimator) is HistoryEstimator:  # exactly: a subclass may predict otherwise
        return _plan_history(snap, estimator, sigma)
    # Asked once: isinstance against a runtime-checkable Protocol costs ~80 us a call.
    interval = isinstance(estimator, IntervalEstimator)
    running = tuple(
        (run, _draw(run, estimator, sigma, interval), max(snap.taken_at - run.start, 0.0)) for run in snap.running
    )
    return Plan(running, tuple((job, _draw(job, estimator, sigma, interval)) for job in snap.pending))


def _plan_history(snap: Snapshot, estimator: HistoryEstimator, sigma: float) -> Plan:
    """`plan` for the history estimator: its predictions asked in one batch by (user, name, task
    type), the fields it reads, not through a `JobSpec` made per job (most of a plan's cost). The
    same draws: it has no interval, and the task type asked with is the partition, as `_draw`'s."""
    jobs: list[RunningJob | PendingJob] = [*snap.running, *snap.pending]
    predicted = iter(estimator.predict_group([(job.user, job.name, job.partition) for job in jobs
                                              if job.estimate is None]))  # fmt: skip
    draws = [_point_draw(job, job.estimate if job.estimate is not None else _found(next(predicted)), sigma)
             for job in jobs]  # fmt: skip
    now, count = snap.taken_at, len(snap.running)
    running = tuple((run, d, max(now - run.start, 0.0)) for run, d in zip(snap.running, draws))
    return Plan(running, tuple(zip(snap.pending, draws[count:])))


def _found(predicted: float) -> float | None:
    """A prediction as a point, None if it is none (`UNKNOWN`, not finite, not positive)."""
    return predicted if math.isfinite(predicted) and predicted > 0 else None


def _point_draw(job: RunningJob | PendingJob, point: float | None, sigma: float) -> Draw:
    """`_draw`'s end from the point found so far (the snapshot's estimate or the prediction)."""
    if point is None:
        point = job.time_limit if job.time_limit is not None else DEFAULT_PRIOR
    return Draw(max(point, MIN_SECONDS), sigma, job.time_limit if job.time_limit is not None else math.inf)


def _draw(job: RunningJob | PendingJob, estimator: Estimator, sigma: float, interval: bool) -> Draw:
    limit = job.time_limit if job.time_limit is not None else math.inf
    spec = job_spec(job, 0.0, job.partition, 0)
    if interval and job.estimate is None:
        p10, p50, p90 = estimator.interval(spec)  # type: ignore[attr-defined]
        if 0 < p10 <= p50 <= p90 and math.isfinite(p90):
            return Draw(p50, math.log(p90 / p50) / Z90, limit, math.log(p50 / p10) / Z90)
    return _point_draw(job, job.estimate if job.estimate is not None else _found(estimator.predict(spec)), sigma)


def sample_rng(seed: int, sample: int) -> random.Random:
    """The generator of one sample: the same numbers whichever worker runs it."""
    return random.Random(f"gputwin-forecast:{seed}:{sample}")


def draw_pending(draw: Draw, rng: random.Random) -> float:
    return max(min(draw.at(rng.gauss()), draw.limit), MIN_SECONDS)


def draw_all_pending(draws: Sequence[Draw], rng: random.Random) -> list[float]:
    """`draw_pending` for each of `draws` in order, the same numbers, in one compiled loop
    (`gputwin.twin.draws`): a forecast draws every pending job of every sample, and two calls a
    job were most of the cost. A forecast works out the columns once (`pending_columns`)."""
    return draw_columns(pending_columns(draws), rng)


def pending_columns(draws: Sequence[Draw]) -> Columns:
    """The draws' fields as `draw_columns` reads them: medians, spreads above and below, limits."""
    return ([d.median for d in draws], [d.sigma for d in draws],
            [d.sigma if d.sigma_low is None else d.sigma_low for d in draws], [d.limit for d in draws])  # fmt: skip


# A running job's draw worked out as far as its elapsed time allows (`running_bounds`): the run
# time if it needs no random number (else -1.0), the least it may be, and the range of the
# uniform quantile it is drawn at (lowest, width).
Bounds = tuple[float, float, float, float]


def running_bounds(draw: Draw, elapsed: float) -> Bounds:
    """What `draw_running` works out before it draws: once per forecast, not once per sample."""
    low = elapsed + MIN_SECONDS
    if low >= draw.limit:
        return low, low, 0.0, 0.0  # at or past its limit: the cluster ends it any moment
    if draw.sigma <= 0 or draw.sigma_low == 0:
        return min(max(draw.median, low), draw.limit), low, 0.0, 0.0
    lo_u = _UNIT.cdf(draw.z_of(low))
    hi_u = 1.0 if math.isinf(draw.limit) else _UNIT.cdf(draw.z_of(draw.limit))
    return -1.0, low, lo_u, hi_u - lo_u


def running_columns(running: Sequence[tuple[Draw, Bounds]]) -> RunningColumns:
    """The running jobs' draws and bounds as `draw_running_columns` reads them."""
    return ([b[0] for _, b in running], [b[1] for _, b in running], [b[2] for _, b in running],
            [b[3] for _, b in running], [d.median for d, _ in running], [d.sigma for d, _ in running],
            [d.sigma if d.sigma_low is None else d.sigma_low for d, _ in running],
            [d.limit for d, _ in running])  # fmt: skip


def draw_bounded(draw: Draw, bounds: Bounds, rng: random.Random) -> float:
    """`draw_running` from its `running_bounds`: the same number, the same random numbers used."""
    fixed, low, lo_u, width = bounds
    if fixed >= 0.0:
        return fixed
    u = lo_u + width * rng.random()
    if not 0.0 < u < 1.0:  # far out in a tail: the bound is the answer
        return low if u <= 0.0 else min(draw.limit, low * 2)
    return min(max(draw.at(_UNIT.inv_cdf(u)), low), draw.limit)


def draw_running(draw: Draw, elapsed: float, rng: random.Random) -> float:
    """A total run time at least `elapsed` (and a second more), at most the limit."""
    return draw_bounded(draw, running_bounds(draw, elapsed), rng)


__all__ = ["DEFAULT_SIGMA", "MIN_SECONDS", "Bounds", "Draw", "IntervalEstimator", "Plan", "draw_all_pending",
           "draw_bounded", "draw_pending", "draw_running", "job_spec", "pending_columns", "plan", "running_bounds",
           "running_columns", "sample_rng"]  # fmt: skip

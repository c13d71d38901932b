"""Forecasts of a replay measured against the replay's own future: start-time error by how far ahead.

`snapshots_along(cluster, jobs, moments)` runs ONE replay of a trace on the one runtime, pauses at
each moment to read its state as a `Snapshot` (`gputwin.twin.replayed.state_snapshot`: arrivals
after the moment unseen) and goes on to the end, so every job's actual start is known. A forecast
from a snapshot is then scored with `start_errors`: per pending job, (horizon, absolute error),
the horizon being how far ahead the predicted start (p50) lay, predicted start - moment. Later
arrivals the snapshot could not see may still take a job's place (backfill), so even the oracle
(`told`: every true run time, no spread) errs where they do. `by_horizon` buckets the pairs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.core.scheduler import Scheduler, SchedulerOptions
from gputwin.runtime.clock import Replay, VirtualClock, run_steps
from gputwin.runtime.loop import Runtime
from gputwin.runtime.virtual import VirtualRuns
from gputwin.twin.forecast import Forecast, quantile
from gputwin.twin.replayed import state_snapshot
from gputwin.twin.seed import Watch
from gputwin.twin.snapshot import Snapshot

EDGES = (60.0, 300.0, 900.0, 3600.0, 10800.0)  # 1 min, 5 min, 15 min, 1 h, 3 h


@dataclass(frozen=True, slots=True)
class Along:
    """Snapshots taken along one replay (in time order) and every job's actual start in it."""

    snapshots: tuple[Snapshot, ...]
    starts: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Bucket:
    """Errors of the predictions whose horizon was in [low, high): count, median and p90 seconds."""

    low: float
    high: float
    count: int
    median: float | None
    p90: float | None

    @property
    def label(self) -> str:
        return f"{_short(self.low)}-{_short(self.high)}"


def snapshots_along(cluster: ClusterSpec, jobs: Sequence[JobSpec], moments: Iterable[float],
                    options: SchedulerOptions = SchedulerOptions()) -> Along:  # fmt: skip
    """Replay `jobs` (sorted by submit), a snapshot at each of `moments`, then on to the end."""
    scheduler, watch = Scheduler(cluster, options), Watch()
    replay, clock = Replay(Runtime(scheduler, VirtualRuns(), watch), jobs), VirtualClock()
    snaps = []
    for at in sorted(moments):
        run_steps(replay, clock, at)
        snaps.append(state_snapshot(scheduler, cluster, at))
    run_steps(replay, clock)
    return Along(tuple(snaps), dict(watch.starts))


def told(snap: Snapshot, truth: Mapping[str, float]) -> Snapshot:
    """`snap` with each job's true run time (seconds, by job id) as its estimate: the oracle's view."""
    return dataclasses.replace(
        snap,
        running=tuple(dataclasses.replace(r, estimate=truth.get(r.job_id, r.estimate)) for r in snap.running),
        pending=tuple(dataclasses.replace(p, estimate=truth.get(p.job_id, p.estimate)) for p in snap.pending),
    )


def ended_by(jobs: Sequence[JobSpec], starts: Mapping[str, float], at: float) -> list[JobSpec]:
    """The jobs that had ended by `at` (what a history could know then), in the order they ended."""
    done = [(starts[j.job_id] + j.duration, j.seq, j) for j in jobs if j.job_id in starts]
    return [j for end, _, j in sorted(done, key=lambda t: (t[0], t[1])) if end <= at]


def start_errors(result: Forecast, actual: Mapping[str, float]) -> list[tuple[float, float]]:
    """(horizon, |predicted - actual| start) per pending job the forecast started and the replay did."""
    pairs = []
    for job in result.jobs:
        real = actual.get(job.job_id)
        if job.start_p50 is not None and real is not None:
            pairs.append((job.start_p50 - result.taken_at, abs(job.start_p50 - real)))
    return pairs


def by_horizon(pairs: Iterable[tuple[float, float]], edges: Sequence[float] = EDGES) -> tuple[Bucket, ...]:
    """The errors grouped by horizon into [0, e0), [e0, e1), ..., [e_last, inf)."""
    bounds = [0.0, *edges, math.inf]
    groups: list[list[float]] = [[] for _ in bounds[1:]]
    for horizon, error in pairs:
        groups[_index(bounds, horizon)].append(error)
    return tuple(Bucket(low, high, len(g), quantile(g, 0.5) if g else None, quantile(g, 0.9) if g else None)
                 for low, high, g in zip(bounds, bounds[1:], groups))  # fmt: skip


def _index(bounds: Sequence[float], horizon: float) -> int:
    """The bucket of `horizon`: the last bound at or below it (a negative horizon goes first)."""
    for i in range(len(bounds) - 2, 0, -1):
        if horizon >= bounds[i]:
            return i
    return 0


def _short(seconds: float) -> str:
    if math.isinf(seconds):
        return "inf"
    for unit, size in (("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


__all__ = ["EDGES", "Along", "Bucket", "by_horizon", "ended_by", "snapshots_along", "start_errors", "told"]

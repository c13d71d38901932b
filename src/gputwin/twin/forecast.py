"""Forecasts from a snapshot: N seeded replays of the present, per-job start quantiles, drain times.

Each sample draws every unknown run time (`gputwin.twin.sampling`), seeds the runtime with the
snapshot (`gputwin.twin.seed`) and replays it on a virtual clock up to the horizon (or, when no
partition preempts, until every pending job has started: their ends are known then). Over the
samples, per pending job: its start at p50 and p90 and its end (None: not within the horizon in
that share of samples), and per partition the time until its current queue drains - every job
pending now has started - at p50 and p90. Quantiles are nearest-rank over all samples (a sample in
which the job did not start counts as "later than the horizon"), so p90 is a time that 90 % of
the draws met. The schedulers rank with the estimator's points (qssf sees predictions, not draws).

The live scheduler's start latency (`Snapshot.start_latency_s`, measured, never fitted) is
modelled as the job holding its GPUs that long before its run begins: the replay starts it the
instant room appears with its run time plus the latency, and its start is reported that much
later. Its end is then exact, and every later start in a chain moves by the latency again, as a
real queue does. 0 replays today's instant starts.

Large forecasts run their samples in `workers` processes (each takes every k-th sample; a sample's
draws depend only on (seed, sample), so the result does not depend on the split): the parent itself
and k - 1 forked ones. The forked processes inherit the task: nothing of it is pickled, which
compiled (mypyc) frozen values do not survive, and which would cost more than the replays of a
small forecast anyway.
"""

from __future__ import annotations

import gc
import math
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import NamedTuple

from gputwin.core.history import Estimator, HistoryEstimator, Points
from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.core.scheduler import Scheduler, SchedulerOptions
from gputwin.twin.draws import Columns, RunningColumns, draw_columns, draw_running_columns
from gputwin.twin.quantiles import job_quantiles, latest
from gputwin.twin.sampling import (DEFAULT_SIGMA, Plan, pending_columns, plan, running_bounds,
                                   running_columns, sample_rng)
from gputwin.twin.seed import Held, task_types
from gputwin.twin.snapshot import Snapshot

DEFAULT_HORIZON = 7 * 86400.0
PARALLEL_FROM = 50_000  # samples x pending jobs from which a second process pays for its start-up
INF = math.inf


class JobForecast(NamedTuple):
    """One pending job; times are on the snapshot's clock, None beyond the horizon. A NamedTuple,
    not a frozen dataclass: a forecast makes one per pending job, and a frozen dataclass's
    __init__ (interpreted, a `setattr` per field) cost several times what the tuple does."""

    job_id: str
    partition: str
    gpus: int
    start_p50: float | None
    start_p90: float | None
    end_p50: float | None
    end_p90: float | None
    started: float  # share of samples in which it started within the horizon
    rejected: str = ""  # why the twin's scheduler refused it ("" if it did not)


# `JobForecast(...)` without its `__new__` (Python source that collections generates: a call per
# pending job in the summary, the parent's serial part), as `gputwin.core.decision` builds a Start.
_new = tuple.__new__


@dataclass(frozen=True, slots=True)
class DrainForecast:
    """Seconds after the snapshot until every job pending now in `partition` has started."""

    partition: str
    pending: int
    drain_p50: float | None
    drain_p90: float | None


@dataclass(frozen=True, slots=True)
class Forecast:
    taken_at: float
    horizon: float
    samples: int
    seed: int
    jobs: tuple[JobForecast, ...]
    partitions: tuple[DrainForecast, ...]
    left_out: tuple[tuple[str, str], ...]  # running jobs the cluster could not hold, and why
    workers: int
    wall_seconds: float


@dataclass(frozen=True, slots=True)
class _Task:
    """One forecast's replays: what they share is worked out once (not once per sample)."""

    cluster: ClusterSpec
    plan: Plan
    options: SchedulerOptions
    seed: int
    until: float
    held: Held  # where each running job is held
    points: Points  # the estimator's points the schedulers rank by
    # In queue order, submit times at most the snapshot's; their durations are the points: each
    # replay queues them for its own draws (`Held.seed`'s `run_times`), a spec per job and sample
    # having cost more than queueing it (`JobSpec` is a frozen dataclass: its __init__ is Python).
    pending: tuple[JobSpec, ...]
    ids: list[str]  # their job ids
    columns: Columns  # their draws' fields, in the same order (`sampling.pending_columns`)
    latency: float  # the snapshot's start latency, seconds
    running: RunningColumns  # the running jobs' draws, as far as worked out once (`running_columns`)
    # Where the pending jobs queue (job id -> place), filled by this process's first replay: the
    # next ones queue them in that order, a pass instead of a sort (`Seeded.ranks`).
    ranks: dict[str, int]


def _task(cluster: ClusterSpec, snap: Snapshot, the_plan: Plan, options: SchedulerOptions, seed: int,
          until: float) -> _Task:  # fmt: skip
    kinds, now = task_types(cluster), snap.taken_at
    latency = snap.start_latency_s
    pending = tuple(JobSpec(job.job_id, min(job.submit, now), d.median + latency, job.gpus,
                            kinds.get(job.partition, job.partition), job.user, job.name, "PENDING", job.priority,
                            job.num_nodes, i, job.model, job.gpu_milli, job.gpu_profile)
                    for i, (job, d) in enumerate(the_plan.pending))  # fmt: skip
    held = Held(cluster, snap, [run for run, _, _ in the_plan.running])
    points = Points({job.job_id: d.median + latency for job, d in the_plan.pending})
    running = running_columns([(d, running_bounds(d, elapsed)) for _, d, elapsed in the_plan.running])
    ids = [job.job_id for job in pending]
    return _Task(cluster, the_plan, options, seed, until, held, points, pending, ids,
                 pending_columns([d for _, d in the_plan.pending]), latency, running, {})  # fmt: skip


_FORKED: list[_Task] = []  # the task a forked worker inherits (set only around the pool's life)


Sample = tuple[list[float], list[float], dict[str, str], dict[str, str]]  # starts, ends, rejects, left out


def forecast(
    cluster: ClusterSpec,
    snap: Snapshot,
    estimator: Estimator | None = None,
    *,
    samples: int = 32,
    seed: int = 0,
    horizon: float = DEFAULT_HORIZON,
    options: SchedulerOptions = SchedulerOptions(),
    sigma: float = DEFAULT_SIGMA,
    workers: int | None = None,
) -> Forecast:
    """Replay `samples` draws of the snapshot on `cluster` and summarise them (see the module)."""
    began = time.perf_counter()
    the_plan = plan(snap, estimator or HistoryEstimator(), sigma)
    runs, workers = replays(cluster, snap, the_plan, samples=samples, seed=seed, horizon=horizon, options=options,
                            workers=workers)  # fmt: skip
    wall = time.perf_counter() - began
    # The summary allocates a tuple per job and frees only temporaries: the cyclic collector would
    # rescan the samples' lists many times over (42 M instructions, an eighth of the summary, at
    # 10,000 jobs x 32 samples), so it pauses here too, as in `replays`.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _summary(snap, runs, horizon, seed, workers, wall)
    finally:
        if enabled:
            gc.enable()


def replays(cluster: ClusterSpec, snap: Snapshot, the_plan: Plan, *, samples: int, seed: int, horizon: float,
            options: SchedulerOptions = SchedulerOptions(), workers: int | None = None,
            ) -> tuple[list[Sample], int]:  # fmt: skip
    """Each sample of `the_plan` replayed on `cluster` (in sample order), and the processes used.
    The draws of sample i depend only on (seed, i): two clusters given the same plan and seed
    replay the same run times (`gputwin.twin.whatif` compares policies so)."""
    if workers is None:
        workers = 2 if samples * len(snap.pending) >= PARALLEL_FROM else 1
    if "fork" not in multiprocessing.get_all_start_methods():
        workers = 1
    workers = max(1, min(workers, samples))
    task = _task(cluster, snap, the_plan, options, seed, snap.taken_at + horizon)
    shares = [tuple(range(w, samples, workers)) for w in range(workers)]
    # The replays allocate many small acyclic objects that reference counting frees; the cyclic
    # collector would only rescan them (and the long-lived task), so it pauses, as `simulate`'s
    # does (forked workers inherit the pause).
    enabled = gc.isenabled()
    gc.disable()
    try:
        if workers == 1:
            results = [[replay_sample(task, i) for i in shares[0]]]
        else:
            # The parent replays share 0 itself while k - 1 forked workers replay the rest: it
            # would only wait for them otherwise, and one process fewer is one start-up fewer.
            _FORKED[:] = [task]
            with multiprocessing.get_context("fork").Pool(workers - 1) as pool:
                others = pool.map_async(_run_forked, shares[1:])
                own = [replay_sample(task, i) for i in shares[0]]
                results = [own, *others.get()]
    finally:
        _FORKED.clear()
        if enabled:
            gc.enable()
    by_sample = sorted(zip((i for share in shares for i in share), (r for res in results for r in res)))
    return [run for _, run in by_sample], workers


def _run_forked(samples: tuple[int, ...]) -> list[Sample]:
    return [replay_sample(_FORKED[0], i) for i in samples]


def replay_sample(task: _Task, sample: int) -> Sample:
    """One draw replayed: start and end (INF: not by the horizon) per pending job, in order."""
    rng = sample_rng(task.seed, sample)
    durations = draw_running_columns(task.running, rng)
    drawn = draw_columns(task.columns, rng)
    lag, pending = task.latency, task.pending
    scheduler = Scheduler(task.cluster, task.options, task.points)
    # Its pending jobs' starts and ends are all a forecast needs: the replay may stop once all started.
    seeded = task.held.seed(scheduler, durations, pending, starts_only=True, ranks=task.ranks,
                            run_times=[seconds + lag for seconds in drawn] if lag else drawn)  # fmt: skip
    watch = seeded.run(task.until)
    starts, ends = watch.times(task.ids, lag)
    return starts, ends, watch.rejects, seeded.left_out


def quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile (values may hold INF)."""
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def _finite(value: float, until: float) -> float | None:
    return value if value <= until else None


def _summary(snap: Snapshot, runs: list[Sample], horizon: float, seed: int, workers: int,
             wall: float) -> Forecast:  # fmt: skip
    """Per pending job its quantiles over the samples: worked out by the compiled
    `quantiles.job_quantiles` (a column per job, sorted once for both quantiles), the forecasts
    then made as tuples at C speed (`map`), with no interpreted step per job."""
    until = snap.taken_at + horizon
    rejects = runs[0][2] if runs else {}
    mid, high = _rank(len(runs), 0.5), _rank(len(runs), 0.9)
    columns = job_quantiles([r[0] for r in runs], [r[1] for r in runs], mid, high, until)
    ids = [job.job_id for job in snap.pending]
    fields = zip(ids, [job.partition for job in snap.pending], [job.gpus for job in snap.pending], *columns,
                 map(rejects.get, ids, repeat("")))  # fmt: skip
    jobs = tuple(map(_new, repeat(JobForecast), fields))
    left_out = tuple(sorted(runs[0][3].items())) if runs else ()
    return Forecast(snap.taken_at, horizon, len(runs), seed, jobs, _drains(snap, runs, until), left_out, workers,
                    wall)  # fmt: skip


def _rank(count: int, q: float) -> int:
    """The index of the nearest-rank `q` quantile in `count` sorted values (`quantile`)."""
    return max(math.ceil(q * count) - 1, 0)


def _drains(snap: Snapshot, runs: list[Sample], until: float) -> tuple[DrainForecast, ...]:
    rejects = runs[0][2] if runs else {}
    members: dict[str, list[int]] = {p.name: [] for p in snap.partitions}
    for i, job in enumerate(snap.pending):
        if job.job_id not in rejects:
            members.setdefault(job.partition, []).append(i)
    out = []
    for name, idx in members.items():
        drains = [latest(r[0], idx, snap.taken_at) - snap.taken_at for r in runs]
        p50, p90 = (quantile(drains, q) if drains else 0.0 for q in (0.5, 0.9))
        horizon = until - snap.taken_at
        out.append(DrainForecast(name, len(idx), _finite(p50, horizon), _finite(p90, horizon)))
    return tuple(out)


__all__ = ["DEFAULT_HORIZON", "DrainForecast", "Forecast", "JobForecast", "Points", "Sample", "forecast", "quantile",
           "replays"]  # fmt: skip

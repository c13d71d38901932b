"""Queue policies: the order in which a partition's jobs get GPUs, as small plugins.

A policy is a sort key plus a flag. Non-preemptive policies (`fifo`, `sjf`, `priority`, `qssf`)
differ only in `key`; the one strict-order loop in `gputwin.core.scheduler` runs them all, with
optional EASY backfill. Preemptive policies (`srtf`, `las`) rank queued and running jobs together
by the same kind of key; the scheduler's one preemptive loop runs them. Lower keys go first; the
scheduler appends a deterministic tie-break (queued before running, then arrival order).

Keys of queued jobs never change while they wait, so the queue can stay sorted; only running
jobs' keys move with time (`next_change` tells the scheduler when a running job's key will next
cross a boundary that can reorder it, so it can wake up then). Preemptive policies rank all their
running jobs every cycle, so they also give the keys and changes of many jobs at once
(`running_entries`, `soonest_change`): the same values, computed without a call per job and,
for LAS, reused until a job nears its next threshold.
"""

from __future__ import annotations

import bisect
import math
from operator import itemgetter
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Protocol, Sequence

from gputwin.core.bounds import MAX_DURATION_SECONDS, MAX_GPU_SECONDS, MAX_LAS_LEVELS
from gputwin.core.history import DEFAULT_PRIOR

if TYPE_CHECKING:
    from gputwin.core.state import JobState

Key = tuple[float, ...]
# A running job as a preemptive policy ranks it: (key, order, job, when its key next changes or
# NEVER). Orders are unique, so sorting these never compares jobs.
RunningEntry = tuple[Key, int, "JobState", float]
NEVER = float("inf")


class QueuePolicy(Protocol):
    name: str
    preemptive: bool
    timed: bool  # running jobs' keys cross boundaries by themselves (see next_change)

    def key(self, job: JobState, now: float) -> Key: ...

    def next_change(self, job: JobState, now: float) -> float | None:
        """For a running job: when its key next changes the ranking (None: never by itself)."""
        ...

    def running_entries(self, jobs: Iterable[JobState], now: float) -> list[RunningEntry]:
        """Running jobs' entries, unsorted: the keys `key` gives, and when each next changes
        (`next_change`, or a value close enough for `soonest_change` to find the exact soonest)."""
        ...

    def soonest_change(self, entries: Sequence[RunningEntry], now: float) -> float:
        """Exactly the soonest `next_change` of these entries' jobs now (NEVER if none)."""
        ...


def _soonest(entries: Sequence[RunningEntry]) -> float:
    """`soonest_change` for entries that hold exact change times."""
    return min(map(itemgetter(3), entries), default=NEVER)


def _entries(policy: QueuePolicy, jobs: Iterable[JobState], now: float) -> list[RunningEntry]:
    """`running_entries` from `key` and `next_change`, for policies with no faster way."""
    out = []
    for job in jobs:
        change = policy.next_change(job, now)
        out.append((policy.key(job, now), job.order, job, NEVER if change is None else change))
    return out


class _Static:
    """A non-preemptive policy whose key is a pure function of the job. Typed as one (`static`),
    its `key` is a direct call compiled, not the Protocol's generic one."""

    preemptive = False
    timed = False

    def __init__(self, name: str, key: Callable[[JobState], Key]) -> None:
        self.name = name
        self._key = key

    def key(self, job: JobState, now: float) -> Key:
        return self._key(job)

    def next_change(self, job: JobState, now: float) -> float | None:
        return None

    def running_entries(self, jobs: Iterable[JobState], now: float) -> list[RunningEntry]:
        return _entries(self, jobs, now)

    def soonest_change(self, entries: Sequence[RunningEntry], now: float) -> float:
        return _soonest(entries)


def fifo() -> QueuePolicy:
    return _Static("fifo", lambda j: (j.spec.submit,))


def sjf() -> QueuePolicy:
    """Shortest job first, on the oracle duration (the simulator knows it)."""
    return _Static("sjf", lambda j: (j.duration,))


def priority() -> QueuePolicy:
    """Highest declared priority first, then earliest submission."""
    return _Priority()


class _Priority(_Static):
    """priority's key as a method of its own (as `_Qssf`'s): compiled, a job queued through a
    `_Static` costs one direct call, not the lambda's generic one (SLURM's order: a forecast
    queues 10,000 jobs per sample with it)."""

    def __init__(self) -> None:
        super().__init__("priority", self._of)

    def key(self, job: JobState, now: float) -> Key:
        return (-float(job.spec.priority), job.spec.submit)

    def _of(self, job: JobState) -> Key:
        return self.key(job, 0.0)


def qssf(prior: float = DEFAULT_PRIOR) -> QueuePolicy:
    """Quasi-shortest-service-first: smallest predicted GPU time (predicted duration x GPUs).

    A share of one GPU (`gpu_milli` < 1000) counts as that fraction of a GPU: its GPU time is
    what it holds of one (x 1.0 for whole GPUs, so their keys are Helios' own, bit for bit).
    `prior` (param `qssf_prior`, seconds) is the duration assumed for a job the estimator knows
    nothing like: low puts unknown jobs ahead of learnt ones, high behind them.
    """
    return Qssf(prior)


class Qssf(_Static):
    """qssf's key as a method of its own: compiled, a job queued costs one call, not that and the
    lambda's generic one (the simulator's busiest policy: issue 17); a caller that narrows a
    policy to it (`PartitionState.enqueue`) calls the key directly, not through the Protocol."""

    def __init__(self, prior: float) -> None:
        super().__init__("qssf", self._gpu_time)
        self.prior = prior

    def key(self, job: JobState, now: float) -> Key:
        # `or_prior(job.predicted, self.prior)`, inlined (NaN, `UNKNOWN`, is the one float unequal to
        # itself): once per job queued.
        predicted = job.predicted
        return ((self.prior if predicted != predicted else predicted) * job.gpus * (job.spec.gpu_milli / 1000),)

    def _gpu_time(self, job: JobState) -> Key:
        return self.key(job, 0.0)


def static(policy: QueuePolicy) -> _Static | None:
    """`policy` as a `_Static` (its `key` then a direct call compiled), or None."""
    return policy if isinstance(policy, _Static) else None


def number_param(params: Mapping[str, object], key: str, default: float, high: float, what: str) -> float:
    """Param `key` as a number in [0, high] (or one written as a string); ValueError naming the
    param otherwise. Unset: `default`."""
    raw = params.get(key, default)
    value = math.nan
    if (isinstance(raw, (int, float)) and not isinstance(raw, bool)) or (isinstance(raw, str) and len(raw) <= 64):
        try:
            value = float(raw)
        except (ValueError, OverflowError):  # OverflowError: an int beyond any float
            pass  # reported below with every other bad value
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"{key}: expected {what} (a number >= 0), got {_shown(raw)}")
    if value > high:
        raise ValueError(f"{key}: expected {what} (a number >= 0), got {_shown(raw)}: at most {high:.0f}")
    return value


def qssf_prior(params: Mapping[str, object]) -> float:
    """The `qssf_prior` param in seconds: a number from 0 to a year (or one written as a string);
    ValueError naming the param otherwise. Unset: `DEFAULT_PRIOR`."""
    return number_param(params, "qssf_prior", DEFAULT_PRIOR, MAX_DURATION_SECONDS, "seconds")


def las_thresholds(params: Mapping[str, object]) -> tuple[float, ...]:
    """The `las_thresholds` param: attained GPU-seconds per level, a number or a comma-separated
    list of them (`"3600,36000"`), each > 0; ValueError naming the param otherwise."""
    raw = params.get("las_thresholds", "3600,36000")
    parts: list[object]
    if isinstance(raw, str):
        parts = list(raw.split(","))
    elif isinstance(raw, (list, tuple)):
        parts = list(raw)
    else:
        parts = [raw]
    if not 1 <= len(parts) <= MAX_LAS_LEVELS:
        raise ValueError(f"las_thresholds: expected 1 to {MAX_LAS_LEVELS} thresholds, got {len(parts)}")
    values = tuple(
        number_param({"las_thresholds": p}, "las_thresholds", 0.0, MAX_GPU_SECONDS, "GPU-seconds") for p in parts
    )
    if min(values) <= 0.0:
        raise ValueError("las_thresholds: every threshold must be > 0 GPU-seconds")
    return values


def _shown(raw: object) -> str:
    # Short and on one line, whatever the user wrote (repr of a 5000-digit int would raise).
    text = f"{raw!r}" if not isinstance(raw, int) or abs(raw) < 10**40 else "a number of more than 40 digits"
    return text[:40] + ("..." if len(text) > 40 else "")


# The free-form params (SchedulingPolicy spec.params) the queue policies read, each with the
# reader that checks it; `gputwin.core.plugins.PARAMS` adds the sizers' and placers' own.
QUEUE_PARAMS: dict[str, Callable[[Mapping[str, object]], object]] = {
    "qssf_prior": qssf_prior,
    "las_thresholds": las_thresholds,
}


class Srtf:
    """Shortest remaining time first, preemptive, on the oracle remaining time."""

    name = "srtf"
    preemptive = True
    timed = False

    def key(self, job: JobState, now: float) -> Key:
        return (job.remaining(now),)

    def next_change(self, job: JobState, now: float) -> float | None:
        return None  # a running job's remaining time only shrinks: it can only move ahead

    def running_entries(self, jobs: Iterable[JobState], now: float) -> list[RunningEntry]:
        # `remaining` inlined (the jobs run): this runs for every running job in every cycle.
        out: list[RunningEntry] = []
        for job in jobs:
            left = job.work_left - (now - job.seg_start) / job.slowdown
            out.append(((left if left > 0.0 else 0.0,), job.order, job, NEVER))
        return out

    def soonest_change(self, entries: Sequence[RunningEntry], now: float) -> float:
        return NEVER


class Las:
    """Least attained service (Tiresias' discretised 2D-LAS), preemptive.

    A job's level is the number of thresholds its attained GPU-seconds have passed; lower levels
    go first and each level is first-come first-served. Every cycle ranks running and queued jobs
    together by (level, submit), so a running job yields when it is demoted past a waiting job's
    level, and also to an earlier-submitted waiting job of its own level that could not start
    before (one a later job overtook, e.g. one too big at the time).
    """

    name = "las"
    preemptive = True
    timed = True

    def __init__(self, thresholds: Sequence[float] = (3600.0, 36000.0)) -> None:
        self.thresholds = tuple(sorted(thresholds))
        # Run segment (job order) -> (its entry, valid from, valid until before). The whole entry
        # (key, order, job, estimated next change) is kept, so a cycle reuses it as it is.
        self._cache: dict[int, tuple[RunningEntry, float, float]] = {}

    def level(self, attained: float) -> int:
        return bisect.bisect_right(self.thresholds, attained)  # thresholds passed (>=); hot: every cycle

    def key(self, job: JobState, now: float) -> Key:
        return (float(self.level(job.attained_at(now))), job.spec.submit)

    def next_change(self, job: JobState, now: float) -> float | None:
        attained = job.attained_at(now)
        for t in self.thresholds:
            if t > attained:
                return now + (t - attained) / job.gpus  # attained counts wall-clock GPU-seconds
        return None

    def running_entries(self, jobs: Iterable[JobState], now: float) -> list[RunningEntry]:
        # Every cycle ranks every running job, but a running job's level only changes when its
        # attained service crosses the next threshold, at about seg_start + (threshold -
        # attained) / gpus: until shortly before then (`_margin`, far above float rounding) its
        # key is the one computed last time. The change time in an entry is that estimate;
        # `soonest_change` turns the estimates into the exact `next_change` of the soonest job.
        thresholds, top, cache = self.thresholds, len(self.thresholds), self._cache
        out: list[RunningEntry] = []
        for job in jobs:
            order = job.order  # unique to this run segment of this job
            cached = cache.get(order)
            if cached is not None and cached[1] <= now < cached[2]:  # a clock may step back
                out.append(cached[0])
                continue
            attained = job.attained + (now - job.seg_start) * job.gpus  # `attained_at`: it runs
            level = bisect.bisect_right(thresholds, attained)
            key = (float(level), job.spec.submit)
            crossing = job.seg_start + (thresholds[level] - job.attained) / job.gpus if level < top else NEVER
            entry: RunningEntry = (key, order, job, crossing)
            cache[order] = (entry, now, crossing - self._margin(crossing, now))
            out.append(entry)
        if len(cache) > 2 * len(out) + 64:  # ended segments: keep the cache as small as the running set
            self._cache = {entry[1]: cache[entry[1]] for entry in out}
        return out

    def soonest_change(self, entries: Sequence[RunningEntry], now: float) -> float:
        # Every estimate is within `_margin` of its job's exact change time, so the soonest exact
        # one is among the jobs whose estimate is within two margins of the smallest estimate.
        estimate = _soonest(entries)
        if estimate == NEVER:
            return NEVER
        bound = estimate + 2.0 * self._margin(estimate, now)
        soonest = NEVER
        for _, _, job, crossing in entries:
            if crossing <= bound:
                change = self.next_change(job, now)
                if change is not None and change < soonest:
                    soonest = change
        return soonest

    def _margin(self, when: float, now: float) -> float:
        """A bound, a million times over, on how far float rounding can move a threshold crossing
        computed at `now` (rounding errors are ~1e-16 of the magnitudes involved)."""
        if when == NEVER:
            return 0.0
        return 1e-9 * (abs(when) + abs(now) + self.thresholds[-1] + 1.0)


QUEUE_POLICIES: dict[str, Callable[..., QueuePolicy]] = {
    "fifo": fifo,
    "sjf": sjf,
    "priority": priority,
    "qssf": qssf,
    "srtf": Srtf,
    "las": Las,
}


def make_policy(name: str, params: dict[str, object] | None = None) -> QueuePolicy:
    """Build a queue policy by registry name; unknown names list the known ones."""
    try:
        factory = QUEUE_POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown queue policy {name!r}; known: {', '.join(QUEUE_POLICIES)}") from None
    if name == "las" and params and "las_thresholds" in params:
        return Las(las_thresholds(params))
    if name == "qssf" and params:
        return qssf(qssf_prior(params))
    return factory()

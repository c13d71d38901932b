"""Queue policies: the order in which a partition's jobs get GPUs, as small plugins.

A policy is a sort key plus a flag. Non-preemptive policies (`fifo`, `sjf`, `priority`, `qssf`)
differ only in `key`; the one strict-order loop in `gputwin.core.scheduler` runs them all, with
optional EASY backfill. Preemptive policies (`srtf`, `las`) rank queued and running jobs together
by the same kind of key; the scheduler's one preemptive loop runs them. Lower keys go first; the
scheduler appends a deterministic tie-break (queued before running, then arrival order).

Keys of queued jobs never change while they wait, so the queue can stay sorted; only running
jobs' keys move with time (`next_change` tells the scheduler when a running job's key will next
cross a boundary that can reorder it, so it can wake up then).
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

if TYPE_CHECKING:
    from gputwin.core.state import JobState

Key = tuple[float, ...]


class QueuePolicy(Protocol):
    name: str
    preemptive: bool
    timed: bool  # running jobs' keys cross boundaries by themselves (see next_change)

    def key(self, job: JobState, now: float) -> Key: ...

    def next_change(self, job: JobState, now: float) -> float | None:
        """For a running job: when its key next changes the ranking (None: never by itself)."""
        ...


class _Static:
    """A non-preemptive policy whose key is a pure function of the job."""

    preemptive = False
    timed = False

    def __init__(self, name: str, key: Callable[[JobState], Key]) -> None:
        self.name = name
        self._key = key

    def key(self, job: JobState, now: float) -> Key:
        return self._key(job)

    def next_change(self, job: JobState, now: float) -> float | None:
        return None


def fifo() -> QueuePolicy:
    return _Static("fifo", lambda j: (j.spec.submit,))


def sjf() -> QueuePolicy:
    """Shortest job first, on the oracle duration (the simulator knows it)."""
    return _Static("sjf", lambda j: (j.duration,))


def priority() -> QueuePolicy:
    """Highest declared priority first, then earliest submission."""
    return _Static("priority", lambda j: (-float(j.spec.priority), j.spec.submit))


def qssf() -> QueuePolicy:
    """Quasi-shortest-service-first: smallest predicted GPU time (predicted duration x GPUs)."""
    return _Static("qssf", lambda j: (j.predicted * j.gpus,))


class Srtf:
    """Shortest remaining time first, preemptive, on the oracle remaining time."""

    name = "srtf"
    preemptive = True
    timed = False

    def key(self, job: JobState, now: float) -> Key:
        return (job.remaining(now),)

    def next_change(self, job: JobState, now: float) -> float | None:
        return None  # a running job's remaining time only shrinks: it can only move ahead


class Las:
    """Least attained service (Tiresias' discretised 2D-LAS), preemptive.

    A job's level is the number of thresholds its attained GPU-seconds have passed; lower levels
    go first and each level is first-come first-served. Discrete levels keep preemption rare:
    a running job only yields when it is demoted past a waiting job's level.
    """

    name = "las"
    preemptive = True
    timed = True

    def __init__(self, thresholds: Sequence[float] = (3600.0, 36000.0)) -> None:
        self.thresholds = tuple(sorted(thresholds))

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
        raw = params["las_thresholds"]
        values = raw.split(",") if isinstance(raw, str) else list(raw)  # type: ignore[call-overload]
        return Las(tuple(float(v) for v in values))
    return factory()

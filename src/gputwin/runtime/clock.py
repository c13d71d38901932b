"""One loop, two clocks: `drive` steps a `Runtime` from one instant to the next, and the clock says
what "waiting until then" means - on a `VirtualClock` it is a jump (`gputwin simulate`, the
emulator's `gputwin run`), on a `WallClock` it is a sleep (a live replay). As SimPy's
`RealtimeEnvironment` overrides only `step()`, the clocks differ only in `advance_to`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from typing import Protocol

from gputwin.core.decision import EMPTY
from gputwin.core.model import JobSpec
from gputwin.runtime.loop import Runtime


class Clock(Protocol):
    def advance_to(self, when: float) -> float:
        """Wait until `when` (or later); the time it is then."""
        ...


class VirtualClock:
    """Time moves only when asked, and at once."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def advance_to(self, when: float) -> float:
        if when > self.now:  # not max(): this runs once per simulated instant
            self.now = when
        return self.now


class WallClock:
    """Epoch seconds; `advance_to` sleeps until then (`offset` shifts a trace's times to now)."""

    def __init__(
        self,
        offset: float = 0.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.offset, self._clock, self._sleep = offset, clock, sleep

    @property
    def now(self) -> float:
        return self._clock() - self.offset

    def advance_to(self, when: float) -> float:
        while (left := when - self.now) > 0:
            self._sleep(left)
        return self.now


class Steps(Protocol):
    """Something a clock can drive: it says when it next has work, and does the work of an instant."""

    def next_event(self) -> float | None: ...

    def step(self, now: float) -> None: ...


def run_steps(target: Steps, clock: Clock, until: float = float("inf")) -> int:
    """The one loop: wait for the target's next event, step there; until it has none left (or the
    next is after `until`). The number of steps taken."""
    steps = 0
    if isinstance(target, Replay) and isinstance(clock, VirtualClock):  # a replay: compiled, direct calls
        while (when := target.next_event()) is not None and when <= until:
            if when > clock.now:  # `clock.advance_to(when)`, inlined: once per instant
                clock.now = when
            target.step(clock.now)
            steps += 1
        return steps
    while (when := target.next_event()) is not None and when <= until:
        target.step(clock.advance_to(when))
        steps += 1
    return steps


def run_until_settled(replay: Replay, clock: VirtualClock, until: float, starts: Sized, rejects: Sized,
                      count: int) -> None:  # fmt: skip
    """`run_steps` until `starts` and `rejects` hold `count` entries between them (a forecast's
    replay, once every pending job has started or been rejected: `gputwin.twin.seed`), here so
    that the loop is compiled, its calls direct (~10,000 steps a replay)."""
    while len(starts) + len(rejects) < count:
        when = replay.next_event()
        if when is None or when > until:
            return
        replay.step(clock.advance_to(when))


class Replay:
    """A trace's jobs (sorted by submit time) arriving into a runtime as their times come; `after`
    (if given) is called at the end of each instant, with the state the instant leaves. `jobs` may
    be an iterator (a generator, a streaming reader): it is read one job ahead of the clock, so a
    long trace need not be resident."""

    def __init__(
        self,
        runtime: Runtime,
        jobs: Iterable[JobSpec],
        progress: Callable[[int], None] | None = None,
        after: Callable[[float], None] | None = None,
    ) -> None:
        self.runtime, self.progress, self.after = runtime, progress, after
        self.submitted = 0
        self._stream: Iterator[JobSpec] | None = None
        self._head: JobSpec | None = None  # a stream's next job, not yet submitted
        if isinstance(jobs, Sequence):
            self.jobs: Sequence[JobSpec] = jobs
        else:
            self.jobs, self._stream = (), iter(jobs)
            self._head = next(self._stream, None)
        self._count = len(self.jobs)
        self._listed = jobs if isinstance(jobs, list) else None  # read directly compiled (`next_event`)

    def next_event(self) -> float | None:
        # `runtime.next_event()`, inlined: this and `step` run once per instant of a replay. The
        # times are compared as plain floats (`found`: there is one), not as `float | None` (boxed).
        runtime = self.runtime
        end = runtime.runs.next_event() if (virtual := runtime.virtual) is None else virtual.next_event()
        found, when = end is not None, 0.0 if end is None else end
        wakes = runtime.wakes
        if wakes and (not found or wakes[0][0] < when):
            found, when = True, wakes[0][0]
        if self.submitted < self._count:
            listed = self._listed
            job: JobSpec = self.jobs[self.submitted] if listed is None else listed[self.submitted]
            if not found or job.submit < when:
                return job.submit
        elif (head := self._head) is not None and (not found or head.submit < when):
            return head.submit
        return when if found else None

    def step(self, now: float) -> None:
        runtime = self.runtime
        runtime.due(now)
        if self._stream is None:
            self.submitted = i = runtime.submit_arrived(self.jobs, self.submitted, now)
        else:
            i = self._submit_streamed(now)
        decision = runtime.scheduler.run_cycle(now)  # `runtime.cycle(now)`, inlined
        if decision is not EMPTY:
            runtime.apply(decision, now)
        if self.after is not None:
            self.after(now)
        if self.progress is not None:
            self.progress(i)

    def _submit_streamed(self, now: float) -> int:
        """`Runtime.submit_arrived` for a stream: one batch per instant, read as it arrives."""
        batch: list[JobSpec] = []
        head, stream = self._head, self._stream
        assert stream is not None
        while head is not None and head.submit <= now:
            batch.append(head)
            head = next(stream, None)
        self._head = head
        self.runtime.submit_arrived(batch, 0, now)
        self.submitted += len(batch)
        return self.submitted


def drive(
    runtime: Runtime,
    jobs: Iterable[JobSpec],
    clock: Clock,
    progress: Callable[[int], None] | None = None,
    until: float = float("inf"),
) -> int:
    """Submit `jobs` (sorted by submit time) as their times come and step the runtime at each
    instant something happens, until nothing is left (or the next thing is after `until`); the
    number of jobs submitted."""
    replay = Replay(runtime, jobs, progress)
    run_steps(replay, clock, until)
    return replay.submitted


__all__ = ["Clock", "Replay", "Steps", "VirtualClock", "WallClock", "drive", "run_steps"]

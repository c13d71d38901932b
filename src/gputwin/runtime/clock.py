"""One loop, two clocks: `drive` steps a `Runtime` from one instant to the next, and the clock says
what "waiting until then" means - on a `VirtualClock` it is a jump (`gputwin simulate`, the
emulator's `gputwin run`), on a `WallClock` it is a sleep (a live replay). As SimPy's
`RealtimeEnvironment` overrides only `step()`, the clocks differ only in `advance_to`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol

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
        self.now = max(self.now, when)
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


def drive(
    runtime: Runtime,
    jobs: Sequence[JobSpec],
    clock: Clock,
    progress: Callable[[int], None] | None = None,
    until: float = float("inf"),
) -> int:
    """Submit `jobs` (sorted by submit time) as their times come and step the runtime at each
    instant something happens, until nothing is left to happen (or the next thing is after
    `until`); the number of jobs submitted."""
    due, submit, cycle, next_event = runtime.due, runtime.submit, runtime.cycle, runtime.next_event
    n, i = len(jobs), 0
    while True:
        when = next_event()
        if i < n and (when is None or jobs[i].submit < when):
            when = jobs[i].submit
        if when is None or when > until:
            return i
        now = clock.advance_to(when)
        due(now)
        while i < n and jobs[i].submit <= now:
            submit(jobs[i], now)
            i += 1
        cycle(now)
        if progress is not None:
            progress(i)


__all__ = ["Clock", "VirtualClock", "WallClock", "drive"]

"""A runtime listener for tests that watch a replay (`gputwin.runtime.loop.Transitions`): it tells
every transition on to the simulator's own Recorder, so the run's outcome is the usual one, and a
test overrides the transitions it checks. Tests listen rather than wrap Scheduler methods: the
compiled core's methods cannot be replaced (and the runtime calls them directly), so a listening
test runs the same on the pure and the compiled core (.ci/run runs some on the wheel)."""

from __future__ import annotations

from collections.abc import Sequence

from gputwin.core.decision import Preempt, Reject, Resize, Start
from gputwin.core.model import JobSpec
from gputwin.core.state import JobState
from gputwin.sim.engine import Recorder


class Forwarding:
    """Tells `inner` everything; a virtual run that fails to start or ends unasked fails the test."""

    def __init__(self, inner: Recorder) -> None:
        self.inner = inner

    def submitted(self, specs: Sequence[JobSpec], now: float) -> None:
        self.inner.submitted(specs, now)

    def started(self, starts: Sequence[Start], now: float) -> None:
        self.inner.started(starts, now)

    def preempted(self, preempt: Preempt, now: float) -> None:
        self.inner.preempted(preempt, now)

    def completed(self, ends: Sequence[tuple[JobState, float]], now: float) -> None:
        self.inner.completed(ends, now)

    def start_failed(self, start: Start, error: Exception, now: float) -> None:
        raise AssertionError(f"a virtual run failed to start: {start}")

    def ended_elsewhere(self, job_id: str, end: float, now: float) -> None:
        raise AssertionError(f"a virtual run ended that the scheduler did not start: {job_id}")

    def rejected(self, reject: Reject, now: float) -> None:
        self.inner.rejected(reject, now)

    def resized(self, resize: Resize, now: float) -> None:
        self.inner.resized(resize, now)

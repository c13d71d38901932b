"""What one replay saw, as a runtime listener: each job's first start, latest known end and
rejection (a forecast's replays and `gputwin.twin.horizon` read it; `gputwin.twin.seed` drives them).

Compiled with the runtime (setup.py): a forecast's runtime tells it of every start of every
sample (10,000 at issue 15's size), which interpreted was ~2 % of a replay.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputwin.core.decision import Preempt, Reject, Resize, Start
from gputwin.core.model import JobSpec
from gputwin.core.state import JobState
from gputwin.runtime.loop import Quiet


class Watch(Quiet):
    """What one replay saw: each job's first start and latest known end, and rejections.

    A `Transitions` listener written out in full. A `Quiet` (which records nothing): compiled, the
    runtime tells it directly, not through `_Tell`'s generic calls (a forecast: every start)."""

    def __init__(self) -> None:
        self.starts: dict[str, float] = {}
        self.ends: dict[str, float] = {}
        self.rejects: dict[str, str] = {}

    def started(self, starts: Sequence[Start], now: float) -> None:
        for start in starts:
            self.starts.setdefault(start.job_id, now)
            self.ends[start.job_id] = now + start.run_seconds

    def completed(self, ends: Sequence[tuple[JobState, float]], now: float) -> None:
        for state, end in ends:
            self.ends[state.job_id] = end

    def rejected(self, reject: Reject, now: float) -> None:
        self.rejects[reject.job_id] = reject.reason

    def times(self, job_ids: Sequence[str], lag: float) -> tuple[list[float], list[float]]:
        """Per job of `job_ids`, in order: its first start plus `lag`, and its latest end (inf:
        none). A forecast's sample, read here compiled (interpreted, ~1 % of a sample)."""
        starts, ends, inf = self.starts, self.ends, float("inf")
        return [starts.get(i, inf) + lag for i in job_ids], [ends.get(i, inf) for i in job_ids]

    def submitted(self, specs: Sequence[JobSpec], now: float) -> None: ...
    def start_failed(self, start: Start, error: Exception, now: float) -> None: ...
    def preempted(self, preempt: Preempt, now: float) -> None: ...
    def ended_elsewhere(self, job_id: str, end: float, now: float) -> None: ...
    def resized(self, resize: Resize, now: float) -> None: ...


class StartsWatch(Watch):
    """A `Watch` that takes each job's end from its start (start plus run) and ignores completions,
    which report the same sum (`VirtualRuns`) as long as nothing preempts: a replay made
    `starts_only` needs no completion told."""

    def completed(self, ends: Sequence[tuple[JobState, float]], now: float) -> None: ...


__all__ = ["StartsWatch", "Watch"]

"""Runs on a virtual clock: a job ends `run_seconds` (overhead included) after it started.

The simulator's event heap, as a backend: `gputwin simulate`, the emulator (`gputwin run`) and an
operator with the simulated backend all run jobs here, so one trace gives one result in each.
Ends at the same instant come out in the order their runs started (then adopted); a preempted
run's end stays in the heap and is dropped when it surfaces (cheaper than removing it).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from mypy_extensions import mypyc_attr

from gputwin.core.decision import Start
from gputwin.runtime.capabilities import StartRefused


@mypyc_attr(allow_interpreted_subclasses=True)  # operator.backends.SimBackend extends it (compiled build)
class VirtualRuns:
    """Implements `RunsJobs` and `AdoptsRuns`. `latest` bounds when a run may end (a later one is
    refused: no status could show its end), `latest_label` is how a refusal names that time."""

    def __init__(self, latest: float = float("inf"), latest_label: str = "") -> None:
        self.latest, self.latest_label = latest, latest_label or f"{latest:.0f} s since the epoch"
        self._heap: list[tuple[float, int, str]] = []  # (end, sequence, job id)
        self._live: dict[str, int] = {}  # job id -> sequence of its current run
        self._seq = 0
        self.popped = 0  # ends taken off the heap, stale ones included (the simulator's event count)

    def start_all(
        self, starts: Sequence[Start], node_names: Sequence[str], now: float
    ) -> list[tuple[Start, Exception]]:
        heap, live, seq, latest = self._heap, self._live, self._seq, self.latest
        refused: list[tuple[Start, Exception]] = []
        for start in starts:
            end = now + start.run_seconds
            if not end <= latest:  # also refuses NaN
                refused.append((start, _too_late(start, self.latest_label)))
                continue
            seq += 1
            live[start.job_id] = seq
            heapq.heappush(heap, (end, seq, start.job_id))
        self._seq = seq
        return refused

    def adopt(self, start: Start, node_names: Sequence[str], since: float) -> None:
        self._seq += 1
        self._live[start.job_id] = self._seq
        heapq.heappush(self._heap, (since + start.run_seconds, self._seq, start.job_id))

    def stop(self, job_id: str, grace: float | None = None) -> None:
        self._live.pop(job_id, None)  # a virtual run stops at once: no grace to give

    def ended(self, now: float) -> list[tuple[str, float]]:
        heap, live, out = self._heap, self._live, []
        popped = 0
        while heap and heap[0][0] <= now:
            end, seq, job_id = heapq.heappop(heap)
            popped += 1
            if live.get(job_id) == seq:
                del live[job_id]
                out.append((job_id, end))
        self.popped += popped
        return out

    def next_event(self) -> float | None:
        heap, live = self._heap, self._live
        while heap and live.get(heap[0][2]) != heap[0][1]:
            heapq.heappop(heap)  # a stopped run's end: drop it so it is never the next event
            self.popped += 1
        return heap[0][0] if heap else None

    def running(self) -> dict[str, float]:
        """Job id -> when its run ends (for tests and diagnostics)."""
        return {job_id: end for end, seq, job_id in self._heap if self._live.get(job_id) == seq}


def _too_late(start: Start, latest: str) -> StartRefused:
    return StartRefused(
        f"spec.durationSeconds: a run of {start.run_seconds:.4g} s would end after {latest}, the "
        "latest time a status can show", reason="InvalidDuration"
    )  # fmt: skip

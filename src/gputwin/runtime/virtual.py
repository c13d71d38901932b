"""Runs on a virtual clock: a job ends `run_seconds` (overhead included) after it started.

The simulator's event heap, as a backend: `gputwin simulate`, the emulator (`gputwin run`) and an
operator with the simulated backend all run jobs here, so one trace gives one result in each.
Ends at the same instant come out in the order their runs started (then adopted); a preempted
run's end stays in the heap and is dropped when it surfaces (cheaper than removing it). The heap
holds each distinct end time once, as a bare float, and a dict maps it to its runs: a float
compares in a fraction of the instructions an (end, sequence, id) tuple takes, and a replay pushes
and pops every run's end through ~log2(running) comparisons (issue 13: no slower than before).
"""

from __future__ import annotations

from collections.abc import Sequence
from heapq import heappop as _heappop
from heapq import heappush as _heappush
from typing import Final

from mypy_extensions import mypyc_attr

from gputwin.core.decision import Start
from gputwin.runtime.capabilities import StartRefused

# Final: compiled, a static read per call (`heapq.heappush` is a module attribute look-up, a name
# imported from it one in this module's globals).
heappop: Final = _heappop
heappush: Final = _heappush


@mypyc_attr(allow_interpreted_subclasses=True)  # operator.backends.SimBackend extends it (compiled build)
class VirtualRuns:
    """Implements `RunsJobs` and `AdoptsRuns`. `latest` bounds when a run may end (a later one is
    refused: no status could show its end), `latest_label` is how a refusal names that time."""

    def __init__(self, latest: float = float("inf"), latest_label: str = "") -> None:
        self.latest, self.latest_label = latest, latest_label or f"{latest:.0f} s since the epoch"
        self._heap: list[float] = []  # distinct end times
        self._at: dict[float, list[tuple[int, str]]] = {}  # end -> (sequence, job id) of its runs, in start order
        self._live: dict[str, int] = {}  # job id -> sequence of its current run
        self._seq = 0
        self.popped = 0  # ends taken off the heap, stale ones included (the simulator's event count)
        # How many runs in the heap are no longer live (stopped, or their job started again): while
        # none is, `ended` and `next_event` skip checking each (a replay without preemptions: one
        # string look-up a job and a float and a string one an instant). A count, not a flag, so a
        # replay gets the fast paths back once the stale runs' ends have passed.
        self._stale = 0

    def start_all(
        self, starts: Sequence[Start], node_names: Sequence[str], now: float
    ) -> list[tuple[Start, Exception]]:
        live, seq, latest = self._live, self._seq, self.latest
        refused: list[tuple[Start, Exception]] = []
        # A tuple (a Decision's starts) in a typed local: compiled, indexed directly, not a generic iterator.
        listed: tuple[Start, ...] = starts if isinstance(starts, tuple) else tuple(starts)
        for start in listed:
            end = now + start.run_seconds
            if not end <= latest:  # also refuses NaN
                refused.append((start, _too_late(start, self.latest_label)))
                continue
            seq += 1
            count = len(live)
            live[start.job_id] = seq
            if len(live) == count:  # it was live already: its earlier run's end is stale now
                self._stale += 1
            self._push(end, seq, start.job_id)
        self._seq = seq
        return refused

    def adopt(self, start: Start, node_names: Sequence[str], since: float) -> None:
        self.adopt_run(start.job_id, since, start.run_seconds)

    def adopt_run(self, job_id: str, since: float, run_seconds: float) -> None:
        """`adopt` without a `Start` (a forecast adopts every running job of every sample: the
        NamedTuple's interpreted `__new__` was a third of that)."""
        self._seq += 1
        live, count = self._live, len(self._live)
        live[job_id] = self._seq
        if len(live) == count:  # it was live already (as in `start_all`)
            self._stale += 1
        self._push(since + run_seconds, self._seq, job_id)

    def _push(self, end: float, seq: int, job_id: str) -> None:
        runs = self._at.get(end)
        if runs is None:
            self._at[end] = [(seq, job_id)]
            heappush(self._heap, end)
        else:  # sequences only grow: the list stays in start order
            runs.append((seq, job_id))

    def stop(self, job_id: str, grace: float | None = None) -> None:
        if self._live.pop(job_id, None) is not None:  # a virtual run stops at once: no grace to give
            self._stale += 1  # its end stays in the heap

    def ended(self, now: float) -> list[tuple[str, float]]:
        heap, at, live = self._heap, self._at, self._live
        out: list[tuple[str, float]] = []
        while heap and heap[0] <= now:
            end = heappop(heap)
            runs = at.pop(end)  # (not `at[end]` then `del`: hashing the float twice costs more, compiled)
            self.popped += len(runs)
            if not self._stale:  # every run in the heap is live
                for _, job_id in runs:
                    del live[job_id]
                    out.append((job_id, end))
                continue
            for seq, job_id in runs:
                if live.get(job_id) == seq:
                    del live[job_id]
                    out.append((job_id, end))
                else:
                    self._stale -= 1
        return out

    def next_event(self) -> float | None:
        heap, at, live = self._heap, self._at, self._live
        if not self._stale:  # the earliest end is a live run's
            return heap[0] if heap else None
        while heap:
            runs = at[heap[0]]
            for seq, job_id in runs:
                if live.get(job_id) == seq:
                    return heap[0]
            # Only stopped runs end then: drop the time so it is never the next event.
            del at[heappop(heap)]
            self.popped += len(runs)
            self._stale -= len(runs)
        return None

    def running(self) -> dict[str, float]:
        """Job id -> when its run ends (for tests and diagnostics)."""
        live = self._live
        return {job_id: end for end, runs in self._at.items() for seq, job_id in runs if live.get(job_id) == seq}


def _too_late(start: Start, latest: str) -> StartRefused:
    return StartRefused(
        f"spec.durationSeconds: a run of {start.run_seconds:.4g} s would end after {latest}, the "
        "latest time a status can show", reason="InvalidDuration"
    )  # fmt: skip

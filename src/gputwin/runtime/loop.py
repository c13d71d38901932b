"""One runtime for simulation and live clusters: a scheduler, a backend that runs its jobs, and the
wake-ups the policies asked for, stepped at times the driver chooses.

At each instant a driver (`gputwin.runtime.clock.drive`, the emulator, the operator) calls

    runtime.due(now)             # runs that ended by now complete, wake-ups due by now fire
    runtime.submit(spec, now)    # each arrival, in order
    runtime.cycle(now)           # one scheduling cycle, carried out

and then waits until `runtime.next_event()` (or the next arrival). `apply` is the one place a
Decision is carried out: the backend stops and starts runs, the scheduler takes back the GPUs of
a start the backend refused, and every transition is told to a `Transitions` listener - the
simulator's metrics, the controller's statuses and events. The runtime reads no clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Final, Protocol

from mypy_extensions import mypyc_attr

from gputwin.core.decision import EMPTY, Decision, Preempt, Reject, Resize, Start
from gputwin.core.model import JobSpec
from gputwin.core.scheduler import Scheduler
from gputwin.core.state import JobState, Phase
from gputwin.runtime.capabilities import AdoptsRuns, RunsJobs
from gputwin.runtime.virtual import VirtualRuns


class Transitions(Protocol):
    """What happened to jobs, as the runtime carried decisions out (a Protocol, not a base class:
    the simulator's listener is compiled by mypyc, which cannot subclass an interpreted class)."""

    def submitted(self, specs: Sequence[JobSpec], now: float) -> None:
        """`specs` were handed to the scheduler, in this order (it keeps each in `jobs` unless it
        rejected it). Told in batches, as `started` and `completed` are: a replay's listener is
        called once per instant, not once per job (issue 13: no slower than the engine before)."""
        ...

    def started(self, starts: Sequence[Start], now: float) -> None:
        """The backend runs each of `starts` now."""
        ...

    def start_failed(self, start: Start, error: Exception, now: float) -> None:
        """The backend could not start it; the scheduler has its GPUs back and it is queued again."""
        ...

    def preempted(self, preempt: Preempt, now: float) -> None:
        """Its run was stopped; it is queued again."""
        ...

    def completed(self, ends: Sequence[tuple[JobState, float]], now: float) -> None:
        """Each (state, end): its run ended at `end` (at or before `now`) and it is done."""
        ...

    def ended_elsewhere(self, job_id: str, end: float, now: float) -> None:
        """A run ended that the scheduler does not have running (it lost track of it)."""
        ...

    def rejected(self, reject: Reject, now: float) -> None:
        """The scheduler refused the job for good."""
        ...

    def resized(self, resize: Resize, now: float) -> None:
        """GPU sizing gave it another GPU count than it asked for."""
        ...


@mypyc_attr(allow_interpreted_subclasses=True)  # listeners extend it (the compiled build, setup.py)
class Quiet:
    """A listener that records nothing."""

    def submitted(self, specs: Sequence[JobSpec], now: float) -> None: ...
    def started(self, starts: Sequence[Start], now: float) -> None: ...
    def start_failed(self, start: Start, error: Exception, now: float) -> None: ...
    def preempted(self, preempt: Preempt, now: float) -> None: ...
    def completed(self, ends: Sequence[tuple[JobState, float]], now: float) -> None: ...
    def ended_elsewhere(self, job_id: str, end: float, now: float) -> None: ...
    def rejected(self, reject: Reject, now: float) -> None: ...
    def resized(self, resize: Resize, now: float) -> None: ...


QUIET: Transitions = Quiet()
_RUNNING: Final = Phase.RUNNING  # an Enum member read once (each read is a slow class attribute, interpreted)


class _Tell(Quiet):
    """Tells a listener that is not a `Quiet` (a Protocol implementation of any class): the runtime
    calls every listener through a `Quiet`, which compiled is a direct call (`Runtime.listener`)."""

    def __init__(self, listener: Transitions) -> None:
        self.listener = listener

    def submitted(self, specs: Sequence[JobSpec], now: float) -> None:
        self.listener.submitted(specs, now)

    def started(self, starts: Sequence[Start], now: float) -> None:
        self.listener.started(starts, now)

    def start_failed(self, start: Start, error: Exception, now: float) -> None:
        self.listener.start_failed(start, error, now)

    def preempted(self, preempt: Preempt, now: float) -> None:
        self.listener.preempted(preempt, now)

    def completed(self, ends: Sequence[tuple[JobState, float]], now: float) -> None:
        self.listener.completed(ends, now)

    def ended_elsewhere(self, job_id: str, end: float, now: float) -> None:
        self.listener.ended_elsewhere(job_id, end, now)

    def rejected(self, reject: Reject, now: float) -> None:
        self.listener.rejected(reject, now)

    def resized(self, resize: Resize, now: float) -> None:
        self.listener.resized(resize, now)


class Runtime:
    """`scheduler` decides, `runs` carries out, `listener` hears every transition."""

    def __init__(self, scheduler: Scheduler, runs: RunsJobs, listener: Transitions = QUIET) -> None:
        self.scheduler, self.runs = scheduler, runs
        # The simulator's backend, typed (None for any other): compiled, the calls each instant
        # makes through it (`ended`, `start_all`, `next_event`) are direct, not generic ones.
        self.virtual: VirtualRuns | None = runs if isinstance(runs, VirtualRuns) else None
        self._listener = listener
        self._tell: Quiet = listener if isinstance(listener, Quiet) else _Tell(listener)
        self.wakes: list[tuple[float, int, str]] = []  # a heap of (when, sequence, partition); read-only outside
        self._earliest: dict[str, float] = {}  # partition -> its earliest wake-up not yet fired
        self._seq = 0
        self.wakes_fired = 0

    @property
    def listener(self) -> Transitions:
        return self._listener

    @listener.setter
    def listener(self, listener: Transitions) -> None:
        # Told through a `Quiet` (the simulator's Recorder is one; any other is wrapped in `_Tell`):
        # compiled, each call is a direct one, not a generic call with its arguments boxed.
        self._listener = listener
        self._tell = listener if isinstance(listener, Quiet) else _Tell(listener)

    # --- one instant ---------------------------------------------------------------------------

    def due(self, now: float) -> None:
        """Complete the runs that ended by `now`, then fire the wake-ups due by then."""
        virtual = self.virtual
        ended = self.runs.ended(now) if virtual is None else virtual.ended(now)
        if ended:
            # The scheduler, not its bound method: compiled, a typed local's method is a direct C
            # call (a bound method goes through the generic call, its arguments boxed and parsed).
            scheduler, listener = self.scheduler, self._tell
            jobs = scheduler.jobs
            running = _RUNNING
            done: list[tuple[JobState, float]] = []
            for job_id, end in ended:
                state = jobs.get(job_id)
                if state is not None and state.phase is running:
                    done.append((scheduler.complete(job_id, end), end))
                else:  # told in the order the runs ended: the batch so far goes first
                    if done:
                        listener.completed(done, now)
                        done = []
                    listener.ended_elsewhere(job_id, end, now)
            if done:
                listener.completed(done, now)
        wakes = self.wakes
        while wakes and wakes[0][0] <= now:
            when, _, partition = heapq.heappop(wakes)
            self.wakes_fired += 1
            if self._earliest.get(partition) == when:
                del self._earliest[partition]
            self.scheduler.wake(partition)

    def submit(self, spec: JobSpec, now: float) -> None:
        """Queue one job (waits count from `spec.submit`, also when handed over again later)."""
        decision = self.scheduler.submit(spec, min(now, spec.submit))
        self._tell.submitted((spec,), now)
        if decision is not EMPTY:  # most submits only queue the job
            self.apply(decision, now)

    def submit_arrived(self, jobs: Sequence[JobSpec], first: int, now: float) -> int:
        """`submit` each of `jobs[first:]` (sorted by submit time) that arrived by `now`; the index
        of the first one left. A replay's arrivals come here, a batch per instant: the per-job
        lookups are made once per batch (the simulator submits every job of a trace this way), and
        the listener hears of the submits in one batch, cut before any decision a submit returned."""
        scheduler, n = self.scheduler, len(jobs)  # (not its bound method: see `due`)
        i = told = first
        listed = jobs if isinstance(jobs, list) else None  # a list's items are read directly compiled
        while i < n:
            spec: JobSpec = jobs[i] if listed is None else listed[i]
            if spec.submit > now:  # (a plain float compare compiled: not in the loop's condition, boxed)
                break
            decision = scheduler.submit(spec, spec.submit)  # = min(now, spec.submit), as in `submit`
            i += 1
            if decision is not EMPTY:
                self._tell.submitted(jobs[told:i], now)
                told = i
                self.apply(decision, now)
        if i > told:
            self._tell.submitted(jobs[told:i], now)
        return i

    def submit_all(self, jobs: Sequence[JobSpec], durations: Sequence[float], now: float,
                   ranks: dict[str, int] | None = None) -> None:  # fmt: skip
        """`submit_arrived(jobs, 0, now)` for jobs that all arrived by `now` (any order), with run
        times `durations` instead of their specs' (`Scheduler.submit_all`: one sorted insert per
        queue; `ranks` a hint of their order there, as it says). The listener hears the same calls
        in the same order, once every job is queued."""
        told = 0
        for i, decision in self.scheduler.submit_all(jobs, durations, ranks):
            self._tell.submitted(jobs[told:i + 1], now)
            told = i + 1
            self.apply(decision, now)
        if told < len(jobs):
            self._tell.submitted(jobs[told:], now)

    def adopt(
        self, spec: JobSpec, slots: tuple[tuple[int, int], ...], since: float, run_seconds: float | None = None
    ) -> JobState:
        """A job already running on `slots` since `since` (recorded before a restart, or seen in a
        snapshot): the scheduler takes its GPUs back, and a backend that can take a run over
        (`AdoptsRuns`) tracks it for `run_seconds` (default: what the scheduler computes). Raises
        what `Scheduler.adopt` raises (KeyError, ValueError, OverAllocation) before any change."""
        state = self.scheduler.adopt(spec, slots, since)
        if isinstance(self.runs, AdoptsRuns):
            seconds = state.seg_end - since if run_seconds is None else run_seconds
            start = Start(spec.job_id, state.partition, slots, seconds, state.overhead, state.leaves,
                          state.tiers, state.generation)  # fmt: skip
            self.runs.adopt(start, self.scheduler.topology.node_names, since)
        return state

    def cycle(self, now: float) -> None:
        decision = self.scheduler.run_cycle(now)
        if decision is not EMPTY:
            self.apply(decision, now)

    def next_event(self) -> float | None:
        """When something next happens by itself: a run ends or a policy wakes up."""
        end = self.runs.next_event() if self.virtual is None else self.virtual.next_event()
        if not self.wakes:
            return end
        wake = self.wakes[0][0]
        return wake if end is None or wake < end else end

    # --- carrying a decision out -----------------------------------------------------------------

    def apply(self, decision: Decision, now: float) -> None:
        listener = self._tell
        for reject in decision.rejects:
            listener.rejected(reject, now)
        for resize in decision.resizes:
            listener.resized(resize, now)
        for preempt in decision.preempts:
            self.runs.stop(preempt.job_id, preempt.checkpoint_seconds)  # the time it was charged
            listener.preempted(preempt, now)
        if starts := decision.starts:  # here, not a method of its own: a call less per decision that starts any
            names, virtual = self.scheduler.topology.node_names, self.virtual
            failed = (self.runs.start_all(starts, names, now) if virtual is None
                      else virtual.start_all(starts, names, now))  # fmt: skip
            if failed:
                self._refused(starts, failed, now)
            else:
                listener.started(starts, now)
        for when, partition in decision.wakes:
            self.wake_at(when, partition, now)

    def _refused(self, starts: Sequence[Start], failed: list[tuple[Start, Exception]], now: float) -> None:
        """The backend refused `failed` of `starts`: their GPUs back, they queue again; the rest started."""
        listener = self._tell
        refused = {start.job_id for start, _ in failed}
        for start, error in failed:
            self.scheduler.abort_start(start.job_id, now)
            listener.start_failed(start, error, now)
        started = [start for start in starts if start.job_id not in refused]
        if started:
            listener.started(started, now)

    def wake_at(self, when: float, partition: str, now: float) -> None:
        """Run `partition`'s cycle again at `when`. A request earlier than the partition's pending
        one is added (the later one still fires); a later one is dropped (the earlier one runs first)."""
        pending = self._earliest.get(partition)
        if when > now and (pending is None or when < pending):
            self._earliest[partition] = when
            self._seq += 1
            heapq.heappush(self.wakes, (when, self._seq, partition))

    def reset_wakes(self) -> None:
        """Forget every wake-up (a new scheduler for a changed cluster reconsiders everything)."""
        self.wakes.clear()
        self._earliest.clear()


__all__ = ["QUIET", "Quiet", "Runtime", "Transitions"]

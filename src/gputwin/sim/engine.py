"""The discrete-event simulator: a trace through the one runtime on a virtual clock.

`Simulator` is `gputwin.runtime`'s `Runtime` over `VirtualRuns` (the event heap of run ends),
driven by `drive` on a `VirtualClock`: at each distinct instant runs that ended complete,
wake-ups fire, arrivals join their queues, then one scheduling cycle runs - exactly as a
per-second loop would, without visiting the seconds in between. `Recorder` is what the simulator
listens for: finished jobs, rejections, resizes and the busy GPUs over time.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Callable, Final, Iterable, Sequence

from gputwin.core.decision import Preempt, Reject, Resize, Start
from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.core.scheduler import Scheduler, SchedulerOptions
from gputwin.core.state import JobState
from gputwin.runtime.clock import Replay, VirtualClock, run_steps
from gputwin.runtime.loop import Quiet, Runtime
from gputwin.runtime.virtual import VirtualRuns
from gputwin.sim.finished import FinishedLog
from gputwin.sim.metrics import BusyTracker, FragmentTracker


@dataclass
class SimOutcome:
    """Everything a run produced: finished jobs in completion order (compact columns, read as
    `FinishedJob` rows), rejections, GPU busy-time."""

    finished: FinishedLog
    rejected: list[Reject]
    resized: int
    busy: BusyTracker
    events: int
    partitions: dict[str, int] = field(default_factory=dict)  # name -> total GPUs
    fragmented: float | None = None  # integral of fragmented GPUs (None: not measured)


# Final states held before they go to columns (~2.6 MB of JobStates). Final: compiled, a constant,
# not a look-up in the module's globals each instant.
_BATCH: Final = 4096


class Recorder(Quiet):
    """The simulator's listener (`gputwin.runtime.loop.Transitions`): what `SimOutcome` reports.
    A `Quiet`: compiled, the runtime's calls to it are direct ones (`Runtime.listener`)."""

    def __init__(self, jobs: dict[str, JobState], busy: BusyTracker, keep_specs: bool = True) -> None:
        self.jobs, self.busy = jobs, busy
        # A done JobState leaves memory: its fields go to columns (`keep_specs`: see FinishedLog).
        self.finished = FinishedLog(keep_specs)
        # Final states wait here and go to the log's columns a batch at a time (`FinishedLog.extend`:
        # a column per pass instead of ~16 appends a job); `close` flushes what is left.
        self._done: list[JobState] = []
        self.rejects: list[Reject] = []
        self.resizes = 0

    def started(self, starts: Sequence[Start], now: float) -> None:
        # The tracker, not its bound method: compiled, a typed local's method is a direct C call.
        jobs, busy = self.jobs, self.busy
        # A tuple (a Decision's starts) in a typed local: compiled, indexed directly, not iterated generically.
        listed: tuple[Start, ...] = starts if isinstance(starts, tuple) else tuple(starts)
        for start in listed:
            job = jobs[start.job_id]  # a GPU share (gputwin.core.sharing) is busy by its fraction
            # float(gpus), not the int: compiled, an int where a float is expected is boxed and
            # converted through the generic number protocol (the same value: GPU counts are exact).
            busy.change(start.partition, now, float(job.gpus) if job.spec.gpu_milli == 1000 else job.spec.gpu_milli / 1000)

    def preempted(self, preempt: Preempt, now: float) -> None:
        job = self.jobs[preempt.job_id]
        self.busy.change(preempt.partition, now,
                         -float(job.gpus) if job.spec.gpu_milli == 1000 else -job.spec.gpu_milli / 1000)  # (see `started`)

    def completed(self, ends: Sequence[tuple[JobState, float]], now: float) -> None:
        busy, done = self.busy, self._done
        listed: list[tuple[JobState, float]] = ends if isinstance(ends, list) else list(ends)  # (as in `started`)
        for state, end in listed:
            milli = state.spec.gpu_milli
            busy.change(state.partition, end, -float(state.gpus) if milli == 1000 else -milli / 1000)  # (see `started`)
            done.append(state)
        if len(done) >= _BATCH:
            self.close()

    def close(self) -> None:
        """Move the final states still waiting into the log (the run's end calls it)."""
        self.finished.extend(self._done)
        self._done.clear()

    def submitted(self, specs: Sequence[JobSpec], now: float) -> None:
        pass  # the jobs wait: nothing to record yet

    def start_failed(self, start: Start, error: Exception, now: float) -> None:
        pass  # a virtual run always starts

    def ended_elsewhere(self, job_id: str, end: float, now: float) -> None:
        pass  # a virtual run ends only if it is the scheduler's

    def rejected(self, reject: Reject, now: float) -> None:
        self.rejects.append(reject)

    def resized(self, resize: Resize, now: float) -> None:
        self.resizes += 1


class Simulator:
    """One replay of `jobs` (sorted by submit, then file order) on `cluster`."""

    def __init__(
        self,
        cluster: ClusterSpec,
        options: SchedulerOptions = SchedulerOptions(),
        util_interval: float = 3600.0,
    ) -> None:
        self.scheduler = Scheduler(cluster, options)
        totals = {name: p.ledger.total_gpus for name, p in self.scheduler.partitions.items()}
        self.busy = BusyTracker(totals, util_interval)
        self.frag: FragmentTracker | None = None
        self.recorder = Recorder(self.scheduler.jobs, self.busy)
        self.runs = VirtualRuns()
        self.runtime = Runtime(self.scheduler, self.runs, self.recorder)

    def run(self, jobs: Iterable[JobSpec], progress: Callable[[int], None] | None = None) -> SimOutcome:
        """Replay `jobs`: a list, or an iterator read as the clock reaches each job (sorted by submit),
        so a long generated or streamed trace need not be resident."""
        after: Callable[[float], None] | None = None
        listed = isinstance(jobs, Sequence)  # else the specs leave with their jobs (FinishedLog)
        if not listed:
            self.recorder = self.runtime.listener = Recorder(self.scheduler.jobs, self.busy, keep_specs=False)
        # 1-GPU jobs fit any free GPU: nothing to measure (a stream cannot be looked through first).
        if not isinstance(jobs, Sequence) or any(job.gpus > 1 for job in jobs):
            # The count depends on the state an instant leaves, not on each transition within
            # it: sampled after each instant, once per partition touched.
            self.frag = frag = FragmentTracker(self.scheduler.partitions, self.scheduler.cycled)
            after = frag.sample
        run_steps(Replay(self.runtime, jobs, progress, after), VirtualClock())
        rec = self.recorder
        rec.close()
        events = self.runs.popped + self.runtime.wakes_fired
        return SimOutcome(rec.finished, rec.rejects, rec.resizes, self.busy, events, dict(self.busy.totals),
                          None if self.frag is None else self.frag.area)  # fmt: skip


def simulate(
    cluster: ClusterSpec,
    jobs: Iterable[JobSpec],
    options: SchedulerOptions = SchedulerOptions(),
    progress: Callable[[int], None] | None = None,
    util_interval: float = 3600.0,
) -> SimOutcome:
    """Replay `jobs` on `cluster` and return what happened (see `gputwin.sim.metrics.summarize`)."""
    # The run allocates millions of small acyclic objects that reference counting frees; the
    # cyclic collector would only rescan them, so it is paused for the replay.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return Simulator(cluster, options, util_interval).run(jobs, progress)
    finally:
        if enabled:
            gc.enable()

"""The discrete-event simulator: replays a trace through the scheduling core in virtual time.

Events are kept in a heap keyed (time, kind, sequence) - ends before wake-ups at the same instant,
then insertion order - and arrivals are read straight from the time-sorted trace, so the heap
holds only running jobs and timers. At each distinct instant the engine applies every event of
that instant (ends free GPUs, arrivals join queues) and then runs one scheduling cycle, exactly
as a per-second loop would but without visiting the seconds in between.

Preemption makes a job's pending end event stale; each start bumps the job's `generation`, and
an end event whose generation is not the job's current one is dropped.
"""

from __future__ import annotations

import gc
import heapq
from dataclasses import dataclass, field
from typing import Callable, Sequence

from gputwin.core.decision import EMPTY, Decision, Reject
from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.core.scheduler import Scheduler, SchedulerOptions
from gputwin.core.state import JobState, Phase
from gputwin.sim.metrics import BusyTracker

_END, _WAKE = 0, 1


@dataclass
class SimOutcome:
    """Everything a run produced: finished jobs in completion order, rejections, GPU busy-time."""

    finished: list[JobState]
    rejected: list[Reject]
    resized: int
    busy: BusyTracker
    events: int
    partitions: dict[str, int] = field(default_factory=dict)  # name -> total GPUs


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
        self._heap: list[tuple[float, int, int, str, int]] = []
        self._seq = 0
        self._pending_wake: dict[str, float] = {}
        self.finished: list[JobState] = []
        self.rejected: list[Reject] = []
        self.resized = 0
        self.events = 0

    def run(self, jobs: Sequence[JobSpec], progress: Callable[[int], None] | None = None) -> SimOutcome:
        heap, sched = self._heap, self.scheduler
        n, i = len(jobs), 0
        while i < n or heap:
            now = jobs[i].submit if i < n else heap[0][0]
            if heap and heap[0][0] < now:
                now = heap[0][0]
            self._pop_events(now)
            while i < n:
                spec = jobs[i]
                if spec.submit != now:
                    break
                decision = sched.submit(spec, now)
                if decision is not EMPTY:  # most submits only queue the job
                    self._apply(decision, now)
                i += 1
            decision = sched.run_cycle(now)
            if decision is not EMPTY:
                self._apply(decision, now)
            if progress is not None:
                progress(i)
        return SimOutcome(self.finished, self.rejected, self.resized, self.busy, self.events, dict(self.busy.totals))

    def _pop_events(self, now: float) -> None:
        # Runs once per distinct instant and pops every job's end: the attributes it needs per
        # event are looked up once per call, and the event count is added once at the end.
        heap, sched = self._heap, self.scheduler
        jobs, change, finished = sched.jobs, self.busy.change, self.finished
        running = Phase.RUNNING
        popped = 0
        while heap and heap[0][0] == now:
            _, kind, _, name, generation = heapq.heappop(heap)
            popped += 1
            if kind == _WAKE:
                if self._pending_wake.get(name) == now:
                    del self._pending_wake[name]
                sched.wake(name)
                continue
            job = jobs.get(name)
            if job is None or job.phase is not running or job.generation != generation:
                continue  # preempted since this end was scheduled
            change(job.partition, now, -job.gpus)
            finished.append(sched.complete(name, now))
        self.events += popped

    def _apply(self, decision: Decision, now: float) -> None:
        if decision.rejects:
            self.rejected.extend(decision.rejects)
        self.resized += len(decision.resizes)
        jobs, change = self.scheduler.jobs, self.busy.change
        for pre in decision.preempts:
            change(pre.partition, now, -jobs[pre.job_id].gpus)
        if decision.starts:
            # One end event per start, pushed here rather than through `_push` (once per job).
            heap, seq = self._heap, self._seq
            for start in decision.starts:
                change(start.partition, now, jobs[start.job_id].gpus)
                seq += 1
                heapq.heappush(heap, (now + start.run_seconds, _END, seq, start.job_id, start.generation))
            self._seq = seq
        for when, partition in decision.wakes:
            pending = self._pending_wake.get(partition)
            if when > now and (pending is None or when < pending):
                self._pending_wake[partition] = when
                self._push(when, _WAKE, partition, 0)

    def _push(self, when: float, kind: int, name: str, generation: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when, kind, self._seq, name, generation))


def simulate(
    cluster: ClusterSpec,
    jobs: Sequence[JobSpec],
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

"""Where scheduled jobs really run: the `Backend` protocol and the simulated backend.

The controller decides (through the core) and a backend carries the decision out: start a job on
named nodes, stop it (preemption, deletion), and report which runs have ended. The protocol is
kept small so the Kubernetes backend (pods bound to nodes) and the SLURM backend fit it too.

Every method takes the time it is asked about: a backend reads no clock of its own, so the same
`SimBackend` serves the emulator's virtual clock and an operator's wall clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gputwin.api.status import Backend as BackendName
from gputwin.core.decision import Start
from gputwin.core.model import ClusterSpec, JobSpec


class Backend(Protocol):
    """Runs jobs the scheduler started; reports the runs that ended."""

    name: BackendName

    def start(self, job_id: str, start: Start, node_names: Sequence[str], now: float) -> None:
        """Run the job now on these nodes (`start.slots` says how many GPUs on each).

        Raising means the job could not be started: the controller gives its GPUs back.
        """
        ...

    def adopt(self, job_id: str, start: Start, node_names: Sequence[str], since: float) -> None:
        """The job already runs (recorded before a restart) since `since`: keep track of it."""
        ...

    def stop(self, job_id: str) -> None:
        """Stop the job's current run (preempted or deleted); unknown ids are ignored."""
        ...

    def finished(self, now: float) -> list[str]:
        """Jobs whose run ended by `now`, each reported once, in the order they ended."""
        ...

    def next_event(self) -> float | None:
        """When the next run will end, if the backend knows (None: no run, or not knowable)."""
        ...


class StartRefused(Exception):
    """Raised by `Backend.start`: the start can never succeed as asked (say, an invalid pod template).

    The job fails instead of being retried."""


class BackingOff(Exception):
    """Raised by `Backend.start`: the job's last start failed moments ago and its backoff has not
    ended; the GPUs go back, the job stays queued, and no event repeats the earlier one."""


@dataclass(frozen=True, slots=True)
class Failure:
    """A run that ended without succeeding: `retry` re-queues the job, else it failed."""

    job_id: str
    reason: str
    message: str
    retry: bool


@dataclass(frozen=True, slots=True)
class PodJobs:
    """Plain Pods seen this pass: new ones to queue, bound ones to account, queued ones gone."""

    new: tuple[JobSpec, ...] = ()
    running: tuple[tuple[JobSpec, tuple[tuple[str, int], ...], float], ...] = ()
    gone: tuple[str, ...] = ()


@runtime_checkable
class LiveBackend(Backend, Protocol):
    """A backend on a real cluster (Kubernetes): what it adds to `Backend`, used by `JobControl`."""

    def observe(self, cluster: ClusterSpec, now: float) -> dict[str, str]:
        """Declared nodes that must take no new work now (NotReady, cordoned, ...) -> why."""
        ...

    def held_by_others(self) -> dict[str, int]:
        """Declared node -> GPUs that others' pods hold there, as of the last `observe`."""
        ...

    def failures(self, now: float) -> list[Failure]:
        """Runs that failed or were lost since the last call, each reported once."""
        ...

    def pod_jobs(self, now: float) -> PodJobs:
        """Plain Pods (no GPUJob) asking for this scheduler; ids start with `POD_PREFIX`."""
        ...

    def start_batch(
        self, starts: Sequence[tuple[Start, Sequence[str]]], now: float
    ) -> list[tuple[str, str | None]]:
        """Start plain-Pod jobs together (no statuses); (job id, error or None) for each."""
        ...

    def pod_event(self, job_id: str, reason: str, message: str, type: str = "Normal") -> None:
        """An event about a plain-Pod job, posted on its pod (a GPUJob's go on the GPUJob)."""
        ...

    def preempted(self, job_id: str, partition: str) -> None:
        """The job was just preempted (after `stop`): count it."""
        ...


POD_PREFIX = "pod:"  # job ids of plain Pods a live backend schedules (GPUJob ids are namespace/name)


def is_pod_job(job_id: str) -> bool:
    return job_id.startswith(POD_PREFIX)


class SimBackend:
    """Simulated runs: a job ends `run_seconds` (overhead included) after it started."""

    name: BackendName = "sim"

    def __init__(self) -> None:
        self._ends: dict[str, float] = {}

    def start(self, job_id: str, start: Start, node_names: Sequence[str], now: float) -> None:
        self._ends[job_id] = now + start.run_seconds

    def adopt(self, job_id: str, start: Start, node_names: Sequence[str], since: float) -> None:
        self._ends[job_id] = since + start.run_seconds

    def stop(self, job_id: str) -> None:
        self._ends.pop(job_id, None)

    def finished(self, now: float) -> list[str]:
        done = sorted((end, job_id) for job_id, end in self._ends.items() if end <= now)
        for _, job_id in done:
            del self._ends[job_id]
        return [job_id for _, job_id in done]

    def next_event(self) -> float | None:
        return min(self._ends.values(), default=None)

    def running(self) -> dict[str, float]:
        """Job id -> when its run ends (a copy, for tests and diagnostics)."""
        return dict(self._ends)


# --- optional: a backend whose own scheduler runs the jobs reports their occupancy -------------------


@dataclass(frozen=True, slots=True)
class PartitionCounts:
    """One partition as the backend's own scheduler sees it (the GPUPartition status counts)."""

    nodes: int
    total_gpus: int
    free_gpus: int
    queued: int
    running: int


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Partition name -> counts, read at `as_of`. `error` set: the latest read failed, so these are
    the last good read's (`as_of` None: there was none) and the statuses say they are stale."""

    partitions: Mapping[str, PartitionCounts]
    as_of: float | None
    error: str = ""


@runtime_checkable
class ReportsOccupancy(Protocol):
    """A backend that runs jobs itself (SLURM): its counts replace the operator's idle ledger."""

    def occupancy(self, now: float) -> Occupancy:
        """The occupancy now; never raises (a failed read keeps the last counts, with `error`)."""
        ...


def occupancy_of(backend: Backend, now: float) -> Occupancy | None:
    """The backend's own occupancy; None where the operator's scheduler runs the jobs (sim, kubernetes)."""
    return backend.occupancy(now) if isinstance(backend, ReportsOccupancy) else None


__all__ = [
    "POD_PREFIX",
    "Backend",
    "BackingOff",
    "Failure",
    "LiveBackend",
    "Occupancy",
    "PartitionCounts",
    "PodJobs",
    "ReportsOccupancy",
    "SimBackend",
    "StartRefused",
    "is_pod_job",
    "occupancy_of",
]

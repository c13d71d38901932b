"""Where scheduled jobs really run: the operator's `Backend` and the simulated backend.

A backend carries out what the core decided, through the small capabilities of
`gputwin.runtime.capabilities`: every backend runs jobs (`RunsJobs`); the Kubernetes one also
adopts runs after a restart, observes the cluster, reports failed runs, brings plain Pods as its
own jobs and counts preemptions; the SLURM one reports its own occupancy. The controller asks for
a capability (`isinstance(backend, ObservesCluster)`), never for a backend's name, which is only
shown in statuses and messages.

`SimBackend` is the runtime's `VirtualRuns` (the simulator's event heap) under the name `sim`: the
emulator and an operator with the simulated backend run jobs exactly as `gputwin simulate` does.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from gputwin.api.status import LATEST_TIME, rfc3339
from gputwin.api.status import Backend as BackendName
from gputwin.runtime.capabilities import (
    POD_PREFIX,
    AdoptsRuns,
    BackingOff,
    BringsOwnJobs,
    CountsPreemptions,
    Failure,
    ObservesCluster,
    Occupancy,
    OwnJobs,
    PartitionCounts,
    ReportsFailures,
    ReportsOccupancy,
    RunsJobs,
    StartRefused,
    is_own_job,
)
from gputwin.runtime.virtual import VirtualRuns


@runtime_checkable
class Backend(RunsJobs, Protocol):
    """A backend the operator runs GPUJobs on: it runs jobs, and has a name to show."""

    name: BackendName


class SimBackend(VirtualRuns):
    """Simulated runs: a job ends `run_seconds` (overhead included) after it started; a run that
    would end after the latest time a status can show is refused (the job fails at once)."""

    name: BackendName = "sim"

    def __init__(self) -> None:
        super().__init__(LATEST_TIME, rfc3339(LATEST_TIME))


def occupancy_of(backend: object, now: float) -> Occupancy | None:
    """The backend's own occupancy; None where the operator's scheduler runs the jobs (sim, kubernetes)."""
    return backend.occupancy(now) if isinstance(backend, ReportsOccupancy) else None


__all__ = [
    "POD_PREFIX",
    "AdoptsRuns",
    "Backend",
    "BackingOff",
    "BringsOwnJobs",
    "CountsPreemptions",
    "Failure",
    "ObservesCluster",
    "Occupancy",
    "OwnJobs",
    "PartitionCounts",
    "ReportsFailures",
    "ReportsOccupancy",
    "SimBackend",
    "StartRefused",
    "is_own_job",
    "occupancy_of",
]

"""What a backend can do, as small optional Protocols: the runtime asks for a capability, never a name.

Every backend runs jobs (`RunsJobs`). Some can do more, and say so by having the methods:

| capability        | who has it              | what the runtime or controller does with it          |
|-------------------|-------------------------|------------------------------------------------------|
| `AdoptsRuns`      | sim, Kubernetes         | re-announces runs recorded before a restart          |
| `ObservesCluster` | Kubernetes              | nodes out of service, GPUs other schedulers hold     |
| `ReportsFailures` | Kubernetes              | failed runs fail the job, lost runs queue it again   |
| `BringsOwnJobs`   | Kubernetes (plain Pods) | jobs no GPUJob declares, with no status to write     |
| `CountsPreemptions` | Kubernetes            | preemptions counted for /metrics                     |
| `NeedsPayloads`   | Kubernetes              | given a `Resolver`: a start in names, plus the job's own payload |
| `ReportsOccupancy` | SLURM                  | its own counts replace the idle ledger's             |
| `Deployer`        | SLURM                   | the declared policies compiled into its own config   |

A backend reads no clock: every method takes the time it is asked about, so the same backend
serves a virtual clock and the wall clock.

A Start is resolved at the boundary, once: a backend that needs more than node names (the
Kubernetes one builds pods from the GPUJob's template) is handed a `Resolver` by the controller,
which already holds this pass's objects and the scheduler's topology, so the backend neither
fetches the job again nor re-derives what the core decided (leaf switches; a GPU share's slot
on its node, `Resolved.share`; a preemption's checkpoint time arrives as `stop`'s grace). `VirtualRuns` needs none: the simulator's hot path
resolves nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from gputwin.core.decision import Start
from gputwin.core.model import ClusterSpec, JobSpec


class ConfigError(ValueError):
    """A setting with a value the operator or a backend cannot use; the message names the variable."""


class StartRefused(Exception):
    """A start that can never succeed as asked (an invalid pod template, a run past the last
    time a status can show): the job fails instead of being retried. `reason` names why."""

    def __init__(self, message: str, reason: str = "FailedStart") -> None:
        super().__init__(message)
        self.reason = reason


class BackingOff(Exception):
    """The job's last start failed moments ago and its backoff has not ended: the GPUs go back,
    the job stays queued, and no event repeats the earlier one."""


@runtime_checkable
class RunsJobs(Protocol):
    """Carries out starts and stops, and says which runs ended."""

    def start_all(
        self, starts: Sequence[Start], node_names: Sequence[str], now: float
    ) -> list[tuple[Start, Exception]]:
        """Run these jobs now (one decision's starts, in order; `node_names[i]` is the node a slot's
        index `i` names); the ones that could not start, each with why. Their GPUs go back."""
        ...

    def stop(self, job_id: str, grace: float | None = None) -> None:
        """Stop the job's current run; unknown ids are ignored. `grace`: the seconds its run may
        take to wind down (a preemption's checkpoint time, as the core charged it; None: the
        run's own, as for a deleted or evicted job)."""
        ...

    def ended(self, now: float) -> list[tuple[str, float]]:
        """(job id, when it ended) for runs that ended by `now`, each once, in the order they ended."""
        ...

    def next_event(self) -> float | None:
        """When the next run will end, if the backend knows (None: no run, or not knowable)."""
        ...


@runtime_checkable
class AdoptsRuns(Protocol):
    def adopt(self, start: Start, node_names: Sequence[str], since: float) -> None:
        """The job already runs (recorded before a restart) since `since`: keep track of it."""
        ...


@runtime_checkable
class ObservesCluster(Protocol):
    def observe(self, cluster: ClusterSpec, now: float) -> dict[str, str]:
        """Declared nodes that must take no new work now (NotReady, cordoned, ...) -> why."""
        ...

    def held_by_others(self) -> dict[str, int]:
        """Declared node -> GPUs that others' pods hold there, as of the last `observe`."""
        ...


@dataclass(frozen=True, slots=True)
class Failure:
    """A run that ended without succeeding: `retry` re-queues the job, else it failed."""

    job_id: str
    reason: str
    message: str
    retry: bool


@runtime_checkable
class ReportsFailures(Protocol):
    def failures(self, now: float) -> list[Failure]:
        """Runs that failed or were lost since the last call, each reported once."""
        ...


@dataclass(frozen=True, slots=True)
class OwnJobs:
    """A backend's own jobs seen this pass: new ones to queue, bound ones to account, queued ones gone."""

    new: tuple[JobSpec, ...] = ()
    running: tuple[tuple[JobSpec, tuple[tuple[str, int], ...], float], ...] = ()
    gone: tuple[str, ...] = ()


POD_PREFIX = "pod:"  # ids of a backend's own jobs (plain Pods); declared jobs' ids are namespace/name


def is_own_job(job_id: str) -> bool:
    return job_id.startswith(POD_PREFIX)


@runtime_checkable
class BringsOwnJobs(Protocol):
    """Jobs the backend finds itself (plain Pods asking for this scheduler): ids start with `POD_PREFIX`."""

    def own_jobs(self, now: float) -> OwnJobs: ...

    def own_job_event(self, job_id: str, reason: str, message: str, type: str = "Normal") -> None:
        """An event about one of its own jobs, posted where that job lives (its pod)."""
        ...


@dataclass(frozen=True, slots=True)
class Resolved:
    """A Start in names, plus the job's own payload: what a backend needs beyond slot indexes."""

    nodes: tuple[str, ...]  # the node of each slot, in slot order
    switches: tuple[str, ...]  # the leaf switches those nodes hang off, in tree order
    body: dict[str, Any] | None  # the declared object (a GPUJob) as this pass read it; None: gone
    attempt: int  # runs of the job stopped before this one (its preemptions so far)
    submitted: float | None  # when the job was submitted, if known
    # A GPU share (milli-GPU < 1000): (slot, milli), the shared GPU of its node the scheduler's
    # `Shares` put it on; None: whole GPUs. A backend that deploys shares holds each shared GPU once.
    share: tuple[int, int] | None = None
    # A MIG profile: (profile, slot), the profile's name and the MIG-partitioned GPU of its node the
    # scheduler's `Shares` put it on (-1: a 7-slice profile, a whole GPU); None: no profile.
    mig: tuple[str, int] | None = None


class Resolver(Protocol):
    def resolve(self, start: Start) -> Resolved:
        """`start` (just decided, not yet run) in names, with its job's payload."""
        ...


@runtime_checkable
class NeedsPayloads(Protocol):
    def resolve_with(self, resolver: Resolver) -> None:
        """Where this backend resolves starts (the controller, once, before any start)."""
        ...


@runtime_checkable
class CountsPreemptions(Protocol):
    def preempted(self, job_id: str, partition: str) -> None:
        """The job was just preempted (after `stop`): count it."""
        ...


# --- a backend whose own scheduler runs the jobs (SLURM) --------------------------------------------


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


DeployResultKind = Literal["Succeeded", "Failed", "RolledBack"]


@dataclass(frozen=True, slots=True)
class DeployOutcome:
    """How one deployment went (a SchedulingPolicy's `status.lastDeploy`); `message` is one line a
    user can act on."""

    result: DeployResultKind
    message: str = ""


class Deployer(Protocol):
    """Compiles a cluster's policies into a backend's own configuration and applies it.

    The sim and Kubernetes backends run the operator's own scheduler, so a policy is in effect as
    soon as the controller rebuilds it: they need no deployer. Under SLURM, slurmctld places jobs
    under the configuration compiled for it, users submit with `sbatch`, and GPUJobs wait as
    Pending saying why (`jobs_blocker`)."""

    @property
    def jobs_blocker(self) -> str | None:
        """Why GPUJobs cannot run through this backend (None: they can)."""
        ...

    def deploy(self, cluster: ClusterSpec) -> DeployOutcome:
        """Put `cluster` into effect, or leave the previous configuration live and say why not."""
        ...

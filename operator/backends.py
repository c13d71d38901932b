"""Where scheduled jobs really run: the `Backend` protocol and the simulated backend.

The controller decides (through the core) and a backend carries the decision out: start a job on
named nodes, stop it (preemption, deletion), and report which runs have ended. The protocol is
kept small so the Kubernetes backend (pods bound to nodes) and the SLURM backend fit it too.

Every method takes the time it is asked about: a backend reads no clock of its own, so the same
`SimBackend` serves the emulator's virtual clock and an operator's wall clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gputwin.api.status import Backend as BackendName
from gputwin.core.decision import Start


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


__all__ = ["Backend", "SimBackend"]

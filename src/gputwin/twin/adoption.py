"""A snapshot's running jobs adopted by one replay, in one compiled loop (`gputwin.twin.seed`).

`Held` works out once where each running job is held (its spec, its slots as node indexes, its
start); every replay of a forecast adopts all of them again for its own run times (2,624 jobs at
issue 15's size, in each sample). Interpreted, with a `Start` made per job for `VirtualRuns.adopt`
(a NamedTuple: its `__new__` is interpreted even compiled), that loop was ~5 % of a compiled
sample. Here it is compiled (setup.py) and hands the runs the job's run directly
(`VirtualRuns.adopt_run`): the same adoptions, the same run ends.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputwin.core.ledger import OverAllocation
from gputwin.core.model import JobSpec
from gputwin.core.scheduler import Scheduler
from gputwin.runtime.virtual import VirtualRuns

Slots = tuple[tuple[int, int], ...]


class Adoptees:
    """The running jobs a replay adopts, in the snapshot's order, as columns: id, spec (None:
    not held, `why` says why), slots, start, shared GPU slot (-1: none) and partition."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.specs: list[JobSpec | None] = []
        self.slots: list[Slots] = []
        self.starts: list[float] = []
        self.shares: list[int] = []
        self.partitions: list[str] = []
        self.whys: list[str] = []

    def add(self, job_id: str, spec: JobSpec | None, slots: Slots, start: float, share: int, partition: str,
            why: str) -> None:  # fmt: skip
        self.ids.append(job_id)
        self.specs.append(spec)
        self.slots.append(slots)
        self.starts.append(start)
        self.shares.append(share)
        self.partitions.append(partition)
        self.whys.append(why)


def adopt_all(scheduler: Scheduler, runs: VirtualRuns, jobs: Adoptees, durations: Sequence[float]) -> dict[str, str]:
    """Adopt each of `jobs` for its run time in `durations` (in order; as many as both hold): its
    GPUs taken in the scheduler's ledger since its start, its run's end in `runs`. The jobs that
    could not be, with why (in order)."""
    left_out: dict[str, str] = {}
    ids, specs, whys = jobs.ids, jobs.specs, jobs.whys
    for k in range(min(len(ids), len(durations))):
        spec = specs[k]
        if whys[k] or spec is None:
            left_out[ids[k]] = whys[k]
            continue
        start = jobs.starts[k]
        try:
            state = scheduler.adopt(spec, jobs.slots[k], start, jobs.shares[k], durations[k])
        except (KeyError, ValueError, OverAllocation) as exc:
            left_out[ids[k]] = f"its GPUs cannot be held in partition {jobs.partitions[k]} ({exc})"
            continue
        runs.adopt_run(ids[k], start, state.seg_end - start)
    return left_out


__all__ = ["Adoptees", "adopt_all"]

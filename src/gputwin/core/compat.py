"""The reference simulator's own rules, for `--compat helios` (HeliosArtifact, QSSF Service).

Only what differs from gputwin's native behaviour lives here: its consolidate placer (worst fit
for the remainder of a multi-node job, whole free nodes only), its checkpoint cost table and its
QSSF order (`HeliosQssf`). Its `random` placer is deterministic first fit, so compat maps it to
`FirstFit`. The time rules (a preempted-then-resumed SRTF job is released one tick late) are
parameters of the scheduler, set by `gputwin.core.scheduler.SchedulerOptions.helios()`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Sequence

from gputwin.core.ledger import Ledger
from gputwin.core.placement import Slots
from gputwin.core.policies import NEVER, Key, RunningEntry

if TYPE_CHECKING:
    from gputwin.core.state import JobState


def helios_checkpoint_cost(gpus: int) -> float:
    """Seconds added to a preempted job's remaining time: 7 s for 1 GPU, 30 s up to 8, 60 s above."""
    if gpus == 1:
        return 7.0
    return 30.0 if gpus <= 8 else 60.0


class HeliosConsolidate:
    """The reference consolidate placer, decision for decision (8-GPU nodes).

    <= 8 GPUs: best fit on one node. More: whole free nodes, lowest index first; a remainder goes on
    the next node in most-free-first order if it has room (worst fit), else the job waits.
    """

    name = "consolidate"

    def place(self, ledger: Ledger, gpus: int, waited: float) -> Slots | None:
        if ledger.free_gpus < gpus:
            return None
        per_node = ledger.max_node_gpus
        if gpus <= per_node:
            node = ledger.best_fit_node(gpus)
            return None if node is None else ((node, gpus),)
        whole, rest = divmod(gpus, per_node)
        if ledger.idle_count() < whole:
            return None
        idle = ledger.idle_nodes()
        slots = tuple((next(idle), per_node) for _ in range(whole))
        if not rest:
            return slots
        taken = {n for n, _ in slots}
        nxt = next((n for n in ledger.fullest_first() if n not in taken), None)
        if nxt is None or ledger.free_of(nxt) < rest:
            return None
        return slots + ((nxt, rest),)


class HeliosQssf:
    """The reference QSSF order (model semantics §2, §5), non-preemptive, strict order.

    Each tick the reference stable-sorts its queue by GPUs, then by priority = estimate x GPUs, so
    queued jobs go in (estimate x GPUs, GPUs, arrival) order; `job.predicted` is the estimate (a
    `TableEstimator` row). But when every waiting job arrived this very tick it skips the priority
    sort: those jobs are tried in (GPUs, arrival) order (`fresh_key`), which the scheduler applies
    when the oldest queued job was queued `now`.
    """

    name = "qssf"
    preemptive = False
    timed = False

    def key(self, job: JobState, now: float) -> Key:
        return (job.predicted * job.gpus, float(job.gpus))

    def fresh_key(self, job: JobState) -> tuple[int, int]:
        return (job.gpus, job.order)

    def next_change(self, job: JobState, now: float) -> float | None:
        return None

    def running_entries(self, jobs: Iterable[JobState], now: float) -> list[RunningEntry]:
        return [(self.key(job, now), job.order, job, NEVER) for job in jobs]

    def soonest_change(self, entries: Sequence[RunningEntry], now: float) -> float:
        return NEVER

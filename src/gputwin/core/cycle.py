"""One scheduling cycle: the loops that decide starts and preemptions, and the commits.

`Cycle` is the half of `gputwin.core.scheduler.Scheduler` that runs on `run_cycle(now)`; the Scheduler
adds the events (submit, complete, ...). Loops: `_strict` (head-of-line order, optional EASY backfill),
`_preemptive` (rank queued and running jobs together, preempt what no longer fits), their quota and Helios
variants and `_strict_plain`; `_loop_of` picks a partition's once: a cycle tests no feature it does not use.
"""

from __future__ import annotations

from typing import Any, Callable, Final, Iterable

from gputwin.core.compat import HeliosQssf
from gputwin.core.decision import Decision, DecisionBuilder, EMPTY, Preempt, Start
from gputwin.core.fairness import Fairness
from gputwin.core.fairqueue import fair_head, fair_rest
from gputwin.core.modelrank import budget_of, rank_by_model, rank_pool
from gputwin.core.options import SchedulerOptions
from gputwin.core.placement import Slots, TopologyAware, place_model
from gputwin.core.policies import NEVER, RunningEntry
from gputwin.core.quota import PartitionQuota, rank_with_quota
from gputwin.core.reservation import backfill_start, reservation
from gputwin.core.sortedqueue import SortedQueue
from gputwin.core.state import JobState, PartitionState, Phase, in_order, queued_then, release
from gputwin.core.topology import Span, Topology

_ONE_NODE = Span(1, 0)
# What a job of the strict quota loop's walk leaves it to do (Final: compiled, inlined constants).
_ON: Final = 0
_PASSED: Final = 1
_STOP: Final = 2
# A job's phase once it runs, read once: in pure Python an Enum member is a slow class attribute
# (~200 ns a read, ten times a plain one); compiled, a static instead of a generic look-up.
_RUNNING: Final = Phase.RUNNING
Loop = Callable[[PartitionState, float, DecisionBuilder], None]


class Cycle:
    """The cycle's loops over the partitions the Scheduler keeps (declared here, set by it)."""

    options: SchedulerOptions
    topology: Topology
    partitions: dict[str, PartitionState]
    _dirty: set[str]
    cycled: set[str]  # partitions a cycle decided for, until a reader clears it (Scheduler.cycled)
    _order: int
    _fairness: list[Fairness]  # the partitions' that have one
    _loops: dict[str, Loop | None]  # partition -> the loop that serves it (`_loop_of`)
    _names: list[str]  # the partitions' names, sorted (the order a cycle decides in)
    _out: DecisionBuilder  # every cycle's, emptied as it builds its Decision

    def _next_order(self) -> int:
        self._order += 1
        return self._order

    # --- the cycle --------------------------------------------------------------------------------

    def run_cycle(self, now: float) -> Decision:
        """Decide starts and preemptions for every partition that changed since the last cycle."""
        for fair in self._fairness:
            fair.at(now)  # tenants' keys are read at the cycle's instant
        if not self._dirty:
            return EMPTY
        partitions, loops = self.partitions, self._loops  # (pairs: four at once build a tuple, interpreted)
        out, dirty = self._out, self._dirty
        try:
            for name in dirty if len(dirty) == 1 else in_order(self._names, dirty):
                if (loop := loops[name]) is None:  # `_strict_plain`, called directly (compiled: not a generic call)
                    if (part := partitions[name]).queued:  # (an empty queue starts nothing: no call)
                        self._strict_plain(part, now, out)
                else:
                    loop(partitions[name], now, out)
        except BaseException:
            self._out = DecisionBuilder()  # a cycle that failed leaves nothing to the next one
            raise
        self.cycled.update(self._dirty)  # (compiled, a set method, not the generic in-place or)
        self._dirty.clear()
        return out.build()

    def _loop_of(self, part: PartitionState) -> Loop | None:
        """The loop that serves `part`, chosen once (policy and quotas never change): a cycle tests no
        feature the partition does not use. None: `_strict_plain`."""
        if part.policy.preemptive:
            return self._preemptive
        if part.quota is not None:
            return self._strict_quota
        if isinstance(part.policy, HeliosQssf):
            return self._strict_helios
        return None if part.models is None and part.fair is None else self._strict

    def _strict_helios(self, part: PartitionState, now: float, out: DecisionBuilder) -> None:
        """`_strict` for the reference's QSSF (`HeliosQssf`): when only this instant's arrivals wait (the
        oldest queued job arrived now), it tries them by GPUs alone (the dict is in arrival order)."""
        policy, queued = part.policy, part.queued
        if not (queued and queued[next(iter(queued))].queued_since == now):
            self._strict(part, now, out)
            return
        assert isinstance(policy, HeliosQssf)
        for arrival in sorted(queued.values(), key=policy.fresh_key):
            if not self._try_start(part, arrival, now, out):
                return

    def _strict(self, part: PartitionState, now: float, out: DecisionBuilder) -> None:
        """Head-of-line order: start jobs until one does not fit, then (optionally) backfill."""
        while (job := part.head()) is not None:
            if not self._try_start(part, job, now, out):
                self._backfill(part, job, now, out)
                return

    def _strict_plain(self, part: PartitionState, now: float, out: DecisionBuilder) -> None:
        """`_strict` without GPU models, fairness or shares (most partitions) in one path (shares: `_strict`).
        A topology-aware placer is called narrowed: compiled, a direct call, not through the Protocol."""
        if part.shares is not None or not isinstance(order := part.order, SortedQueue):
            return self._strict(part, now, out)
        queued, ledger, placer = part.queued, part.ledger, part.placer
        while queued:
            job = queued[order.head_order()]
            slots = (None if job.gpus > ledger.free_gpus else placer.place(ledger, job.gpus, now - job.queued_since)
                     if isinstance(placer, TopologyAware) else placer.place(ledger, job.gpus, now - job.queued_since))
            if slots is None:  # as `_place` does: a placer that waits for a better one is asked again
                if job.gpus <= ledger.free_gpus and (wait := part.max_wait) is not None:
                    out.wake(job.queued_since + wait, part.name)
                if ledger.free_gpus and part.spec.policy.backfill:  # what `_backfill` tests first (no shares here)
                    self._backfill(part, job, now, out)
                return
            del queued[order.pop_head()]
            ledger.allocate(slots)
            self._started(part, job, slots, now, out)

    def _strict_quota(self, part: PartitionState, now: float, out: DecisionBuilder) -> None:
        """`_strict` under quotas, in two passes over the queue in its order: first jobs within their tenant's
        guarantee (reclaiming borrowed GPUs if need be), then jobs that borrow, so a job never borrows GPUs that
        the same cycle hands back to their owner. A job its tenant's quota cannot take waits with that tenant's
        later jobs while other tenants' jobs go on (a job preempted this cycle waits so too: it runs again in a
        later cycle); one that fits its quota but not the GPUs stops the queue, as in `_strict`."""
        quota = part.quota
        assert quota is not None
        before = self._order  # jobs preempted this cycle queue again with later orders
        for second in range(2):  # (a range: compiled, no tuple of the passes built per cycle)
            borrowing = second == 1
            if not part.queued:
                return  # nothing to start (a cycle after an end, or the first pass started all)
            if borrowing and part.shares is None and not part.ledger.free_gpus:
                return  # no GPU free: the borrowing pass could start nothing (it never reclaims)
            # Tenants at their guarantee would wait at their first job of the guaranteed pass:
            # waiting from the start, the walk skips their blocks instead.
            waiting = set() if borrowing else quota.at_guarantee()
            if waiting and len(waiting) == quota.queued_tenants():  # every queued tenant at its guarantee
                continue
            # A FairQueue's first jobs are a list, walked natively; the rest, if any, lazily.
            step, head = _ON, fair_head(part, waiting)
            if head is not None:
                step = self._quota_list(part, quota, head, borrowing, waiting, before, now, out)
            rest = queued_then(part, waiting) if head is None else None if step != _ON else fair_rest(part, head, waiting)
            if rest is not None:
                step = self._quota_iter(part, quota, rest, borrowing, waiting, before, now, out)
            if step == _STOP:
                return

    def _quota_list(self, part: PartitionState, quota: PartitionQuota, jobs: list[JobState], borrowing: bool,
                    waiting: set[str], before: int, now: float, out: DecisionBuilder) -> int:  # fmt: skip
        """`_quota_step` for each of `jobs` (a list: compiled, read natively) while it says go on."""
        for job in jobs:
            if (step := self._quota_step(part, quota, job, borrowing, waiting, before, now, out)) != _ON:
                return step
        return _ON

    def _quota_iter(self, part: PartitionState, quota: PartitionQuota, jobs: Iterable[JobState], borrowing: bool,
                    waiting: set[str], before: int, now: float, out: DecisionBuilder) -> int:  # fmt: skip
        """`_quota_list` for jobs read lazily."""
        for job in jobs:
            if (step := self._quota_step(part, quota, job, borrowing, waiting, before, now, out)) != _ON:
                return step
        return _ON

    def _quota_step(self, part: PartitionState, quota: PartitionQuota, job: JobState, borrowing: bool,
                    waiting: set[str], before: int, now: float, out: DecisionBuilder) -> int:  # fmt: skip
        """One job of `_strict_quota`'s walk: _ON (go on), _PASSED (every queued tenant waits: the
        pass is over) or _STOP (it fits its quota but not the GPUs: the queue stops)."""
        if (tenant := job.tenant) in waiting:  # the tenant the Scheduler stored on it
            return _ON
        admitted = job.order <= before and quota.admits(tenant, job.gpus, borrowing)  # None: reclaim?
        if not (admitted or admitted is None and self._admits(part, quota, job, borrowing, now, out, waiting)):
            waiting.add(tenant)
            return _PASSED if quota.all_waiting(waiting) else _ON
        if not self._try_start(part, job, now, out):
            self._backfill(part, job, now, out)
            return _STOP
        return _ON

    def _admits(self, part: PartitionState, quota: PartitionQuota, job: JobState, borrowing: bool, now: float,
                out: DecisionBuilder, waiting: set[str]) -> bool:  # fmt: skip
        """May `job` start now as far as its tenant's quota goes (`borrowing`: above its guarantee)?
        Within the guarantee, borrowed work is preempted to make room when that suffices; the
        victims' tenants then wait (their preempted jobs come first in their order)."""
        tenant = job.tenant
        if borrowing:
            return quota.fits(tenant, job.gpus)
        if not quota.within_guarantee(tenant, job.gpus):
            return False
        if quota.fits(tenant, job.gpus):
            return True
        victims = quota.reclaim(tenant, job.gpus, part.running.values(), part.ledger.free_gpus)
        for victim in victims or ():
            self._preempt(part, victim, now, out)
            waiting.add(victim.tenant)
        return victims is not None

    def _backfill(self, part: PartitionState, head: JobState, now: float, out: DecisionBuilder) -> None:
        """EASY backfill (if asked for): a later job may start now only if it cannot delay the head's reservation."""
        # A share may still go onto an open shared GPU when no whole GPU is free (it takes none).
        ledger, shares = part.ledger, part.shares is not None and part.shares.has_room()
        if not (ledger.free_gpus or shares) or not part.spec.policy.backfill:
            return  # nothing can start (the common case on a busy cluster): skip the reservation too
        # The window's entries copied (commits dequeue), where its first job that could start is (none
        # before it passes a test) and the reservation (once a job could start now; shadow -1: not yet).
        queued, depth = part.queued, self.options.backfill_depth
        first, shadow, extra, window = (backfill_start(part, depth, head, now) if not shares
                                        else (0, -1.0, 0, part.order[1:1 + depth]))  # fmt: skip
        entries: list[tuple[Any, Any]] = window  # an order read as an object (typed: unboxed, boxed anew)
        for i in range(first, len(window)):
            job = queued[entries[i][1]]
            if job.gpus > ledger.free_gpus and not (shares and job.spec.gpu_milli < 1000):
                if not (ledger.free_gpus or shares):
                    return  # every later job needs a GPU too
                continue  # `_place` would refuse it as well, before asking the placer
            if shadow < 0.0:
                shadow, extra = reservation(part, head, now)
            if now + job.work_left > shadow and job.gpus > extra:
                continue  # cannot end in time even without overhead, nor fit beside the head
            if (quota := part.quota) is not None and not _unborrowed(quota, job):
                continue  # backfill never borrows: a guarantee may be about to reclaim those GPUs
            slots = self._place(part, job, now, out)
            if slots is None:
                continue
            # Judge "ends in time" on the run this placement really gets, overhead included.
            ends_in_time = now + job.work_left * (1.0 + self._span(slots)[1]) <= shadow
            if not ends_in_time and job.gpus > extra:
                continue
            self._commit(part, job, slots, now, out)
            if not ends_in_time:
                extra -= job.gpus

    def _preemptive(self, part: PartitionState, now: float, out: DecisionBuilder) -> None:
        """Rank queued and running jobs together; whatever no longer fits the quota is preempted."""
        policy = part.policy
        if not part.queued and not policy.timed:
            return
        # One pass over the running jobs gives their keys and (timed policies) when each key next
        # changes: both are needed every cycle, and this pass is most of a preemptive cycle's cost.
        running = policy.running_entries(part.running.values(), now)
        started: list[JobState] = []
        preempted = False
        if part.queued:
            to_run, victims = self._rank(part, running)
            for job in victims:
                self._preempt(part, job, now, out)
            started = [job for job in to_run if self._try_start(part, job, now, out)]
            preempted = bool(victims)
            if (preempted or started) and self.options.wake_after_change:
                out.wake(now + 1.0, part.name)
        if policy.timed:
            # The jobs running after the re-rank: those kept (victims are queued now) and those started.
            if preempted:
                running = [entry for entry in running if entry[2].phase is _RUNNING]
            soonest = policy.soonest_change(running, now)
            for job in started:
                change = policy.next_change(job, now)
                if change is not None and change < soonest:
                    soonest = change
            out.wake(soonest if soonest != NEVER else None, part.name)

    def _rank(self, part: PartitionState, running: list[RunningEntry]) -> tuple[list[JobState], list[JobState]]:
        """The jobs to start and the running ones to preempt (`running` unsorted): by quota, by GPU
        model (`gputwin.core.modelrank`), or as one pool of GPUs."""
        if part.quota is not None:
            return self._rerank_quota(part, part.quota, running)
        if part.models is not None:
            return rank_by_model(part.models, part.ledger, part.order, part.queued, sorted(running))
        return self._rerank(part, running)

    def _rerank(self, part: PartitionState, running: list[RunningEntry]) -> tuple[list[JobState], list[JobState]]:
        """`rank_pool`: one pool of GPUs (a method: a pure-Python test overrides it with the plain walk)."""
        return rank_pool(part, running)

    def _rerank_quota(self, part: PartitionState, quota: PartitionQuota, running: list[RunningEntry]
                      ) -> tuple[list[JobState], list[JobState]]:  # fmt: skip
        """`rank_pool` under quotas: guaranteed demand first, then borrowing (`rank_with_quota`)."""
        queued = [(key, order, part.queued[order]) for key, order in part.order]
        return rank_with_quota(quota, queued, [(e[0], e[1], e[2]) for e in running], budget_of(part, running))

    # --- commits ----------------------------------------------------------------------------------

    def _try_start(self, part: PartitionState, job: JobState, now: float, out: DecisionBuilder) -> bool:
        if (slots := self._place(part, job, now, out)) is None:
            return False
        self._commit(part, job, slots, now, out)
        return True

    def _place(self, part: PartitionState, job: JobState, now: float, out: DecisionBuilder) -> Slots | None:
        """The placer's choice for `job` now, or None (then ask to be woken if the placer waits)."""
        if part.shares is not None and job.spec.gpu_milli < 1000:  # a GPU share: gputwin.core.sharing
            return part.shares.place(part.placer, job.spec, now - job.queued_since, part.models)
        if job.gpus > part.ledger.free_gpus:
            return None
        if part.models is None:  # the usual case: no GPU models declared, no filter (`place_model`)
            placer = part.placer  # narrowed as in `_strict_plain`: compiled, a direct call
            slots = (placer.place(part.ledger, job.gpus, now - job.queued_since) if isinstance(placer, TopologyAware)
                     else placer.place(part.ledger, job.gpus, now - job.queued_since))  # fmt: skip
        else:
            slots = place_model(part.placer, part.ledger, job.gpus, now - job.queued_since, part.models,
                                job.spec.model)  # fmt: skip
        if slots is None and part.max_wait is not None:  # a placer that waits for a better slot
            out.wake(job.queued_since + part.max_wait, part.name)
        return slots

    def _span(self, slots: Slots) -> tuple[Span, float]:
        """Leaves and tiers the slots span, and the overhead fraction that costs (claim 5)."""
        if len(slots) == 1:
            return _ONE_NODE, 0.0
        span = self.topology.span_of_slots(slots)
        return span, self.topology.spec.overhead.fraction(len(slots), span.tiers)

    def _commit(self, part: PartitionState, job: JobState, slots: Slots, now: float, out: DecisionBuilder) -> None:
        part.dequeue(job)
        if part.shares is not None and job.spec.gpu_milli < 1000:  # a GPU share: gputwin.core.sharing
            part.shares.take(job.spec.job_id, slots[0][0], job.spec.gpu_milli, now, job.spec.gpu_profile)
        else:
            part.ledger.allocate(slots)
        self._started(part, job, slots, now, out)

    def _started(self, part: PartitionState, job: JobState, slots: Slots, now: float, out: DecisionBuilder) -> None:
        """`_commit` once the job is out of the queue and holds its GPUs: its run, and the Start."""
        if len(slots) == 1:  # most jobs: one node, no span to work out, no overhead (`_span`'s first case)
            leaves, tiers, fraction = 1, 0, 0.0
        else:
            span, fraction = self._span(slots)
            leaves, tiers = span.leaves, span.tiers
        # One assignment each: five targets at once build a tuple and unpack it, interpreted.
        job.slots = slots
        job.leaves = leaves
        job.tiers = tiers
        job.seg_start = now
        job.phase = _RUNNING
        job.slowdown = slowdown = 1.0 + fraction if part.models is None else (1.0 + fraction) / part.models.speed(slots)
        if fraction > job.overhead:
            job.overhead = fraction
        job.wait += now - job.queued_since
        if job.first_start is None:
            job.first_start = now
        run = job.work_left * slowdown
        if part.preemptive:
            run += self.options.release_lag
        job.seg_end = now + run
        job.order = self._order = self._order + 1
        job.generation = generation = job.generation + 1
        job_id = job.spec.job_id
        part.running[job_id] = job
        if part.ends is not None:
            part.ends.add(job)
        if part.quota is not None:
            part.quota.change(now, job.tenant, used=job.gpus)
        if part.fair is not None:
            part.fair.change(now, job, job.gpus, job.tenant)
        out.starts.append(Start(job_id, job.partition, slots, run, fraction, leaves, tiers, generation))

    def _preempt(self, part: PartitionState, job: JobState, now: float, out: DecisionBuilder) -> None:
        cost = self.options.checkpoint_cost(job.gpus)
        if part.spec.policy.checkpoint_seconds is not None:
            cost = part.spec.policy.checkpoint_seconds
        job.work_left = job.remaining(now) + cost
        job.attained = job.attained_at(now)
        job.preemptions += 1
        del part.running[job.spec.job_id]
        if part.ends is not None:
            part.ends.drop(job)
        release(part, job, now)
        if part.quota is not None:
            part.quota.change(now, job.tenant, used=-job.gpus)
        if part.fair is not None:
            part.fair.change(now, job, -job.gpus, job.tenant)
        job.slots = ()
        part.enqueue(job, self._next_order(), now)
        out.preempts.append(Preempt(job.spec.job_id, part.name, cost))


def _unborrowed(quota: PartitionQuota, job: JobState) -> bool:
    """May `job` start now within its tenant's own guarantee (no borrowing)?"""
    return quota.within_guarantee(job.tenant, job.gpus) and quota.fits(job.tenant, job.gpus)

"""The scheduling core's entry points: submit, complete, and `run_cycle(now) -> Decision`.

One `Scheduler` holds a cluster's partitions and decides for all of them. Drivers call it the same
way in both environments: the simulator with virtual time, the operator with wall-clock time
read outside the core. The flow of a job (patent claim 1):

    submit   -> routed by task type to its partition (claim 2), sized (claim 3), queued
    run_cycle-> the partition's queue policy orders it; a placer picks GPUs (claim 3); the
                communication overhead of the span is added to its run time (claim 5)
    complete -> GPUs freed; its run and wait feed the history that QSSF and sizing learn from

Two loops serve every queue policy: `_strict` (non-preemptive, head-of-line order, optional EASY
backfill) and `_preemptive` (rank queued and running jobs together, preempt what no longer fits).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from gputwin.core.compat import HeliosQssf, helios_checkpoint_cost
from gputwin.core.decision import EMPTY, Decision, DecisionBuilder, Preempt, Reject, Resize, Start
from gputwin.core.history import Estimator, HistoryEstimator, JobHistory, TableEstimator
from gputwin.core.ledger import Ledger
from gputwin.core.model import ClusterSpec, JobSpec, PartitionSpec
from gputwin.core.placement import Slots
from gputwin.core.plugins import make_placer, make_sizer
from gputwin.core.policies import NEVER, RunningEntry, make_policy
from gputwin.core.state import JobState, PartitionState, Phase
from gputwin.core.topology import Span, Topology

_ONE_NODE = Span(1, 0)


@dataclass(frozen=True, slots=True)
class SchedulerOptions:
    """Knobs that are about the scheduler, not about one partition's policy.

    `release_lag` delays the end of preemptive jobs' runs (the reference simulator releases SRTF
    jobs one tick late); `wake_after_change` re-runs preemptive partitions one second after any
    change (its per-second loop does). `compat` selects compatibility placers and QSSF order
    ("helios"). `estimator` builds the run-time estimator of each Scheduler made with these options (a
    factory: an estimator learns, so two runs must not share one); else `estimates`, a fixed table;
    else `HistoryEstimator`.
    """

    checkpoint_cost: Callable[[int], float] = helios_checkpoint_cost
    release_lag: float = 0.0
    wake_after_change: bool = False
    backfill_depth: int = 256
    compat: str | None = None
    seed: int = 0
    estimates: TableEstimator | None = None
    estimator: Callable[[], Estimator] | None = None

    @staticmethod
    def helios(seed: int = 0, estimates: TableEstimator | None = None) -> SchedulerOptions:
        return SchedulerOptions(release_lag=1.0, wake_after_change=True, compat="helios", seed=seed,
                                estimates=estimates)  # fmt: skip


class Scheduler:
    """Partitions, their queues and ledgers, and the history every policy learns from."""

    def __init__(
        self,
        cluster: ClusterSpec,
        options: SchedulerOptions = SchedulerOptions(),
        estimator: Estimator | None = None,
    ) -> None:
        self.cluster = cluster
        self.options = options
        self.topology = Topology(cluster.topology)
        if estimator is None and options.estimator is not None:
            estimator = options.estimator()
        estimator = estimator or options.estimates
        self.estimator: Estimator = estimator or HistoryEstimator()
        self.history = JobHistory()
        self.partitions: dict[str, PartitionState] = {p.name: self._partition(p) for p in cluster.partitions}
        self.routes, self.catch_all = _routes(cluster.partitions)
        self.jobs: dict[str, JobState] = {}
        # Learning costs time per job; skip it when no partition's policy uses what it learns.
        policies = [p.policy for p in cluster.partitions]
        self._predicts = estimator is not None or any(p.queue == "qssf" for p in policies)
        self._sizes = any(p.sizing != "as-requested" for p in policies)
        self._order = 0
        self._dirty: set[str] = set()

    def _partition(self, spec: PartitionSpec) -> PartitionState:
        nodes = [self.topology.node_index[n] for n in spec.nodes]
        policy = spec.policy
        return PartitionState(
            spec=spec,
            ledger=Ledger(self.topology, nodes),
            policy=HeliosQssf() if self.options.compat == "helios" and policy.queue == "qssf"
            else make_policy(policy.queue, dict(policy.params)),
            # Each partition draws from its own stream, still fixed by the one seed.
            placer=make_placer(
                policy.placement, policy.params, self.options.compat, self.options.seed ^ zlib.crc32(spec.name.encode())
            ),
            sizer=make_sizer(policy.sizing, policy.params),
        )

    def _next_order(self) -> int:
        self._order += 1
        return self._order

    # --- events from the driver -------------------------------------------------------------------

    def route(self, spec: JobSpec) -> str | None:
        """The partition serving this job's task type (claim 2), or None."""
        return self.routes.get(spec.task_type, self.catch_all)

    def submit(self, spec: JobSpec, now: float) -> Decision:
        """Route, size and queue a new job. Rejections and resizes come back as a Decision."""
        name = self.routes.get(spec.task_type, self.catch_all)  # `route`, inlined: once per job
        if name is None:
            return Decision(rejects=(Reject(spec.job_id, f"no partition serves task type {spec.task_type!r}"),))
        part = self.partitions[name]
        problem = _admission_problem(spec, part)
        if problem is None and spec.job_id in self.jobs:
            problem = self._duplicate(spec)
        if problem:
            return Decision(rejects=(Reject(spec.job_id, problem),))
        gpus, duration = spec.gpus, spec.duration
        if self._sizes:
            limit = part.spec.max_gpus_per_job or part.ledger.total_gpus
            choice = part.sizer.size(spec, name, min(limit, part.ledger.total_gpus), self.history)
            gpus, duration = choice.gpus, choice.duration
        predicted = self.estimator.predict(spec) if self._predicts else spec.duration
        job = JobState(spec, name, gpus, duration, predicted)
        self.jobs[spec.job_id] = job
        self._order += 1  # `_next_order`, inlined on the per-job path
        part.enqueue(job, self._order, now)
        self._dirty.add(name)
        if gpus != spec.gpus:
            return Decision(resizes=(Resize(spec.job_id, spec.gpus, gpus),))
        return EMPTY

    def adopt(self, spec: JobSpec, slots: Slots, started: float) -> JobState:
        """Account a job that already runs in the outside world (a driver restarting).

        Its GPUs are taken from the ledger exactly as they were bound, so nothing is placed twice;
        the job then completes like any other. Raises ValueError if it cannot be adopted.
        """
        name = self.route(spec)
        if name is None or spec.job_id in self.jobs:
            raise ValueError(f"job {spec.job_id!r}: no partition serves it, or it is already known")
        part = self.partitions[name]
        job = JobState(spec, name, spec.gpus, spec.duration, spec.duration)
        part.ledger.allocate(slots)
        span, fraction = self._span(slots)
        job.slots, job.leaves, job.tiers = slots, span.leaves, span.tiers
        job.slowdown = 1.0 + fraction
        job.overhead = fraction
        job.wait = started - spec.submit
        job.first_start = job.seg_start = started
        job.seg_end = started + job.work_left * job.slowdown
        job.phase = Phase.RUNNING
        job.order = self._next_order()
        job.generation = 1
        part.running[spec.job_id] = job
        self.jobs[spec.job_id] = job
        self._dirty.add(name)
        return job

    def _duplicate(self, spec: JobSpec) -> str | None:
        if spec.job_id in self.jobs:
            return f"job id {spec.job_id!r} is already queued or running"
        return None

    def complete(self, job_id: str, now: float) -> JobState:
        """A running job finished at `now`: free its GPUs and learn from it."""
        job = self.jobs.pop(job_id)
        part = self.partitions[job.partition]
        del part.running[job_id]
        part.ledger.release(job.slots)
        # `attained_at(now)` for a running job (it is one: it was in `part.running`), inlined.
        job.attained += (now - job.seg_start) * job.gpus
        job.phase, job.end, job.work_left = Phase.DONE, now, 0.0
        if self._sizes:
            self.history.record(job.partition, job.spec, job.gpus, job.duration, job.wait)
        if self._predicts:
            self.estimator.observe(job.spec, job.spec.duration)
        self._dirty.add(job.partition)
        return job

    def abort_start(self, job_id: str, now: float) -> None:
        """A driver could not carry out a Start: give the GPUs back and queue the job again."""
        job = self.jobs[job_id]
        part = self.partitions[job.partition]
        del part.running[job_id]
        part.ledger.release(job.slots)
        job.slots = ()
        job.generation += 1
        part.enqueue(job, self._next_order(), now)
        self._dirty.add(job.partition)

    def cancel(self, job_id: str, now: float) -> JobState:
        """A job withdrawn while queued or running (its resource was deleted): drop it, free its GPUs.

        Unlike `complete`, nothing is learned: the job did not finish.
        """
        job = self.jobs.pop(job_id)
        part = self.partitions[job.partition]
        if job.phase is Phase.RUNNING:
            del part.running[job_id]
            part.ledger.release(job.slots)
            job.slots = ()
        else:
            part.dequeue(job)
        job.end = now
        self._dirty.add(job.partition)
        return job

    def set_out_of_service(self, nodes: Iterable[str]) -> None:
        """Exactly these nodes take no new work now (the driver saw them NotReady, cordoned, ...).

        Jobs already on them keep running and free their GPUs as usual; unknown names are ignored.
        A partition whose set changed is reconsidered in the next cycle.
        """
        index = self.topology.node_index
        out = [index[n] for n in nodes if n in index]
        for part in self.partitions.values():
            if part.ledger.set_out_of_service(out):
                self._dirty.add(part.spec.name)

    def set_external_use(self, used: Mapping[str, int]) -> None:
        """Exactly these GPUs per node are held by others now (pods another scheduler bound on a
        shared node); every other node has none held. Placers see a node's free GPUs less these;
        unknown names are ignored. A partition whose view changed is reconsidered in the next cycle.
        """
        index = self.topology.node_index
        by_index = {index[n]: gpus for n, gpus in used.items() if n in index}
        for part in self.partitions.values():
            if part.ledger.set_external_use(by_index):
                self._dirty.add(part.spec.name)

    def wake(self, partition: str | None = None) -> None:
        """Mark partitions for the next cycle (a timer fired, a policy changed)."""
        self._dirty.update([partition] if partition else self.partitions)

    # --- the cycle --------------------------------------------------------------------------------

    def run_cycle(self, now: float) -> Decision:
        """Decide starts and preemptions for every partition that changed since the last cycle."""
        if not self._dirty:
            return EMPTY
        out = DecisionBuilder()
        for name in sorted(self._dirty) if len(self._dirty) > 1 else self._dirty:
            part = self.partitions[name]
            if part.policy.preemptive:
                self._preemptive(part, now, out)
            else:
                self._strict(part, now, out)
        self._dirty.clear()
        return out.build()

    def _strict(self, part: PartitionState, now: float, out: DecisionBuilder) -> None:
        """Head-of-line order: start jobs until one does not fit, then (optionally) backfill."""
        policy = part.policy
        queued = part.queued
        if isinstance(policy, HeliosQssf) and queued and queued[next(iter(queued))].queued_since == now:
            # Only this instant's arrivals wait (the oldest queued job arrived now): the reference
            # tries them by GPUs alone (`HeliosQssf`). Queued jobs are in the dict in arrival order.
            for arrival in sorted(queued.values(), key=policy.fresh_key):
                if not self._try_start(part, arrival, now, out):
                    return
            return
        while (job := part.head()) is not None:
            if not self._try_start(part, job, now, out):
                if part.spec.policy.backfill:
                    self._backfill(part, job, now, out)
                return

    def _backfill(self, part: PartitionState, head: JobState, now: float, out: DecisionBuilder) -> None:
        """EASY backfill: a later job may start now only if it cannot delay the head's reservation."""
        ledger = part.ledger
        if not ledger.free_gpus:
            return  # nothing can start (the common case on a busy cluster): skip the reservation too
        shadow, extra = _reservation(part, head, now)
        for job in part.queued_jobs(1 + self.options.backfill_depth)[1:]:
            if job.gpus > ledger.free_gpus:
                if not ledger.free_gpus:
                    return  # every later job needs a GPU too
                continue  # `_place` would refuse it as well, before asking the placer
            if now + job.work_left > shadow and job.gpus > extra:
                continue  # cannot end in time even without overhead, nor fit beside the head
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
            preempted, started = self._rerank(part, running, now, out)
            if (preempted or started) and self.options.wake_after_change:
                out.wake(now + 1.0, part.name)
        if policy.timed:
            # The jobs running after the re-rank: those kept (victims are queued now) and those started.
            if preempted:
                running = [entry for entry in running if entry[2].phase is Phase.RUNNING]
            soonest = policy.soonest_change(running, now)
            for job in started:
                change = policy.next_change(job, now)
                if change is not None and change < soonest:
                    soonest = change
            out.wake(soonest if soonest != NEVER else None, part.name)

    def _rerank(self, part: PartitionState, running: list[RunningEntry], now: float, out: DecisionBuilder
                ) -> tuple[bool, list[JobState]]:  # fmt: skip
        """Walk queued (already in key order) and running jobs (`running`, unsorted) in key order,
        queued first on equal keys, then arrival order; keep or start each job that still fits the
        quota. The walk stops once every GPU is spoken for: what is left of the queue cannot run,
        and every running job not yet kept is a victim. Returns (any job preempted, jobs started)."""
        ledger = part.ledger
        quota = ledger.usable_gpus()
        # With nodes out of service a running job needs from the quota only the GPUs it holds on
        # nodes in service (it keeps the others, which nobody else could use); one that needs
        # nothing is kept even when the quota is spent, so the walk cannot stop early.
        partial = ledger.has_out_of_service
        # Running jobs whose key is below the queue head's come before every queued job: the walk
        # meets them first, as a sorted prefix. They fit the quota (it counts every GPU running
        # jobs hold in service), so each is kept whatever their order, and the quota drops by
        # their total: only the other running jobs need sorting. Sorting every running job each
        # cycle was a good part of a preemptive replay's cost, and usually far fewer rank behind
        # the head. Should they not fit after all, the full walk below decides, as it always did.
        head = part.order[0][0]
        ahead = 0
        contested: list[RunningEntry] = []
        for item in running:
            if item[0] < head:
                ahead += ledger.held_in_service(item[2].slots) if partial else item[2].gpus
            else:
                contested.append(item)
        victims: list[JobState] = []
        if ahead <= quota:
            quota -= ahead
            running = contested
            if ahead and quota == 0 and not partial:
                # The walk would stop after the last of them (every GPU spoken for) and preempt
                # the rest in key order; this saves it a pass over a queue that cannot start.
                victims.extend(e[2] for e in sorted(contested))
                for job in victims:
                    self._preempt(part, job, now, out)
                return bool(victims), []
        running.sort()  # orders are unique: jobs and change times are never compared
        to_run: list[JobState] = []
        queued, jobs = iter(part.order), part.queued
        entry = next(queued, None)
        count, r = len(running), 0
        while entry is not None or r < count:
            if entry is not None and (r == count or entry[0] <= running[r][0]):
                job = jobs[entry[1]]
                entry = next(queued, None)
                if job.gpus > quota:
                    continue
                quota -= job.gpus
                to_run.append(job)
            else:
                job = running[r][2]
                r += 1
                need = ledger.held_in_service(job.slots) if partial else job.gpus
                if need > quota:
                    victims.append(job)
                    continue
                quota -= need
            if quota == 0 and not partial:
                victims.extend(e[2] for e in running[r:])
                break
        for job in victims:
            self._preempt(part, job, now, out)
        started = [job for job in to_run if self._try_start(part, job, now, out)]
        return bool(victims), started

    # --- commits ----------------------------------------------------------------------------------

    def _try_start(self, part: PartitionState, job: JobState, now: float, out: DecisionBuilder) -> bool:
        slots = self._place(part, job, now, out)
        if slots is None:
            return False
        self._commit(part, job, slots, now, out)
        return True

    def _place(self, part: PartitionState, job: JobState, now: float, out: DecisionBuilder) -> Slots | None:
        """The placer's choice for `job` now, or None (then ask to be woken if the placer waits)."""
        if job.gpus > part.ledger.free_gpus:
            return None
        slots = part.placer.place(part.ledger, job.gpus, now - job.queued_since)
        if slots is None:
            max_wait = getattr(part.placer, "max_wait", None)
            if max_wait is not None:
                out.wake(job.queued_since + max_wait, part.name)
        return slots

    def _span(self, slots: Slots) -> tuple[Span, float]:
        """Leaves and tiers the slots span, and the overhead fraction that costs (claim 5)."""
        if len(slots) == 1:
            return _ONE_NODE, 0.0
        span = self.topology.span([n for n, _ in slots])
        return span, self.topology.spec.overhead.fraction(len(slots), span.tiers)

    def _commit(self, part: PartitionState, job: JobState, slots: Slots, now: float, out: DecisionBuilder) -> None:
        part.dequeue(job)
        part.ledger.allocate(slots)
        # Most jobs fit on one node: no span to work out and no overhead (`_span`'s first case,
        # without the call and the Span it returns, once per job started).
        if len(slots) == 1:
            leaves, tiers, fraction = 1, 0, 0.0
        else:
            span, fraction = self._span(slots)
            leaves, tiers = span.leaves, span.tiers
        job.slots, job.leaves, job.tiers = slots, leaves, tiers
        job.slowdown = slowdown = 1.0 + fraction
        if fraction > job.overhead:
            job.overhead = fraction
        job.wait += now - job.queued_since
        if job.first_start is None:
            job.first_start = now
        job.seg_start = now
        run = job.work_left * slowdown
        if part.policy.preemptive:
            run += self.options.release_lag
        job.seg_end = now + run
        job.phase = Phase.RUNNING
        self._order += 1
        job.order = self._order
        job.generation = generation = job.generation + 1
        job_id = job.spec.job_id
        part.running[job_id] = job
        out.starts.append(Start(job_id, job.partition, slots, run, fraction, leaves, tiers, generation))

    def _preempt(self, part: PartitionState, job: JobState, now: float, out: DecisionBuilder) -> None:
        cost = self.options.checkpoint_cost(job.gpus)
        if part.spec.policy.checkpoint_seconds is not None:
            cost = part.spec.policy.checkpoint_seconds
        job.work_left = job.remaining(now) + cost
        job.attained = job.attained_at(now)
        job.preemptions += 1
        del part.running[job.spec.job_id]
        part.ledger.release(job.slots)
        job.slots = ()
        part.enqueue(job, self._next_order(), now)
        out.preempts.append(Preempt(job.spec.job_id, part.name, cost))


def _routes(partitions: Iterable[PartitionSpec]) -> tuple[dict[str, str], str | None]:
    routes: dict[str, str] = {}
    catch_all: str | None = None
    for p in partitions:
        for task_type in p.task_types:
            if task_type == "*":
                catch_all = catch_all or p.name
            else:
                routes.setdefault(task_type, p.name)
    return routes, catch_all


def _admission_problem(spec: JobSpec, part: PartitionState) -> str | None:
    if spec.gpus < 1:
        return f"asks for {spec.gpus} GPUs; a GPU job needs at least 1"
    if spec.duration < 0:
        return f"has a negative duration ({spec.duration} s)"
    if spec.gpus > part.ledger.total_gpus:
        return f"asks for {spec.gpus} GPUs; partition {part.name!r} has {part.ledger.total_gpus}"
    limit = part.spec.max_gpus_per_job
    if limit and spec.gpus > limit:
        return f"asks for {spec.gpus} GPUs; partition {part.name!r} allows {limit} per job"
    return None


def _reservation(part: PartitionState, head: JobState, now: float) -> tuple[float, int]:
    """When the head job will start at the latest (shadow time), and GPUs to spare then.

    Counted in GPUs, as EASY does: enough GPUs free up when running jobs end in order. A placer
    that holds the head back for a better slot (topology-aware `max_wait`) pushes the shadow to
    that deadline. Fragmentation is not modelled, so under consolidate the shadow is a lower bound.
    """
    shadow, extra = float("inf"), 0
    free = part.ledger.free_gpus
    if free >= head.gpus:
        shadow, extra = now, free - head.gpus
    else:
        for end, gpus in sorted((j.seg_end, j.gpus) for j in part.running.values()):
            free += gpus
            if free >= head.gpus:
                shadow, extra = end, free - head.gpus
                break
    max_wait = getattr(part.placer, "max_wait", None)
    if max_wait is not None:
        shadow = max(shadow, head.queued_since + max_wait)
    return shadow, extra

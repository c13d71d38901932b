"""The scheduling core's entry points: submit, complete, and `run_cycle(now) -> Decision`.

One `Scheduler` holds a cluster's partitions and decides for all of them. Drivers call it the same
way in both environments: the simulator with virtual time, the operator with wall-clock time
read outside the core. The flow of a job (patent claim 1):

    submit   -> routed by task type to its partition (claim 2), sized (claim 3), queued
    run_cycle-> the partition's queue policy orders it; a placer picks GPUs (claim 3); the
                communication overhead of the span is added to its run time (claim 5)
    complete -> GPUs freed; its run and wait feed the history that QSSF and sizing learn from

This module holds the events; the cycle's loops are `gputwin.core.cycle`. A partition with
tenants' quotas (`gputwin.core.quota`) also admits by quota and tells its quota every change of
usage and demand.
"""

from __future__ import annotations

import zlib
from dataclasses import replace
from typing import Final, Iterable, Mapping, Sequence

from gputwin.core.compat import HeliosQssf
from gputwin.core.cycle import Cycle
from gputwin.core.options import SchedulerOptions as SchedulerOptions
from gputwin.core.fairness import Fairness
from gputwin.core.fairqueue import fair_among
from gputwin.core.decision import EMPTY, Decision, DecisionBuilder, Reject, Resize
from gputwin.core.history import Estimator, HistoryEstimator, JobHistory, Mean, Points, observe_means
from gputwin.core.ledger import Ledger
from gputwin.core.model import ClusterSpec, JobSpec, PartitionSpec
from gputwin.core.placement import Slots, model_pools
from gputwin.core.plugins import make_placer, make_sizer
from gputwin.core.policies import make_policy
from gputwin.core.quota import PartitionQuota, TenantUsage, quota_problem
from gputwin.core.sharing import Shares, share_problem, undeclared_profile
from gputwin.core.sizing import model_speed
from gputwin.core.state import JobState, PartitionState, Phase, release
from gputwin.core.topology import Topology

_DONE: Final = Phase.DONE  # an Enum member read once (interpreted, each read is a slow class attribute)


class Scheduler(Cycle):
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
        # The built-in estimator, typed: a job's groups are looked up once (`JobState.means`).
        self._history = self.estimator if type(self.estimator) is HistoryEstimator else None
        # A forecast's frozen points, typed: asked directly (the Protocol's call is generic), told nothing.
        self._points = self.estimator if type(self.estimator) is Points else None
        self._sizes = any(p.sizing != "as-requested" for p in policies)
        self._order = 0
        self._dirty = set()
        # The partitions cycles decided for since a reader last cleared it (none does by default:
        # it holds at most every partition): each one any change of a job or a GPU touched, as
        # every change marks its partition for the next cycle (the simulator's fragmentation).
        self.cycled: set[str] = set()
        self._fairness = [p.fair for p in self.partitions.values() if p.fair is not None]
        self._loops = {name: self._loop_of(part) for name, part in self.partitions.items()}
        self._names = sorted(self.partitions)
        self._out = DecisionBuilder()
        self.saw_shares = False  # some job submitted asked for a GPU share (gputwin.core.sharing)
        self._batch: dict[str, list[JobState]] | None = None  # jobs `submit_all` queues at its end

    def _partition(self, spec: PartitionSpec) -> PartitionState:
        nodes = [self.topology.node_index[n] for n in spec.nodes]
        policy = spec.policy
        ledger = Ledger(self.topology, nodes)
        part = PartitionState(
            spec=spec,
            ledger=ledger,
            policy=HeliosQssf() if self.options.compat == "helios" and policy.queue == "qssf"
            else make_policy(policy.queue, dict(policy.params)),
            # Each partition draws from its own stream, still fixed by the one seed.
            placer=make_placer(
                policy.placement, policy.params, self.options.compat, self.options.seed ^ zlib.crc32(spec.name.encode())
            ),
            sizer=make_sizer(policy.sizing, policy.params),
            quota=PartitionQuota(spec.name, spec.quotas) if spec.quotas else None,
            models=model_pools(nodes, [n.model for n in self.cluster.topology.nodes],
                               dict(enumerate(self.topology.node_gpus)), self.cluster.topology.speeds),
        )
        if policy.fairness != "none":
            fair_among(part, Fairness(policy.fairness, ledger.total_gpus, policy.half_life, policy.weights))
        return part

    def tenant_usage(self, now: float) -> tuple[TenantUsage, ...]:
        """Every tenant's service up to `now`, by partition then tenant (none without quotas)."""
        return tuple(u for name in sorted(self.partitions) if (q := self.partitions[name].quota) for u in q.report(now))

    # --- events from the driver -------------------------------------------------------------------

    def route(self, spec: JobSpec) -> str | None:
        """The partition serving this job's task type (claim 2), or None."""
        return self.routes.get(spec.task_type, self.catch_all)

    def submit(self, spec: JobSpec, now: float, duration: float | None = None) -> Decision:
        """Route, size and queue a new job. Rejections and resizes come back as a Decision.
        `duration`: its run time, if not `spec.duration` (see `submit_all`)."""
        run = spec.duration if duration is None else duration
        name = self.routes.get(spec.task_type, self.catch_all)  # `route`, inlined: once per job
        if name is None:
            return Decision(rejects=(Reject(spec.job_id, f"no partition serves task type {spec.task_type!r}"),))
        part = self.partitions[name]
        gpus, length = spec.gpus, run
        # The usual job passes every test of `_problem` at a glance (whole GPUs, no more than the
        # partition has, no profile, a new id; no quotas, GPU models or cap per job there): those
        # tests one by one cost more than the rest of a submit, interpreted. (Fields, not a table by
        # partition: compiled, a look-up in one cost more than reading them.)
        if (not (0 < gpus <= part.ledger.total_gpus and run >= 0 and spec.gpu_milli == 1000 and not spec.gpu_profile
                 and part.quota is None and part.models is None and not part.spec.max_gpus_per_job)
                or spec.job_id in self.jobs) and (problem := self._problem(spec, run, part)):  # fmt: skip
            return Decision(rejects=(Reject(spec.job_id, problem),))
        if self._sizes:
            limit = part.spec.max_gpus_per_job or part.ledger.total_gpus
            models = part.models  # the sizing rule weighs run time at the speed the job would get
            speed = 1.0 if models is None else model_speed(spec.model, self.cluster.topology.speeds, models.nodes)
            asked = spec if duration is None else replace(spec, duration=run)
            choice = part.sizer.size(asked, name, min(limit, part.ledger.total_gpus), self.history, speed)
            gpus, length = choice.gpus, choice.duration
        means: tuple[Mean, ...] = ()
        if not self._predicts:
            predicted = run
        elif (history := self._history) is not None:
            means = history.means_of(spec)
            predicted = history.predict_from(means)
        elif (points := self._points) is not None:
            predicted = points.predict(spec)
        else:
            predicted = self.estimator.predict(spec)
        job = JobState(spec, name, gpus, length, predicted)
        job.means = means
        self.jobs[spec.job_id] = job
        self._order += 1  # `_next_order`, inlined on the per-job path
        if part.quota is not None:
            job.tenant = part.quota.tenant_of(job)
        elif part.fair is not None:
            job.tenant = part.fair.tenant_of(job)
        batch = self._batch
        if batch is not None and part.quota is None and part.fair is None:
            job.order, job.queued_since = self._order, now  # queued by `submit_all`, at its end
            batch.setdefault(name, []).append(job)
        else:
            part.enqueue(job, self._order, now)
        if part.quota is not None:
            part.quota.change(now, job.tenant, demand=gpus)
        self._dirty.add(name)
        if gpus != spec.gpus:
            return Decision(resizes=(Resize(spec.job_id, spec.gpus, gpus),))
        return EMPTY

    def _problem(self, spec: JobSpec, run: float, part: PartitionState) -> str | None:
        """Why `spec` (run time `run`) cannot be queued in `part`, or None; a GPU share's first job
        gives a partition its shared GPUs (`gputwin.core.sharing`)."""
        problem = _admission_problem(spec, run, part)
        if problem is None and part.quota is not None:
            problem = quota_problem(part.quota, spec.user, spec.gpus, spec.model)
        if problem is None and spec.model and part.models is not None:
            problem = part.models.problem(spec.model, spec.gpus, part.name)
        if problem is None and spec.job_id in self.jobs:
            problem = self._duplicate(spec)
        if spec.gpu_profile and self.cluster.topology.profiles:  # a MIG profile: of the job's model?
            problem = problem or undeclared_profile(spec, self.cluster.topology.profiles)
        if spec.gpu_milli != 1000:  # a GPU share (gputwin.core.sharing); whole-GPU jobs skip this
            self.saw_shares = True
            problem = problem or share_problem(spec)
            if problem is None and part.shares is None and not part.policy.preemptive:
                part.shares = Shares(part.ledger)
        return problem

    def submit_all(self, specs: Sequence[JobSpec], durations: Sequence[float],
                   ranks: dict[str, int] | None = None) -> list[tuple[int, Decision]]:  # fmt: skip
        """`submit(spec, spec.submit, durations[i])` for each of `specs` in order; the decisions that
        are not EMPTY, with their spec's index. Each partition without quotas or fairness takes its
        jobs in one sorted insert at the end (`PartitionState.enqueue_all`): the same queue as one
        insert each, for a fraction of the cost. A forecast's replays share one spec per job and
        draw its run time per sample (`durations`): building a spec per job and sample cost more
        than queueing it. What a completion teaches the estimator is still the spec's duration.
        `ranks`: a hint of the queues' order (`PartitionState.enqueue_all`), never changing it."""
        batch: dict[str, list[JobState]] = {}
        self._batch = batch
        out: list[tuple[int, Decision]] = []
        try:
            for i in range(len(specs)):
                spec = specs[i]
                decision = self.submit(spec, spec.submit, durations[i])
                if decision is not EMPTY:
                    out.append((i, decision))
        finally:
            self._batch = None
            for name, jobs in batch.items():
                self.partitions[name].enqueue_all(jobs, ranks)
        return out

    def adopt(self, spec: JobSpec, slots: Slots, started: float, share_slot: int = -1,
              duration: float | None = None) -> JobState:  # fmt: skip
        """Account a job that already runs in the outside world (a driver restarting).

        Its GPUs are taken from the ledger exactly as they were bound, so nothing is placed twice;
        the job then completes like any other. Raises ValueError if it cannot be adopted. A share's
        `share_slot` >= 0 names the shared GPU it is on (`Shares.take`'s `slot`); `duration` is its
        whole run time, if not `spec.duration` (a forecast shares its specs: `submit_all`).
        """
        name = self.route(spec)
        if name is None or spec.job_id in self.jobs:
            raise ValueError(f"job {spec.job_id!r}: no partition serves it, or it is already known")
        part = self.partitions[name]
        run = spec.duration if duration is None else duration
        job = JobState(spec, name, spec.gpus, run, run)
        if spec.gpu_milli != 1000 and (problem := share_problem(spec)) is not None:
            raise ValueError(f"job {spec.job_id!r}: {problem}")
        if spec.gpu_milli != 1000 and not part.policy.preemptive:  # a GPU share: gputwin.core.sharing
            part.shares = part.shares or Shares(part.ledger)
            part.shares.take(spec.job_id, slots[0][0], spec.gpu_milli, started, spec.gpu_profile, share_slot)
        else:
            part.ledger.allocate(slots)
        span, fraction = self._span(slots)
        job.slots, job.leaves, job.tiers = slots, span.leaves, span.tiers
        job.slowdown = (1.0 + fraction) / (1.0 if part.models is None else part.models.speed(slots))
        job.overhead = fraction
        job.wait = started - spec.submit
        job.first_start = job.seg_start = started
        job.seg_end = started + job.work_left * job.slowdown
        job.phase = Phase.RUNNING
        job.order = self._next_order()
        job.generation = 1
        part.running[spec.job_id] = job
        if part.ends is not None:
            part.ends.add(job)
        self.jobs[spec.job_id] = job
        if part.quota is not None:
            job.tenant = part.quota.tenant_of(job)
            part.quota.change(started, job.tenant, used=job.gpus, demand=job.gpus)
        if part.fair is not None:
            job.tenant = job.tenant or part.fair.tenant_of(job)
            part.fair.change(started, job, job.gpus, job.tenant)
        self._dirty.add(name)
        return job

    def _duplicate(self, spec: JobSpec) -> str | None:
        if spec.job_id in self.jobs:
            return f"job id {spec.job_id!r} is already queued or running"
        return None

    def complete(self, job_id: str, now: float) -> JobState:
        """A running job finished at `now`: free its GPUs and learn from it."""
        jobs = self.jobs
        job = jobs[job_id]  # and deleted: compiled, `pop` is a generic method call
        del jobs[job_id]
        part = self.partitions[job.partition]
        del part.running[job_id]
        if part.ends is not None:
            part.ends.drop(job)
        if part.shares is not None and job.spec.gpu_milli < 1000:  # a GPU share: gputwin.core.sharing
            part.shares.give_back(job_id, now)
        else:
            part.ledger.release(job.slots)
        # `attained_at(now)` for a running job (it is one: it was in `part.running`), inlined.
        job.attained += (now - job.seg_start) * job.gpus
        job.phase, job.end, job.work_left = _DONE, now, 0.0
        if part.quota is not None:
            part.quota.change(now, job.tenant, used=-job.gpus, demand=-job.gpus)
        if part.fair is not None:
            part.fair.change(now, job, -job.gpus, job.tenant)
        if self._sizes:
            self.history.record(job.partition, job.spec, job.gpus, job.duration, job.wait)
        if job.means:  # the built-in estimator's groups, kept since its submit
            observe_means(job.means, job.spec.duration)
        elif self._predicts and self._points is None:  # frozen points learn nothing
            self.estimator.observe(job.spec, job.spec.duration)
        self._dirty.add(job.partition)
        return job

    def abort_start(self, job_id: str, now: float) -> None:
        """A driver could not carry out a Start: give the GPUs back and queue the job again."""
        job = self.jobs[job_id]
        part = self.partitions[job.partition]
        del part.running[job_id]
        if part.ends is not None:
            part.ends.drop(job)
        release(part, job, now)
        if part.quota is not None:
            part.quota.change(now, job.tenant, used=-job.gpus)
        if part.fair is not None:
            part.fair.change(now, job, -job.gpus, job.tenant)
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
        running = job.phase is Phase.RUNNING
        if running:
            del part.running[job_id]
            if part.ends is not None:
                part.ends.drop(job)
            release(part, job, now)
            job.slots = ()
            if part.fair is not None:
                part.fair.change(now, job, -job.gpus, job.tenant)
        else:
            part.dequeue(job)
        if part.quota is not None:
            part.quota.change(now, job.tenant, used=-job.gpus if running else 0, demand=-job.gpus)
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


def _admission_problem(spec: JobSpec, duration: float, part: PartitionState) -> str | None:
    if spec.gpus < 1:
        return f"asks for {spec.gpus} GPUs; a GPU job needs at least 1"
    if duration < 0:
        return f"has a negative duration ({duration} s)"
    if spec.gpus > part.ledger.total_gpus:
        return f"asks for {spec.gpus} GPUs; partition {part.name!r} has {part.ledger.total_gpus}"
    limit = part.spec.max_gpus_per_job
    if limit and spec.gpus > limit:
        return f"asks for {spec.gpus} GPUs; partition {part.name!r} allows {limit} per job"
    return None



"""GPUJobs through the one runtime: submit, adopt after a restart, write statuses on transitions.

`JobControl` is the GPUJob half of `gputwin.operator.controller.Controller`. It reads the GPUJob
objects, feeds the runtime (`gputwin.runtime.loop.Runtime`: the scheduler plus the backend that
carries its decisions out) and, as the runtime's listener (`gputwin.operator.job_events`), writes
one status and one event per transition.

What survives a restart is what the GPUJob objects say: a Running job's `status.allocation`
(exact GPUs per node, since when, for how long) is adopted into the new scheduler's ledger and
re-announced to the backend (`AdoptsRuns`), so nothing runs twice; Queued and Pending jobs are
submitted again in their original order, `(submitTime, creationTimestamp, namespace/name)`.

What a backend can do beyond running jobs it says by its capabilities
(`gputwin.runtime.capabilities`), and a pass uses each only where it exists: `ObservesCluster`
names nodes to take out of service and the GPUs other schedulers' pods hold; `ReportsFailures`
reports runs that failed (the GPUJob goes Failed) or were lost (queued again); `BringsOwnJobs`
brings plain Pods, whose job ids start with `pod:` and which have no GPUJob status;
`NeedsPayloads` is given this controller as its `Resolver`: a start in node and switch names, with
the GPUJob as this pass read it and its status as this pass left it (so a backend fetches nothing
again and re-derives nothing the scheduler decided).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import hostlist
from pydantic import ValidationError

from gputwin.api.bodies import Body, Obj
from gputwin.api.problems import validation_problems
from gputwin.api.v1alpha1 import GPUJob
from gputwin.core.decision import Start
from gputwin.core.ledger import OverAllocation
from gputwin.core.model import JobSpec
from gputwin.core.scheduler import Scheduler
from gputwin.core.state import JobState, Phase
from gputwin.operator.backends import AdoptsRuns, Backend, BringsOwnJobs, ObservesCluster, ReportsFailures, is_own_job
from gputwin.operator.job_events import SCHEDULED, JobEvents
from gputwin.operator.statuses import epoch, rfc3339
from gputwin.operator.store import Store, is_deleted, name_of, namespace_of
from gputwin.runtime.capabilities import NeedsPayloads, Resolved
from gputwin.runtime.loop import Runtime

TERMINAL = frozenset({"Succeeded", "Failed", "Rejected"})


@dataclass(frozen=True, slots=True)
class Seen:
    """A GPUJob as listed: its id (`namespace/name`), the object, and its model (None if invalid)."""

    job_id: str
    obj: Obj
    model: GPUJob | None
    errors: str = ""


def job_id_of(obj: Obj) -> str:
    return f"{namespace_of(obj) or 'default'}/{name_of(obj)}"


def job_spec(job_id: str, job: GPUJob, submit: float) -> JobSpec:
    """The core's view of a GPUJob; without durationSeconds a simulated run lasts 0 s."""
    s = job.spec
    return JobSpec(job_id=job_id, submit=submit, duration=s.duration_seconds or 0.0, gpus=s.gpus,
                   task_type=s.task_type, user=s.user, name=s.job_name, priority=s.priority,
                   model=s.gpu_model, gpu_milli=s.gpu_milli, gpu_profile=s.gpu_profile)  # fmt: skip


class JobControl(JobEvents):
    """Live GPUJobs and the runtime they run in (None until a valid cluster is installed)."""

    def __init__(self, store: Store, backend: Backend) -> None:
        super().__init__(store, backend)
        self.runtime: Runtime | None = None
        self._seen: dict[str, Seen] = {}
        if isinstance(backend, NeedsPayloads):
            backend.resolve_with(self)

    @property
    def scheduler(self) -> Scheduler | None:
        return self.runtime.scheduler if self.runtime is not None else None

    def resolve(self, start: Start) -> Resolved:
        """`start` in names, with its GPUJob as this pass listed it (`Resolver`, for the backend)."""
        assert self.scheduler is not None
        topology = self.scheduler.topology
        nodes = tuple(topology.node_names[i] for i, _ in start.slots)
        seen = self._seen.get(start.job_id)
        status = self._status(start.job_id)
        submitted = epoch(status.submit_time) if status.submit_time else None
        return Resolved(nodes, tuple(topology.switches_spanned(nodes)), seen.obj if seen is not None else None,
                        status.preemptions, submitted, self._share_of(start), self._mig_of(start))  # fmt: skip

    def _share_of(self, start: Start) -> tuple[int, int] | None:
        """(slot, milli) of the shared GPU the scheduler put `start`'s share on (None: whole GPUs, or
        a MIG profile: `_mig_of`): read from its partition's `Shares`."""
        assert self.scheduler is not None
        shares = self.scheduler.partitions[start.partition].shares
        if shares is None:
            return None
        entry = shares.of_job.get(start.job_id)
        if entry is None or (entry[0], entry[1]) in shares.mig:
            return None
        return entry[1], entry[2]

    def _mig_of(self, start: Start) -> tuple[str, int] | None:
        """(profile, slot) of a MIG job's start: the profile its validated GPUJob asks for (the
        scheduler's JobSpec, not the object's raw string) and the MIG-partitioned GPU `Shares` put
        it on (-1: a 7-slice profile, which holds a whole GPU); None: no profile."""
        assert self.scheduler is not None
        job = self.scheduler.jobs.get(start.job_id)
        if job is None or not job.spec.gpu_profile:
            return None
        shares = self.scheduler.partitions[start.partition].shares
        entry = shares.of_job.get(start.job_id) if shares is not None else None
        return job.spec.gpu_profile, entry[1] if entry is not None else -1

    # --- one pass -----------------------------------------------------------------------------

    def reconcile(self, now: float, blocker: str, held: str | None = None) -> None:
        """Bring every GPUJob and the runtime up to date at `now`.

        `blocker`: why there is no valid cluster; `held`: why the backend runs no GPUJobs at all.
        Either way new jobs wait as Pending, saying why.
        """
        seen = self._seen = self._read()
        self._forget(seen, now)
        if held is not None:
            self._hold(seen, "BackendRunsNoJobs", held, now)
        elif self.runtime is None:
            self._hold(seen, "ClusterNotReady", f"no valid cluster: {blocker}", now)
        else:
            self._observe(now)
            self._adopt(seen, now)
            self.runtime.due(now)  # runs that ended complete; wake-ups fire
            self._failures(now)
            self._admit(seen, now)
            self._admit_own(now)
            self.runtime.cycle(now)
        self.flush()

    def next_event(self) -> float | None:
        """When the runtime next has something to do by itself (a run ends, a policy wakes up)."""
        return self.runtime.next_event() if self.runtime is not None else self.backend.next_event()

    def _read(self) -> dict[str, Seen]:
        seen: dict[str, Seen] = {}
        for obj in self.store.list("GPUJob"):
            if is_deleted(obj):
                continue
            self.book.prime(obj)
            try:
                model: GPUJob | None = GPUJob.model_validate({k: v for k, v in obj.items() if k != "status"})
                errors = ""
            except ValidationError as exc:
                model, errors = (
                    None,
                    "; ".join(f"{p.field}: {p.reason}" for p in validation_problems("", exc)),
                )
            seen[job_id_of(obj)] = Seen(job_id_of(obj), obj, model, errors)
        return seen

    # --- the steps of a pass ------------------------------------------------------------------

    def _forget(self, seen: dict[str, Seen], now: float) -> None:
        """Deleted GPUJobs leave the scheduler; a running one stops and frees its GPUs."""
        # A set difference, not a walk of every live job: a busy cluster has thousands (plain Pods too).
        for job_id in sorted(j for j in self.live.keys() - seen.keys() if not is_own_job(j)):
            del self.live[job_id]
            if self.scheduler is not None and job_id in self.scheduler.jobs:
                if self.scheduler.jobs[job_id].phase is Phase.RUNNING:
                    self.backend.stop(job_id)
                self.scheduler.cancel(job_id, now)

    def _hold(self, seen: dict[str, Seen], reason: str, message: str, now: float) -> None:
        """New jobs wait as Pending (their submit time already counts), saying why."""
        for job_id, s in seen.items():
            status = self._status(job_id)
            if status.phase not in ("Pending", "Queued") or s.model is None:
                continue  # finished, or running where nothing can reach it until the cluster is back
            self._set(job_id, now, (SCHEDULED, "False", reason, message),
                      submit_time=status.submit_time or rfc3339(now))  # fmt: skip

    def _observe(self, now: float) -> None:
        """A backend that observes the cluster says which declared nodes take no new work now
        (NotReady, cordoned, ...) and which GPUs other schedulers' pods hold."""
        assert self.scheduler is not None
        if isinstance(self.backend, ObservesCluster):
            self.scheduler.set_out_of_service(self.backend.observe(self.scheduler.cluster, now))
            self.scheduler.set_external_use(self.backend.held_by_others())

    def _adopt(self, seen: dict[str, Seen], now: float) -> None:
        """Running jobs recorded before a restart take their GPUs back before anything is placed."""
        assert self.scheduler is not None
        for job_id, s in seen.items():
            status = self._status(job_id)
            if job_id in self.live or s.model is None or status.phase != "Running" or status.allocation is None:
                continue
            spec = job_spec(job_id, s.model, epoch(status.submit_time) if status.submit_time else now)
            alloc = status.allocation
            since = epoch(alloc.since)
            try:
                index = self.scheduler.topology.node_index
                slots = tuple((index[slot.node], slot.gpus) for slot in alloc.slots)
                if not isinstance(self.backend, AdoptsRuns):
                    raise ValueError(f"backend {self.backend.name} cannot take a run over")
                assert self.runtime is not None
                sized = dataclasses.replace(spec, gpus=sum(g for _, g in slots))
                self.runtime.adopt(sized, slots, since, alloc.run_seconds)  # the run as it was recorded
            except (KeyError, ValueError, OverAllocation) as exc:
                self._evict(job_id, f"its recorded GPUs cannot be taken back ({exc})", now)
                continue
            self.live[job_id] = spec

    def _evict(self, job_id: str, why: str, now: float) -> None:
        """A running job that cannot stay where it runs: stop it; it is submitted again."""
        self.backend.stop(job_id)
        self.live.pop(job_id, None)
        message = f"{why}; stopped and queued again"
        self._set(
            job_id, now, (SCHEDULED, "False", "Evicted", message), phase="Queued", nodes=None, allocation=None
        )
        self._event(job_id, "Evicted", message, "Warning")

    def ended_elsewhere(self, job_id: str, end: float, now: float) -> None:
        if job_id in self._seen:  # a GPUJob still there, whose run the scheduler lost track of
            super().ended_elsewhere(job_id, end, now)

    def _failures(self, now: float) -> None:
        """Runs that failed fail their job; runs that were lost queue it again."""
        assert self.scheduler is not None
        for failure in self.backend.failures(now) if isinstance(self.backend, ReportsFailures) else ():
            state = self.scheduler.jobs.get(failure.job_id)
            if state is None or state.phase is not Phase.RUNNING:
                continue
            if failure.retry:
                self.scheduler.abort_start(failure.job_id, now)
                message = f"{failure.message}; queued again"
                self._set(failure.job_id, now, (SCHEDULED, "False", failure.reason, message),
                          phase="Queued", nodes=None, allocation=None)  # fmt: skip
                self._event(failure.job_id, failure.reason, message, "Warning")
            else:
                self.fail(failure.job_id, failure.reason, failure.message, now)

    def _admit(self, seen: dict[str, Seen], now: float) -> None:
        """Submit every job the scheduler does not know yet, oldest first."""
        waiting = []
        for job_id, s in seen.items():
            if job_id in self.live or self._phase(job_id) in TERMINAL:
                continue
            if s.model is None:
                self.reject(job_id, "Invalid", s.errors, now)
                continue
            submitted = self._status(job_id).submit_time
            submit = epoch(submitted) if submitted else now
            created = Body(s.obj).creation_timestamp
            waiting.append((submit, created, job_id, job_spec(job_id, s.model, submit)))
        for _, _, _, spec in sorted(waiting, key=lambda w: w[:3]):
            self.submit(spec, now)

    def _admit_own(self, now: float) -> None:
        """A backend's own jobs (plain Pods, no GPUJob): bound ones accounted, new ones queued."""
        assert self.scheduler is not None
        if not isinstance(self.backend, BringsOwnJobs):
            return
        found = self.backend.own_jobs(now)
        for job_id in found.gone:
            self.live.pop(job_id, None)
            if job_id in self.scheduler.jobs:
                self.scheduler.cancel(job_id, now)
        for spec, slots, since in found.running:
            try:
                index = self.scheduler.topology.node_index
                self.scheduler.adopt(spec, tuple((index[n], g) for n, g in slots), since)
                self.live[spec.job_id] = spec
            except (KeyError, ValueError, OverAllocation) as exc:  # not on our nodes: not ours to count
                self._event(
                    spec.job_id, "NotAccounted", f"bound where gputwin cannot account it: {exc}", "Warning"
                )
        for spec in found.new:
            self.submit(spec, now)

    def submit(self, spec: JobSpec, now: float) -> None:
        """Hand one job to the runtime; it is Queued (`submitted`) unless the decision rejects it."""
        assert self.runtime is not None
        self.runtime.submit(spec, now)

    # --- a new cluster ------------------------------------------------------------------------

    def install(self, scheduler: Scheduler, now: float) -> None:
        """Switch to a scheduler for a changed cluster, keeping every live job.

        Running jobs keep their GPUs where the new cluster still allows it (else they are evicted
        and queued again); queued jobs are submitted again in their original order. The backend
        keeps its runs; the policies' wake-ups start afresh.
        """
        old, self.runtime = self.scheduler, Runtime(scheduler, self.backend, self)
        if old is None:
            return
        for job_id, spec in list(self.live.items()):
            state = old.jobs.get(job_id)
            if state is not None and state.phase is Phase.RUNNING:
                self._carry(old, state, spec, now)
            else:
                self.submit(spec, now)
        self.flush()

    def _carry(self, old: Scheduler, state: JobState, spec: JobSpec, now: float) -> None:
        assert self.scheduler is not None
        names = [old.topology.node_names[i] for i, _ in state.slots]
        try:
            slots = tuple((self.scheduler.topology.node_index[n], g) for n, (_, g) in zip(names, state.slots))
            self.scheduler.adopt(dataclasses.replace(spec, gpus=state.gpus), slots, state.seg_start)
        except (KeyError, ValueError, OverAllocation):
            self._evict(
                spec.job_id,
                f"the changed cluster no longer lets it run on {hostlist.collect_hostlist(names)}",
                now,
            )
            self.submit(spec, now)

"""GPUJobs through the scheduler: submit, adopt after a restart, carry out decisions, write statuses.

`JobControl` is the GPUJob half of `gputwin.operator.controller.Controller`. It owns the live
jobs (queued or running, in submit order), feeds the core (`submit`, `adopt`, `complete`,
`cancel`, `run_cycle`) and carries each `Decision` out through the backend, one status and event
per transition. Events are posted before the statuses they announce (`_flush`), each keyed by the
transition it reports (`completed`, `scheduled-<preemptions>`, ...): a crash between the two
repeats the pass after the restart, and the repeated event, having the same key, is not posted
twice. So every transition gets exactly one event, and a status never runs ahead of its event.

What survives a restart is what the GPUJob objects say: a Running job's `status.allocation`
(exact GPUs per node, since when, for how long) is adopted into the new scheduler's ledger and
re-announced to the backend (`Backend.adopt`), so nothing runs twice; Queued and Pending jobs
are submitted again in their original order, `(submitTime, creationTimestamp, namespace/name)`.

A backend on a real cluster (`LiveBackend`, the Kubernetes one) tells more: `observe(cluster,
now)` names nodes to take out of service (`Scheduler.set_out_of_service`) and `held_by_others()`
the GPUs other schedulers' pods hold (`Scheduler.set_external_use`); `failures(now)` reports
runs that failed (the GPUJob goes Failed) or were lost (queued again); `pod_jobs`/`start_batch`/
`pod_event` schedule plain Pods, whose job ids start with `pod:` and which have no GPUJob status
(nothing is read or written for them); `preempted` counts a preemption. A start that raises
`StartRefused` fails the job instead of retrying it; `BackingOff` retries it later, silently.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import hostlist
from pydantic import ValidationError

from gputwin.api.bodies import Body, Obj
from gputwin.api.problems import validation_problems
from gputwin.api.status import LATEST_TIME, GPUJobStatus
from gputwin.api.v1alpha1 import GPUJob
from gputwin.core.decision import Decision, Start
from gputwin.core.ledger import OverAllocation
from gputwin.core.model import JobSpec
from gputwin.core.scheduler import Scheduler
from gputwin.core.state import JobState, Phase
from gputwin.operator.backends import Backend, BackingOff, LiveBackend, StartRefused, is_pod_job
from gputwin.operator.statuses import StatusBook, condition, epoch, rfc3339, round_seconds, updated
from gputwin.operator.store import Store, is_deleted, name_of, namespace_of

TERMINAL = frozenset({"Succeeded", "Failed", "Rejected"})
SCHEDULED, COMPLETE = "Scheduled", "Complete"


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
                   task_type=s.task_type, user=s.user, name=s.job_name, priority=s.priority)  # fmt: skip


class JobControl:
    """Live GPUJobs, the scheduler they are in, and the wake-ups its policies asked for."""

    def __init__(self, store: Store, backend: Backend) -> None:
        self.store, self.backend = store, backend
        self.hooks = backend if isinstance(backend, LiveBackend) else None  # a real cluster's extras
        self.scheduler: Scheduler | None = None
        self.live: dict[str, JobSpec] = {}  # queued or running, in submit order
        self.wakes: dict[str, float] = {}  # partition -> when its cycle must run again
        self.book = StatusBook(store, "GPUJob", GPUJobStatus)
        # (job id, reason, message, type, transition key): posted before the statuses are written
        self._events: list[tuple[str, str, str, str, str | None]] = []

    # --- one pass -----------------------------------------------------------------------------

    def reconcile(self, now: float, blocker: str, held: str | None = None) -> None:
        """Bring every GPUJob and the scheduler up to date at `now`.

        `blocker`: why there is no valid cluster; `held`: why the backend runs no GPUJobs at all.
        Either way new jobs wait as Pending, saying why.
        """
        seen = self._read()
        self._forget(seen, now)
        if held is not None:
            self._hold(seen, "BackendRunsNoJobs", held, now)
        elif self.scheduler is None:
            self._hold(seen, "ClusterNotReady", f"no valid cluster: {blocker}", now)
        else:
            self._observe(now)
            self._fire_wakes(now)
            self._adopt(seen, now)
            self._finish(seen, now)
            self._admit(seen, now)
            self._admit_pods(now)
            self.apply(self.scheduler.run_cycle(now), now)
        self._flush()

    def _flush(self) -> None:
        """Post this pass's events (keyed, so a repeat after a crash is dropped), then write its statuses."""
        events, self._events = self._events, []
        for job_id, reason, message, type, key in events:
            namespace, name = job_id.split("/", 1)
            self.store.event(
                "GPUJob", namespace, name, reason, message, "Warning" if type == "Warning" else "Normal", key
            )
        self.book.flush()

    def next_wake(self) -> float | None:
        return min(self.wakes.values(), default=None)

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

    def _phase(self, job_id: str) -> str:
        return self._status(job_id).phase

    def _status(self, job_id: str) -> GPUJobStatus:
        if is_pod_job(job_id):
            return GPUJobStatus()  # a plain Pod has no GPUJob status: nothing is read or written
        namespace, name = job_id.split("/", 1)
        return self.book.get(namespace, name)

    def _set(
        self, job_id: str, now: float, cond: tuple[str, str, str, str] | None = None, **changes: Any
    ) -> None:
        """Record the job's next status: field changes plus (type, status, reason, message)."""
        if is_pod_job(job_id):
            return
        namespace, name = job_id.split("/", 1)
        status = self.book.get(namespace, name)
        generation = self.book.generation(namespace, name)
        if cond is not None:
            changes["conditions"] = condition(status.conditions, *cond, now=now, generation=generation)
        self.book.set(namespace, name, updated(status, observed_generation=generation, **changes))

    # --- the steps of a pass ------------------------------------------------------------------

    def _forget(self, seen: dict[str, Seen], now: float) -> None:
        """Deleted GPUJobs leave the scheduler; a running one stops and frees its GPUs."""
        # A set difference, not a walk of every live job: a busy cluster has thousands (plain Pods too).
        for job_id in sorted(j for j in self.live.keys() - seen.keys() if not is_pod_job(j)):
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

    def _fire_wakes(self, now: float) -> None:
        assert self.scheduler is not None
        for partition, when in list(self.wakes.items()):
            if when <= now:
                del self.wakes[partition]
                self.scheduler.wake(partition)

    def _adopt(self, seen: dict[str, Seen], now: float) -> None:
        """Running jobs recorded before a restart take their GPUs back before anything is placed."""
        assert self.scheduler is not None
        for job_id, s in seen.items():
            status = self._status(job_id)
            if (
                job_id in self.live
                or s.model is None
                or status.phase != "Running"
                or status.allocation is None
            ):
                continue
            spec = job_spec(job_id, s.model, epoch(status.submit_time) if status.submit_time else now)
            alloc = status.allocation
            names = [slot.node for slot in alloc.slots]
            since = epoch(alloc.since)
            try:
                slots = tuple(
                    (self.scheduler.topology.node_index[n], slot.gpus) for n, slot in zip(names, alloc.slots)
                )
                sized = dataclasses.replace(spec, gpus=sum(g for _, g in slots))
                state = self.scheduler.adopt(sized, slots, since)
            except (KeyError, ValueError, OverAllocation) as exc:
                self._evict(job_id, f"its recorded GPUs cannot be taken back ({exc})", now)
                continue
            self.live[job_id] = spec
            start = Start(job_id, state.partition, slots, alloc.run_seconds, state.overhead, state.leaves,
                          state.tiers, state.generation)  # fmt: skip
            self.backend.adopt(job_id, start, names, since)

    def _evict(self, job_id: str, why: str, now: float) -> None:
        """A running job that cannot stay where it runs: stop it; it is submitted again."""
        self.backend.stop(job_id)
        self.live.pop(job_id, None)
        message = f"{why}; stopped and queued again"
        self._set(
            job_id, now, (SCHEDULED, "False", "Evicted", message), phase="Queued", nodes=None, allocation=None
        )
        self._event(job_id, "Evicted", message, "Warning")

    def _finish(self, seen: dict[str, Seen], now: float) -> None:
        assert self.scheduler is not None
        for job_id in self.backend.finished(now):
            state = self.scheduler.jobs.get(job_id)
            if state is not None and state.phase is Phase.RUNNING:
                end = self._ended(job_id, now)
                self.live.pop(job_id, None)
                self.scheduler.complete(job_id, end)
                self._succeeded(job_id, end, now)
            elif job_id in seen and self._phase(job_id) == "Running":
                self._succeeded(job_id, self._ended(job_id, now), now)  # the backend is the truth
        for failure in self.hooks.failures(now) if self.hooks is not None else ():  # failed or lost runs
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
                self._fail(failure.job_id, failure.reason, failure.message, now)

    def _fail(self, job_id: str, reason: str, message: str, now: float) -> None:
        """The job cannot succeed (its pod failed, its pod template is invalid): Failed, GPUs freed."""
        assert self.scheduler is not None
        if job_id in self.scheduler.jobs:
            self.scheduler.cancel(job_id, now)
        self.live.pop(job_id, None)
        self._set(job_id, now, (COMPLETE, "False", reason, message),
                  phase="Failed", end_time=rfc3339(now), allocation=None)  # fmt: skip
        self._event(job_id, "Failed", message, "Warning", key="failed")

    def _observe(self, now: float) -> None:
        """A live backend says which declared nodes take no new work now (NotReady, cordoned, ...)."""
        assert self.scheduler is not None
        if self.hooks is not None:
            self.scheduler.set_out_of_service(self.hooks.observe(self.scheduler.cluster, now))
            self.scheduler.set_external_use(self.hooks.held_by_others())  # other schedulers' pods

    def _admit_pods(self, now: float) -> None:
        """Plain Pods a live backend schedules (no GPUJob): bound ones accounted, new ones queued."""
        assert self.scheduler is not None
        if self.hooks is None:
            return
        found = self.hooks.pod_jobs(now)
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

    def _ended(self, job_id: str, now: float) -> float:
        """When the run really ended: a simulated run ends `runSeconds` after `since`, even if the
        operator was down then and only sees it now; other backends report runs as they end."""
        allocation = self._status(job_id).allocation
        if self.backend.name != "sim" or allocation is None:
            return now
        return min(now, epoch(allocation.since) + allocation.run_seconds)

    def _succeeded(self, job_id: str, end: float, now: float) -> None:
        # From the status, not the scheduler's memory: the same words before and after a restart.
        status = self._status(job_id)
        message = "the run ended"
        if status.submit_time and status.start_time:
            submitted, started = epoch(status.submit_time), epoch(status.start_time)
            message = (
                f"ended {end - submitted:,.0f} s after submission, "
                f"{started - submitted:,.0f} s of them before it first started"
            )
        self._set(job_id, now, (COMPLETE, "True", "Succeeded", message),
                  phase="Succeeded", end_time=rfc3339(end), allocation=None)  # fmt: skip
        self._event(job_id, "Completed", message, key="completed")

    def _admit(self, seen: dict[str, Seen], now: float) -> None:
        """Submit every job the scheduler does not know yet, oldest first."""
        waiting = []
        for job_id, s in seen.items():
            if job_id in self.live or self._phase(job_id) in TERMINAL:
                continue
            if s.model is None:
                self._reject(job_id, "Invalid", s.errors, now)
                continue
            submitted = self._status(job_id).submit_time
            submit = epoch(submitted) if submitted else now
            created = Body(s.obj).creation_timestamp
            waiting.append((submit, created, job_id, job_spec(job_id, s.model, submit)))
        for _, _, _, spec in sorted(waiting, key=lambda w: w[:3]):
            self.submit(spec, now)

    def submit(self, spec: JobSpec, now: float) -> None:
        """Hand one job to the scheduler; it is Queued unless the decision rejects it."""
        assert self.scheduler is not None
        # Queued since it was submitted, even when submitted again after a restart or a cluster
        # change: waits (topology-aware maxWaitSeconds, history) count from the real submission.
        decision = self.scheduler.submit(spec, min(now, spec.submit))
        state = self.scheduler.jobs.get(spec.job_id)
        if state is not None:
            self.live[spec.job_id] = spec
            self._set(spec.job_id, now, (SCHEDULED, "False", "Queued", f"waiting for {state.gpus} GPUs"),
                      phase="Queued", partition=state.partition, gpus=state.gpus,
                      submit_time=rfc3339(spec.submit))  # fmt: skip
        self.apply(decision, now)

    # --- carrying out decisions ---------------------------------------------------------------

    def apply(self, decision: Decision, now: float) -> None:
        for reject in decision.rejects:
            self._reject(reject.job_id, "Unschedulable", reject.reason, now)
        for resize in decision.resizes:
            message = f"GPU sizing gives it {resize.gpus} GPUs instead of the {resize.requested} requested"
            self._event(resize.job_id, "Resized", message)
        for preempt in decision.preempts:
            self.backend.stop(preempt.job_id)
            if self.hooks is not None:  # counted for /metrics
                self.hooks.preempted(preempt.job_id, preempt.partition)
            cost = preempt.checkpoint_seconds
            message = f"preempted in partition {preempt.partition}; checkpoint and restore cost {cost:g} s"
            preemptions = self._status(preempt.job_id).preemptions + 1
            self._set(preempt.job_id, now, (SCHEDULED, "False", "Preempted", message),
                      phase="Queued", nodes=None, allocation=None, preemptions=preemptions)  # fmt: skip
            self._event(preempt.job_id, "Preempted", message, key=f"preempted-{preemptions}")
        hooks = self.hooks  # plain Pods: bound together, no statuses
        pods = [s for s in decision.starts if is_pod_job(s.job_id)] if hooks is not None else []
        for start in decision.starts:
            if not (pods and is_pod_job(start.job_id)):
                self._start(start, now)
        if pods and hooks is not None:
            assert self.scheduler is not None
            names = [[self.scheduler.topology.node_names[i] for i, _ in s.slots] for s in pods]
            for job_id, error in hooks.start_batch(list(zip(pods, names)), now):
                if error is not None:
                    self.scheduler.abort_start(job_id, now)
                    self._event(job_id, "FailedStart", error, "Warning")
        for when, partition in decision.wakes:
            if when > now and when < self.wakes.get(partition, float("inf")):
                self.wakes[partition] = when

    def _reject(self, job_id: str, reason: str, message: str, now: float) -> None:
        self.live.pop(job_id, None)
        self._set(job_id, now, (SCHEDULED, "False", reason, message), phase="Rejected", allocation=None)
        self._event(job_id, "Rejected", message, "Warning", key="rejected")

    def _start(self, start: Start, now: float) -> None:
        assert self.scheduler is not None
        job_id = start.job_id
        names = [self.scheduler.topology.node_names[i] for i, _ in start.slots]
        if self.backend.name == "sim" and not now + start.run_seconds <= LATEST_TIME:
            # A simulated run that would end where no clock can show it fails now, rather than
            # wedge every later pass at its end time.
            self.scheduler.abort_start(job_id, now)
            message = (f"spec.durationSeconds: a run of {start.run_seconds:.4g} s would end after "
                       f"{rfc3339(LATEST_TIME)}, the latest time a status can show")  # fmt: skip
            self._fail(job_id, "InvalidDuration", message, now)
            return
        try:
            self.backend.start(job_id, start, names, now)
        # The backend talks to the outside world: whatever fails there, the GPUs go back.
        except Exception as exc:  # noqa: BLE001
            self.scheduler.abort_start(job_id, now)
            if isinstance(exc, StartRefused):  # retrying cannot help (an invalid pod template)
                self._fail(job_id, "FailedStart", f"backend {self.backend.name}: {exc}", now)
            elif not isinstance(exc, BackingOff):  # a retry held back was reported when it failed
                self._event(job_id, "FailedStart", f"backend {self.backend.name}: {exc}", "Warning")
            return
        gpus = sum(g for _, g in start.slots)
        nodes = hostlist.collect_hostlist(names)
        allocation = {"slots": [{"node": n, "gpus": g} for n, (_, g) in zip(names, start.slots)],
                      "since": rfc3339(now), "run_seconds": round_seconds(start.run_seconds)}  # fmt: skip
        spread = f"{start.leaves} leaf switch{'es' if start.leaves != 1 else ''}"
        if start.overhead:
            spread += f", +{start.overhead:.0%} communication overhead"
        plural = "s" if gpus != 1 else ""
        message = f"started in partition {start.partition} on {nodes} ({gpus} GPU{plural}, {spread})"
        first = self._status(job_id).start_time or rfc3339(now)  # a resumed job keeps its first start
        self._set(job_id, now, (SCHEDULED, "True", "Started", message),
                  phase="Running", partition=start.partition, nodes=nodes, gpus=gpus, switches=start.leaves,
                  overhead=round(start.overhead, 6), start_time=first, allocation=allocation)  # fmt: skip
        self._event(job_id, "Scheduled", message, key=f"scheduled-{self._status(job_id).preemptions}")

    def _event(
        self, job_id: str, reason: str, message: str, type: str = "Normal", key: str | None = None
    ) -> None:
        """Queue an event; `_flush` posts it before the statuses of the pass are written."""
        if is_pod_job(job_id):  # a plain Pod's job: the backend posts it on the pod, if at all
            if self.hooks is not None:
                self.hooks.pod_event(job_id, reason, message, type)
            return
        self._events.append((job_id, reason, message, type, key))

    # --- a new cluster ------------------------------------------------------------------------

    def install(self, scheduler: Scheduler, now: float) -> None:
        """Switch to a scheduler for a changed cluster, keeping every live job.

        Running jobs keep their GPUs where the new cluster still allows it (else they are evicted
        and queued again); queued jobs are submitted again in their original order.
        """
        old, self.scheduler = self.scheduler, scheduler
        self.wakes.clear()
        if old is None:
            return
        for job_id, spec in list(self.live.items()):
            state = old.jobs.get(job_id)
            if state is not None and state.phase is Phase.RUNNING:
                self._carry(old, state, spec, now)
            else:
                self.submit(spec, now)
        self._flush()

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

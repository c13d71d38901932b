"""What GPUJobs say about themselves: one status and one event per transition the runtime reports.

`JobEvents` is the runtime's listener (`gputwin.runtime.loop.Transitions`) for live GPUJobs:
queued, started, preempted, completed, rejected, resized, failed to start. Events are posted
before the statuses they announce (`flush`), each keyed by the transition it reports
(`completed`, `scheduled-<preemptions>`, ...): a crash between the two repeats the pass after the
restart, and the repeated event, having the same key, is not posted twice. So every transition
gets exactly one event, and a status never runs ahead of its event.

A backend's own jobs (plain Pods, ids `pod:...`) have no GPUJob: nothing is read or written for
them, and their events go to the backend (`BringsOwnJobs.own_job_event`), which posts them on the pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import hostlist

from gputwin.api.status import GPUJobStatus
from gputwin.core.decision import Preempt, Reject, Resize, Start
from gputwin.core.model import JobSpec
from gputwin.core.scheduler import Scheduler
from gputwin.core.state import JobState
from gputwin.operator.backends import Backend, BackingOff, BringsOwnJobs, CountsPreemptions, StartRefused, is_own_job
from gputwin.operator.statuses import StatusBook, condition, epoch, rfc3339, round_seconds, updated
from gputwin.operator.store import Store

SCHEDULED, COMPLETE = "Scheduled", "Complete"


class JobEvents:
    """Statuses and events of live GPUJobs; `live` holds the jobs queued or running, in submit order."""

    def __init__(self, store: Store, backend: Backend) -> None:
        self.store, self.backend = store, backend
        self.live: dict[str, JobSpec] = {}
        self.book = StatusBook(store, "GPUJob", GPUJobStatus)
        # (job id, reason, message, type, transition key): posted before the statuses are written
        self._events: list[tuple[str, str, str, str, str | None]] = []

    @property
    def scheduler(self) -> Scheduler | None:
        """The scheduler the jobs are in (JobControl's runtime's)."""
        return None

    # --- the runtime's transitions (gputwin.runtime.loop.Transitions) ------------------------------

    def submitted(self, specs: Sequence[JobSpec], now: float) -> None:
        for spec in specs:
            self._queued(spec, now)

    def _queued(self, spec: JobSpec, now: float) -> None:
        scheduler = self.scheduler
        state = scheduler.jobs.get(spec.job_id) if scheduler is not None else None
        if scheduler is None or state is None:
            return  # rejected: `rejected` says so
        self.live[spec.job_id] = spec
        self._set(spec.job_id, now, (SCHEDULED, "False", "Queued", waiting_message(scheduler, state)),
                  phase="Queued", partition=state.partition, gpus=state.gpus,
                  submit_time=rfc3339(spec.submit))  # fmt: skip

    def started(self, starts: Sequence[Start], now: float) -> None:
        for start in starts:
            self._started(start, now)

    def _started(self, start: Start, now: float) -> None:
        assert self.scheduler is not None
        job_id = start.job_id
        names = [self.scheduler.topology.node_names[i] for i, _ in start.slots]
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

    def start_failed(self, start: Start, error: Exception, now: float) -> None:
        if isinstance(error, BackingOff):
            return  # a retry held back: the failure it waits out was reported when it happened
        if is_own_job(start.job_id):
            self._event(start.job_id, "FailedStart", str(error), "Warning")
        elif isinstance(error, StartRefused):  # retrying cannot help (an invalid pod template, ...)
            message = str(error) if error.reason != "FailedStart" else f"backend {self.backend.name}: {error}"
            self.fail(start.job_id, error.reason, message, now)
        else:
            self._event(start.job_id, "FailedStart", f"backend {self.backend.name}: {error}", "Warning")

    def preempted(self, preempt: Preempt, now: float) -> None:
        if isinstance(self.backend, CountsPreemptions):  # for /metrics
            self.backend.preempted(preempt.job_id, preempt.partition)
        cost = preempt.checkpoint_seconds
        message = f"preempted in partition {preempt.partition}; checkpoint and restore cost {cost:g} s"
        preemptions = self._status(preempt.job_id).preemptions + 1
        self._set(preempt.job_id, now, (SCHEDULED, "False", "Preempted", message),
                  phase="Queued", nodes=None, allocation=None, preemptions=preemptions)  # fmt: skip
        self._event(preempt.job_id, "Preempted", message, key=f"preempted-{preemptions}")

    def completed(self, ends: Sequence[tuple[JobState, float]], now: float) -> None:
        for state, end in ends:
            self.live.pop(state.job_id, None)
            self.succeeded(state.job_id, end, now)

    def ended_elsewhere(self, job_id: str, end: float, now: float) -> None:
        if self._phase(job_id) == "Running":  # the backend is the truth
            self.succeeded(job_id, end, now)

    def rejected(self, reject: Reject, now: float) -> None:
        self.reject(reject.job_id, "Unschedulable", reject.reason, now)

    def resized(self, resize: Resize, now: float) -> None:
        message = f"GPU sizing gives it {resize.gpus} GPUs instead of the {resize.requested} requested"
        self._event(resize.job_id, "Resized", message)

    # --- terminal transitions ------------------------------------------------------------------------

    def succeeded(self, job_id: str, end: float, now: float) -> None:
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

    def fail(self, job_id: str, reason: str, message: str, now: float) -> None:
        """The job cannot succeed (its pod failed, its pod template is invalid): Failed, GPUs freed."""
        if self.scheduler is not None and job_id in self.scheduler.jobs:
            self.scheduler.cancel(job_id, now)
        self.live.pop(job_id, None)
        self._set(job_id, now, (COMPLETE, "False", reason, message),
                  phase="Failed", end_time=rfc3339(now), allocation=None)  # fmt: skip
        self._event(job_id, "Failed", message, "Warning", key="failed")

    def reject(self, job_id: str, reason: str, message: str, now: float) -> None:
        self.live.pop(job_id, None)
        self._set(job_id, now, (SCHEDULED, "False", reason, message), phase="Rejected", allocation=None)
        self._event(job_id, "Rejected", message, "Warning", key="rejected")

    # --- statuses and events -------------------------------------------------------------------------

    def flush(self) -> None:
        """Post this pass's events (keyed, so a repeat after a crash is dropped), then write its statuses."""
        events, self._events = self._events, []
        for job_id, reason, message, type, key in events:
            namespace, name = job_id.split("/", 1)
            self.store.event(
                "GPUJob", namespace, name, reason, message, "Warning" if type == "Warning" else "Normal", key
            )
        self.book.flush()

    def _phase(self, job_id: str) -> str:
        return self._status(job_id).phase

    def _status(self, job_id: str) -> GPUJobStatus:
        if is_own_job(job_id):
            return GPUJobStatus()  # a plain Pod has no GPUJob status: nothing is read or written
        namespace, name = job_id.split("/", 1)
        return self.book.get(namespace, name)

    def _set(
        self, job_id: str, now: float, cond: tuple[str, str, str, str] | None = None, **changes: Any
    ) -> None:
        """Record the job's next status: field changes plus (type, status, reason, message)."""
        if is_own_job(job_id):
            return
        namespace, name = job_id.split("/", 1)
        status = self.book.get(namespace, name)
        generation = self.book.generation(namespace, name)
        if cond is not None:
            changes["conditions"] = condition(status.conditions, *cond, now=now, generation=generation)
        self.book.set(namespace, name, updated(status, observed_generation=generation, **changes))

    def _event(
        self, job_id: str, reason: str, message: str, type: str = "Normal", key: str | None = None
    ) -> None:
        """Queue an event; `flush` posts it before the statuses of the pass are written."""
        if is_own_job(job_id):  # a plain Pod's job: the backend posts it on the pod, if at all
            if isinstance(self.backend, BringsOwnJobs):
                self.backend.own_job_event(job_id, reason, message, type)
            return
        self._events.append((job_id, reason, message, type, key))


def waiting_message(scheduler: Scheduler, state: JobState) -> str:
    """A queued job's reason: its GPUs and, where the partition has quotas, the tenant it counts as.

    On Kubernetes a user cannot see which quota entry took their job (users map to tenants in the
    GPUPartition), and a job that waits for quota while GPUs are free would otherwise only say it
    waits for GPUs."""
    message = f"waiting for {state.gpus} GPUs"
    quota = scheduler.partitions[state.partition].quota
    if quota is None:
        return message
    tenant = quota.tenant_of(state)
    cohort = quota.cohort[tenant]
    return f"{message} as tenant {tenant} (guaranteed {quota.nominal[tenant]}" + (
        f", cohort {cohort})" if cohort else ")")


__all__ = ["COMPLETE", "SCHEDULED", "JobEvents", "waiting_message"]

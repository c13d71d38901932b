"""Plain Pods with `schedulerName: gputwin` (no GPUJob) as jobs of the Kubernetes backend.

`PlainPods` is the plain-Pod half of `gputwin.adapters.kube.backend.KubernetesBackend`, which
hands it the pass's view of pods and the runs it tracks (`Run`, `Runs`: `gputwin.adapters.kube.view`);
the pod helpers both halves use are here.

An unbound pod with `schedulerName: gputwin` is a job `pod:<ns>/<name>` routed by its label
`gputwin.io/task-type` (or that annotation; neither: task type "default"), with `nvidia.com/gpu`
limits as its GPUs and an optional annotation `gputwin.io/duration-seconds` for duration-aware
policies. It is bound as it is (one pod cannot span nodes: a placement over several nodes is
refused and retried later). No status is written for it.

Binding is asynchronous, as kube-scheduler's binding cycle is: the pass that decides hands the
binds to a `BindPool` (one API client per thread) and goes on; the pod counts as running (its
GPUs taken) from that moment. A bind that fails is reported by the next pass as a `Failure`
with `retry=True` (reason `FailedStart`): JobControl gives the GPUs back, queues the pod again
and posts the Warning. The pod's `Scheduled` event is posted after its bind by the pool's event
poster, which drops events when too many wait (as kube-scheduler's event broadcaster does: binds
come first). The copy may lag a bind by a moment: a pod bound by us that still shows unbound is
not queued again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gputwin.adapters.kube.binds import BindPool, BindResult
from gputwin.adapters.kube.manifests import JOB_ID, gpus_of
from gputwin.adapters.kube.pods import PodApi
from gputwin.api.bodies import EMPTY, Body, Key, Obj, Pod, key_of
from gputwin.api.status import epoch_seconds
from gputwin.core.decision import Start
from gputwin.core.model import JobSpec
from gputwin.runtime.capabilities import POD_PREFIX, Failure, OwnJobs
from gputwin.adapters.kube.trace import BindTrace
from gputwin.adapters.kube.view import Run, Runs

TASK_TYPE = "gputwin.io/task-type"
DURATION = "gputwin.io/duration-seconds"
DEFAULT_TASK_TYPE = "default"
DONE = ("Succeeded", "Failed")


class Metrics(Protocol):
    """What the backend reports to a metrics registry: a seam the operator wires its Prometheus
    registry into (`gputwin.operator.metrics.OperatorMetricsHooks`), and tests their own."""

    def binding_error(self, partition: str) -> None: ...

    def preemption(self, partition: str) -> None: ...

    def schedule_latency(self, seconds: float) -> None: ...

    def event_dropped(self) -> None:
        """A pod event was not posted, the poster being behind."""
        ...


def phase_of(pod: Obj) -> str:
    """`Pod(pod).phase or "Pending"`, read directly: called per pod in the reconcile pass's loops."""
    return str((pod.get("status") or EMPTY).get("phase") or "Pending")


def deleting(pod: Obj) -> bool:
    """`Body(pod).deleting`, read directly: called per pod in the reconcile pass's loops."""
    return bool((pod.get("metadata") or EMPTY).get("deletionTimestamp"))


def job_id_of(pod: Obj) -> str | None:
    """The GPUJob a pod belongs to (its `gputwin.io/job-id` annotation), None for a plain Pod."""
    found = Body(pod).annotations.get(JOB_ID)
    return str(found) if found else None


def epoch(timestamp: object, default: float) -> float:
    try:
        return epoch_seconds(str(timestamp).replace("Z", "+00:00")) if timestamp else default
    except ValueError:
        return default


def pod_key(job_id: str) -> Key:
    namespace, name = job_id[len(POD_PREFIX) :].split("/", 1)
    return (namespace, name)


@dataclass(frozen=True, slots=True)
class _Bind:
    """A bind handed to the pool: whose, and the times the trace and the latency metric need."""

    job_id: str
    partition: str
    created: float  # the pod's creation (epoch seconds)
    now: float  # the deciding pass's time (epoch seconds)
    decided: float  # monotonic: handed to the pool
    snapshot: float  # monotonic: the deciding pass read its snapshot


class PlainPods:
    """Queues, binds and reports plain Pods; shares the backend's view and runs."""

    def __init__(
        self,
        api: PodApi,
        *,
        binder: Callable[[], BindPool] | None = None,
        metrics: Metrics | None = None,
        events: bool = True,
        trace: BindTrace | None = None,
    ) -> None:
        self.api, self.metrics, self.events, self.trace = api, metrics, events, trace
        self._make_binder = binder
        self._binder: BindPool | None = None
        self.queued: set[str] = set()  # jobs handed to the scheduler, not yet bound
        self._unplaceable: set[str] = set()  # larger than any node (reported once)
        self.snapshot_at = 0.0  # when the pass read its snapshot (for the trace)
        self._binding: dict[Key, _Bind] = {}  # binds handed to the pool, not yet collected
        self._done: list[BindResult] = []  # made by the pool's threads, collected by the next pass
        self._lock = threading.Lock()

    def jobs(self, pods: Mapping[Key, Obj], runs: Runs, largest: int, now: float,
             changed: Iterable[Key] | None = None) -> OwnJobs:  # fmt: skip
        """Jobs of `pods`: the Pods with `schedulerName: gputwin` and no GPUJob, as of this pass (the
        backend's view). `changed`: the pods (any) that changed since the last call; only those are
        looked at. None: every pod, and every queued job (a full pass)."""
        if changed is None:
            keys: Iterable[Key] = [*pods, *(k for k in map(pod_key, sorted(self.queued)) if k not in pods)]
        else:
            keys = changed
        new: list[JobSpec] = []
        running = []
        gone: list[str] = []
        queued = self.queued
        for key in keys:
            job_id = f"{POD_PREFIX}{key[0]}/{key[1]}"
            is_queued = job_id in queued
            if job_id in runs and not is_queued:
                continue  # bound by us; the view may not show the binding yet (tested first: most pods)
            pod = pods.get(key)
            # direct lookups, not a Pod view: this loop sees every new pod of a burst (a view: ~3x slower)
            if pod is None or deleting(pod) or phase_of(pod) in DONE:
                if is_queued:
                    gone.append(job_id)  # ended or deleted before we bound it
                continue
            node = str((pod.get("spec") or EMPTY).get("nodeName") or "")
            if node:
                if is_queued:
                    gone.append(job_id)  # queued here but bound by someone else: gone from our queue
                elif job_id not in runs:
                    spec = pod_spec(job_id, pod, now)  # bound before a restart: account it again
                    since = epoch(Pod(pod).status.get("startTime"), now)
                    running.append((spec, ((node, spec.gpus),), since))
                    runs.add(job_id, Run(key[0], (key[1],), ""))
                continue
            if not is_queued:
                queued.add(job_id)
                spec = pod_spec(job_id, pod, now)
                if spec.gpus > largest:  # one pod, one node: it can never be placed
                    if job_id not in self._unplaceable:
                        self._unplaceable.add(job_id)
                        self.event(pods, job_id, "Rejected", f"asks for {spec.gpus} GPUs; no node has that many",
                                   "Warning")  # fmt: skip
                    continue
                new.append(spec)
        queued.difference_update(gone)
        return OwnJobs(tuple(new), tuple(running), tuple(sorted(gone)))

    def start_batch(self, starts: Sequence[tuple[Start, Sequence[str]]], pods: Mapping[Key, Obj],
                    runs: Runs, now: float) -> list[tuple[str, str | None]]:  # fmt: skip
        """Hand plain Pods (one node each) to the bind pool; (job id, error or None) each. A bind
        that fails later is reported by `collect`."""
        decided = BindTrace.now()
        results: list[tuple[str, str | None]] = []
        binds: list[tuple[str, str, str]] = []
        for start, names in starts:
            key = pod_key(start.job_id)
            if len(names) != 1:
                results.append((start.job_id, f"a pod cannot span {len(names)} nodes; waiting for one node"))
                continue
            created = Body(pods.get(key)).creation_timestamp
            with self._lock:
                self._binding[key] = _Bind(start.job_id, start.partition, epoch(created, now), now, decided,
                                           self.snapshot_at)  # fmt: skip
            binds.append((*key, names[0]))
            self.queued.discard(start.job_id)
            runs.add(start.job_id, Run(key[0], (key[1],), start.partition))  # taken now, as if bound
            results.append((start.job_id, None))
        if binds:
            self._bind(binds, pods)
        return results

    def collect(self, runs: Runs) -> list[Failure]:
        """The binds that failed since the last call, as failures to queue again (their runs dropped)."""
        with self._lock:
            done, self._done = self._done, []
        failed = []
        for result in done:
            if result.error is None:
                continue
            job_id = f"{POD_PREFIX}{result.namespace}/{result.name}"
            run = runs.get(job_id)
            if run is None or run.pods != (result.name,):
                continue  # stopped meanwhile (preempted, deleted): nothing to give back twice
            runs.remove(job_id)
            self.queued.add(job_id)
            failed.append(Failure(job_id, "FailedStart", f"binding to {result.node} failed: {result.error}",
                                  retry=True))  # fmt: skip
        return failed

    def _bind(self, binds: list[tuple[str, str, str]], pods: Mapping[Key, Obj]) -> None:
        if self._binder is None and self._make_binder is not None:
            self._binder = self._make_binder()
        if self._binder is not None:
            self._binder.submit(binds, lambda result: self._bound(result, pods))
            return
        for namespace, name, node in binds:  # no pool configured: bind on this thread
            try:
                self.api.bind(namespace, name, node)
                self._bound(BindResult(namespace, name, node, at=BindTrace.now()), pods)
            except Exception as exc:  # noqa: BLE001 - reported per pod
                self._bound(BindResult(namespace, name, node, str(exc), at=BindTrace.now()), pods)

    def _bound(self, result: BindResult, pods: Mapping[Key, Obj]) -> None:
        """One bind made (on a bind thread): trace, metrics, its Scheduled event; kept for `collect`."""
        key = (result.namespace, result.name)
        with self._lock:
            bind = self._binding.pop(key, None)
            self._done.append(result)
        if bind is not None and self.trace is not None:
            self.trace.bound(f"{key[0]}/{key[1]}", bind.snapshot, bind.decided, result.at, result.error is None)
        if bind is not None and self.metrics is not None:
            if result.error is not None:
                self.metrics.binding_error(bind.partition)
            else:  # the pass's time plus how long the bind took: the backend reads no wall clock
                self.metrics.schedule_latency(bind.now + (result.at - bind.decided) - bind.created)
        if result.error is None and self.events and self._binder is not None:
            pod = pods.get(key) or {"metadata": {"namespace": key[0], "name": key[1]}}
            self._binder.events.post((pod, "Scheduled", f"Successfully assigned {key[0]}/{key[1]} to {result.node}",
                                      "Normal"))  # fmt: skip

    def event(self, pods: Mapping[Key, Obj], job_id: str, reason: str, message: str,
              type: str = "Normal") -> None:  # fmt: skip
        """An event about a plain Pod's job: warnings only (Scheduled comes after the bind)."""
        if type != "Warning" or not self.events:
            return
        namespace, name = pod_key(job_id)
        pod = pods.get((namespace, name)) or {"metadata": {"namespace": namespace, "name": name}}
        self.api.event(
            pod, "FailedScheduling" if reason in ("Rejected", "FailedStart") else reason, message, type
        )

    def close(self) -> None:
        """Stop the bind pool's threads (a Controller rebuilt after an error makes a new backend).
        Binds not yet made are dropped: their pods stay unbound and are queued again."""
        if self._binder is not None:
            self._binder.close()
            self._binder = None


def pod_spec(job_id: str, pod: Obj, now: float) -> JobSpec:
    view = Pod(pod)
    labels, notes = view.labels, view.annotations
    task = str(labels.get(TASK_TYPE) or notes.get(TASK_TYPE) or DEFAULT_TASK_TYPE)
    try:
        duration = max(float(notes.get(DURATION, 0) or 0), 0.0)
    except ValueError:
        duration = 0.0  # unreadable: duration-aware policies see an unknown (0 s) job
    submit = epoch(view.creation_timestamp, now)
    return JobSpec(job_id, submit, duration, gpus_of(pod), task, name=view.name)


__all__ = ["Metrics", "PlainPods", "Run", "Runs", "deleting", "epoch", "job_id_of", "key_of", "phase_of",
           "pod_spec"]  # fmt: skip

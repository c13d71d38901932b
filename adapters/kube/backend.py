"""The Kubernetes backend: GPUJobs (and plain Pods with `schedulerName: gputwin`) run as pods bound to nodes.

`KubernetesBackend` has every capability of `gputwin.runtime.capabilities` the controller uses on a
real cluster: it runs and adopts runs (`start_all`, `adopt`, `stop`, `ended`), observes the
cluster (`observe`, `held_by_others`), reports failed runs (`failures`), brings plain Pods as its
own jobs (`own_jobs`, `own_job_event`) and counts preemptions (`preempted`). The raw API calls are
in `gputwin.adapters.kube.pods`.

One reconcile pass, as JobControl drives it:

1. `observe(cluster, now)`: the Nodes and every pod not yet ended (ours are those with
   `schedulerName=gputwin`), from this process's watched copy of both
   (`gputwin.adapters.kube.watch`: one list, then watch events; no list per pass, no read per
   pod; a backend made without a watch lists both). A pass applies only what changed since the
   last one to its view (`gputwin.adapters.kube.view`), and the later steps look only at the pods
   and runs those changes touch; every `FULL_SECONDS`, and at its first pass, it starts over from
   the whole copy. Returns the declared nodes that must take no
   new work (NotReady, cordoned, untolerated taint, too few allocatable GPUs, labels
   disagreeing with the topology: `gputwin.adapters.kube.nodes`); JobControl hands them to
   `Scheduler.set_out_of_service`. The `nvidia.com/gpu` requests of bound pods of other
   schedulers (kube-scheduler's on a shared node) are summed per node: `held_by_others()`, which
   JobControl hands to `Scheduler.set_external_use`, so placers never count those GPUs as free.
2. `adopt` (after a restart): a Running GPUJob's run is found again by its pods' `gputwin.io/job-id`.
3. `ended` / `failures`: from the view, and from the pods the watch saw end or vanish
   since the last pass (a pod it has not shown yet, just created, counts as pending; one still
   unseen after `UNSEEN_SECONDS` is read once). A run whose pods all Succeeded is finished. A
   Failed pod fails the job (`Failure(retry=False)`: the GPUJob shows Failed; the gang's other pods
   are deleted). A pod deleted by someone else (or its node) re-queues the GPUJob
   (`retry=True`): the job did not fail, its run was lost; a plain Pod that vanished is just gone.
   Then orphans are deleted: pods of a GPUJob whose run the operator does not track (bound before
   a crash, but the job's status never said Running; or left by a deleted job). The rule after a
   restart is therefore: the GPUJob status is the truth, bound pods it does not account for are
   cleaned up, and the job is placed again; nothing is ever bound twice.
4. `start_all`: the job's pods from its pod template (one per node of the placement, `nvidia.com/gpu`
   requests = limits = that node's slot), named `<job>-<attempt>-<i>` (attempt = the job's
   preemptions so far) so a retry after a crash meets a 409 and adopts the same pod, then bound one
   by one. Gang: if any create or bind fails, every pod of this start is deleted and the start
   raises; JobControl gives the GPUs back. Never half-bound.
5. `stop`: the run's pods are deleted with the partition policy's `checkpointSeconds` as grace.

Plain Pods (`pod_jobs`, `start_batch`, `pod_event`): `gputwin.adapters.kube.plain_pods`, which
shares this backend's view and runs; their binds are made off the pass, and one that failed
is among the next pass's `failures` (`retry=True`: the pod is queued again). `close()` stops the bind threads: a Controller rebuilt
after a failed pass gets a new backend, and the old one's threads must not linger.
With `GPUTWIN_BIND_TRACE=FILE` every pass's snapshot and every bind are timed into FILE
(`gputwin.adapters.kube.trace`), for the scale benchmark's latency breakdown.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kubernetes.client.exceptions import ApiException
from kubernetes.config import ConfigException

from gputwin.adapters.kube.nodes import held_by_others
from gputwin.adapters.kube.binds import BindPool
from gputwin.adapters.kube.cluster_watch import ClusterWatch
from gputwin.adapters.kube.manifests import ATTEMPT_LABEL, JOB_LABEL, PodPlan, job_pod, label_value
from gputwin.adapters.kube.pods import PodApi, reason_of
from gputwin.adapters.kube.watch import Ended
from gputwin.api.bodies import Body, Obj, Pod, key_of
from gputwin.api.status import Backend as BackendName
from gputwin.core.decision import Start
from gputwin.core.model import ClusterSpec
from gputwin.runtime.capabilities import (
    AdoptsRuns,
    BackingOff,
    BringsOwnJobs,
    ConfigError,
    CountsPreemptions,
    Failure,
    ObservesCluster,
    OwnJobs,
    ReportsFailures,
    RunsJobs,
    StartRefused,
    is_own_job,
)
from gputwin.adapters.kube.plain_pods import Metrics, PlainPods, deleting, epoch, job_id_of, phase_of
from gputwin.adapters.kube.shared import shared_watch
from gputwin.adapters.kube.trace import BindTrace
from gputwin.adapters.kube.view import Key, NodeView, PodView, Run, Runs

TOLERATED = ("nvidia.com/gpu",)
DONE = ("Succeeded", "Failed")
ACTIVE = "status.phase!=Succeeded,status.phase!=Failed"

log = logging.getLogger(__name__)


BACKOFF_SECONDS = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
# A bind is a round trip that mostly waits for the API server: on the benchmark's burst 16 threads
# bound the first wave (capacity free, hundreds of pods at once) in a fifth of the time 8 took,
# 32 a little faster still (kube-scheduler binds in as many goroutines as pods wait).
BIND_THREADS = 32
SYNC_SECONDS = 60.0  # the watches' first list (10,000 pods take a few seconds)
UNSEEN_SECONDS = 30.0  # a pod we made that the watch has not shown by then is read once
# Every pass applies only what the watches changed (`gputwin.adapters.kube.view`); this often (and
# after every restart) a pass starts over from the whole copy, as an informer resyncs: a safety net,
# rare because a full pass over a 10,000-pod burst takes a few hundred ms that every pod waits.
FULL_SECONDS = 120.0


class KubernetesBackend:
    """Runs the scheduler's decisions as pods bound to nodes; reports their ends from pod phases."""

    name: BackendName = "kubernetes"

    def __init__(
        self,
        api: PodApi,
        *,
        namespace: str | None = None,
        tolerated: Sequence[str] = TOLERATED,
        binder: Callable[[], BindPool] | None = None,
        metrics: Metrics | None = None,
        pod_events: bool = True,
        watch: ClusterWatch | None = None,
        trace: BindTrace | None = None,
    ) -> None:
        self.api, self.namespace, self.tolerated = api, namespace or None, tuple(tolerated)
        self.watch = watch  # None: list pods and nodes at every pass instead
        self.metrics, self.trace = metrics, trace
        self.plain = PlainPods(api, binder=binder, metrics=metrics, events=pod_events, trace=trace)
        self._cluster: ClusterSpec | None = None
        self._view = PodView(self.namespace)
        self._nodes = NodeView(self.tolerated)
        self._pods = self._view.ours  # our live pods as of this pass (kept up to date, never copied)
        self._plain = self._view.plain  # of them, the plain Pods (no GPUJob)
        self._gang = self._view.gang  # of them, the GPUJobs' pods
        self._changed: dict[Key, None] | None = None  # pods changed for this pass; None: look at all
        self._full_at: float | None = None  # when a pass last started over from the whole copy
        self._suspects: set[Key] = set()  # GPUJob pods a run let go of: the orphan scan looks at them
        self._runs = Runs()
        self._failures: list[Failure] = []
        self._out: dict[str, str] = {}
        self._held: dict[str, int] = {}  # declared node -> GPUs other schedulers' pods hold there
        self._retry: dict[str, tuple[int, float]] = {}  # job id -> (failed starts, not before)
        self._terminal: dict[tuple[str, str], Obj] = {}  # ended pods of runs still tracked
        self._gone: set[tuple[str, str]] = set()  # pods of tracked runs deleted before they ended
        self._unseen: dict[tuple[str, str], float] = {}  # pods of tracked runs not in the copy yet: since

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, metrics: Metrics | None = None) -> KubernetesBackend:
        """`GPUTWIN_NAMESPACE` (pods of that namespace only), `GPUTWIN_TOLERATED_TAINTS` (comma-separated
        taint keys our pods tolerate, default nvidia.com/gpu), `GPUTWIN_BIND_THREADS` (default 32),
        `GPUTWIN_POD_EVENTS` (`off`: no Scheduled/FailedScheduling events on plain Pods),
        `GPUTWIN_BIND_TRACE` (a file: time every pass and bind into it, `gputwin.adapters.kube.trace`).
        `metrics`: where binds, preemptions and dropped events are counted (the operator's registry)."""
        env = dict(os.environ) if env is None else env
        keys = [k.strip() for k in env.get("GPUTWIN_TOLERATED_TAINTS", ",".join(TOLERATED)).split(",")]
        threads = env.get("GPUTWIN_BIND_THREADS", str(BIND_THREADS))
        count = int(threads) if threads.isdigit() and int(threads) > 0 else BIND_THREADS
        try:
            api = PodApi.connect()
        except ConfigException as exc:  # no kubeconfig, no service account: say so in one line
            raise ConfigError(f"GPUTWIN_BACKEND=kubernetes: no cluster credentials ({exc})") from None
        return cls(api, namespace=env.get("GPUTWIN_NAMESPACE") or None,
                   tolerated=[k for k in keys if k],
                   binder=lambda: BindPool(PodApi.connect, count,
                                           on_event_drop=metrics.event_dropped if metrics else None),
                   metrics=metrics, pod_events=env.get("GPUTWIN_POD_EVENTS", "on") != "off",
                   watch=shared_watch(), trace=BindTrace.from_env(env))  # fmt: skip

    def close(self) -> None:
        """Stop the bind threads and the trace (the shared watches stay: the next backend uses them)."""
        self.plain.close()
        if self.trace is not None:
            self.trace.close()

    # --- each pass ----------------------------------------------------------------------------

    def observe(self, cluster: ClusterSpec, now: float) -> dict[str, str]:
        """Bring the view of pods and nodes up to date for this pass; the declared nodes out of
        service, with why."""
        self._cluster = cluster
        for job_id, (failed, not_before) in list(self._retry.items()):
            if 0 < not_before <= now:  # due: may start again, and is no longer a wake-up (count kept)
                self._retry[job_id] = (failed, 0.0)
        full = (
            self.watch is None  # a list is the whole cluster anyway
            or self._full_at is None  # the first pass of this backend
            or not 0 <= now - self._full_at < FULL_SECONDS
        )
        pods, nodes = self._read(full)
        self.plain.snapshot_at = BindTrace.now()
        if self.trace is not None:
            self.trace.snapshot(self.plain.snapshot_at, self.watch.pods.taken if self.watch else "")
        if full:
            self._full_at = now
            self._view.clear()
        for key, pod in pods.items():
            self._view.apply(key, pod)
        self._changed = None if full else dict.fromkeys(pods)
        self._nodes.update(cluster, nodes, full)
        self._held = held_by_others(self._nodes.allocatable, self._nodes.expected, self._view.foreign)
        out = self._nodes.problems
        if out != self._out:
            for node, why in sorted(out.items()):
                if self._out.get(node) != why:
                    log.warning("node %s is out of service: %s", node, why)
            for node in sorted(set(self._out) - set(out)):
                log.info("node %s is back in service", node)
            self._out = dict(out)
        return dict(out)

    def _read(self, full: bool) -> tuple[dict[Key, Obj | None], dict[Key, Obj | None]]:
        """The pods (not ended, every namespace: other schedulers' pods hold GPUs on shared nodes
        wherever they are) and nodes that changed since the last pass (all of them when `full`):
        from the watched copy, else listed (always all)."""
        if self.watch is None:
            listed_pods, listed_nodes = self.api.pods(field_selector=ACTIVE), self.api.nodes()
            return {key_of(p): p for p in listed_pods}, {key_of(n): n for n in listed_nodes}
        if not self.watch.wait_synced(SYNC_SECONDS):
            raise RuntimeError(f"the pod and node watches have not listed in {SYNC_SECONDS:g} s")
        pods, ended = self.watch.pods.changes(full)
        nodes, _ = self.watch.nodes.changes(full)
        self._note_ended(ended)
        return pods, nodes

    def _note_ended(self, ended: dict[Key, Ended]) -> None:
        """How runs ended, as the watch saw it (no read per pod)."""
        tracked = self._runs.job_of
        for key, end in ended.items():
            if key in tracked:
                if end.gone:
                    self._gone.add(key)
                else:
                    self._terminal[key] = end.pod

    def held_by_others(self) -> dict[str, int]:
        """Declared node -> GPUs that pods of other schedulers hold there (from the last `observe`)."""
        return dict(self._held)

    # --- runs (gputwin.runtime.capabilities: RunsJobs, AdoptsRuns) ------------------------------

    def start_all(
        self, starts: Sequence[Start], node_names: Sequence[str], now: float
    ) -> list[tuple[Start, Exception]]:
        """GPUJobs one by one (a gang of pods each), then plain Pods together through the bind pool."""
        failed: list[tuple[Start, Exception]] = []
        pods: list[tuple[Start, Sequence[str]]] = []
        for start in starts:
            names = [node_names[i] for i, _ in start.slots]
            if is_own_job(start.job_id):
                pods.append((start, names))
                continue
            try:
                self._start(start.job_id, start, names, now)
            except Exception as exc:  # noqa: BLE001  (the API server's, the template's: all go back)
                failed.append((start, exc))
        if pods:
            by_id = {start.job_id: start for start, _ in pods}
            failed += [(by_id[job_id], RuntimeError(error))
                       for job_id, error in self.start_batch(pods, now) if error is not None]  # fmt: skip
        return failed

    def _start(self, job_id: str, start: Start, node_names: Sequence[str], now: float) -> None:
        failed, not_before = self._retry.get(job_id, (0, 0.0))
        if now < not_before:
            raise BackingOff(f"start failed {failed} time(s); next try at {not_before:.0f}")
        try:
            self._start_job(job_id, start, node_names, now)
        except Exception:
            delay = BACKOFF_SECONDS[min(failed, len(BACKOFF_SECONDS) - 1)]
            self._retry[job_id] = (failed + 1, now + delay)  # a hot retry loop would hammer the API
            raise
        self._retry.pop(job_id, None)

    def _start_job(self, job_id: str, start: Start, node_names: Sequence[str], now: float) -> None:
        namespace, name = job_id.split("/", 1)
        job = self.api.gpujob(namespace, name)
        if job is None:
            raise RuntimeError(f"GPUJob {job_id} is gone")
        spec, status = Body(job).spec, Body(job).status
        seconds = spec.get("durationSeconds")
        attempt = int(status.get("preemptions") or 0)
        switches = ",".join(self._leaves(node_names))
        pods = [job_pod(PodPlan(namespace, name, attempt, i, node, gpus, start.partition, switches, start.overhead,
                                start.run_seconds if seconds is not None else None),
                        spec.get("podTemplate"), job, self.tolerated)
                for i, (node, (_, gpus)) in enumerate(zip(node_names, start.slots))]  # fmt: skip
        self._place_gang(namespace, list(zip(pods, node_names)), start.partition)
        self._runs.add(job_id, Run(namespace, tuple(Body(p).name for p in pods), start.partition))
        if self.metrics is not None and status.get("submitTime"):
            self.metrics.schedule_latency(now - epoch(status["submitTime"], now))

    def adopt(self, start: Start, node_names: Sequence[str], since: float) -> None:
        """A Running GPUJob after a restart: its run is the newest attempt of its pods (none: lost,
        which `failures` reports, so the job is queued again)."""
        job_id = start.job_id
        node_names = [node_names[i] for i, _ in start.slots]
        namespace, name = job_id.split("/", 1)
        # Its pods may have ended while the operator was down: ask for all of them, ended or not.
        found = self.api.pods(label_selector=f"{JOB_LABEL}={label_value(name)}", namespace=namespace)
        mine = [p for p in found if job_id_of(p) == job_id and not Body(p).deleting]
        newest = max(map(_attempt, mine), default=0)
        names = tuple(sorted(Body(p).name for p in mine if _attempt(p) == newest))
        nodes = sorted(Pod(p).node_name for p in mine if Body(p).name in names)
        if sorted(node_names) != nodes:
            names = ()  # not where the status says it runs: lost (its pods are orphans, deleted)
        for pod in mine:  # ended while we were down (the watch reports no end of a pod it never saw live)
            if Body(pod).name in names and phase_of(pod) in DONE:
                self._terminal[key_of(pod)] = pod
            elif Body(pod).name not in names:
                self._suspects.add(key_of(pod))  # not this run's: an orphan, deleted by `finished`
        self._runs.add(job_id, Run(namespace, names, start.partition))

    def stop(self, job_id: str) -> None:
        self._retry.pop(job_id, None)
        run = self._runs.remove(job_id)
        self.plain.queued.discard(job_id)
        if run is None:
            return
        grace = self._grace(run.partition)
        for name in run.pods:
            self.api.delete(run.namespace, name, grace)

    def preempted(self, job_id: str, partition: str) -> None:
        if self.metrics is not None:
            self.metrics.preemption(partition)

    def ended(self, now: float) -> list[tuple[str, float]]:
        """Runs whose pods all succeeded, as of this pass (each once, in the order they began)."""
        return [(job_id, now) for job_id in self.finished(now)]

    def finished(self, now: float) -> list[str]:
        done: list[str] = []
        self._failures = self.plain.collect(self._runs)  # plain Pods whose bind failed since the last pass
        for job_id in self._to_check():
            run = self._runs.get(job_id)
            assert run is not None
            if self._still_running(run):
                self._runs.recheck.discard(job_id)  # until one of its pods changes
                continue
            pods = [self._pods.get((run.namespace, n)) or self._ended(run.namespace, n, now)
                    for n in run.pods]  # fmt: skip
            live = [p for p in pods if p is not None and not Body(p).deleting]
            if not run.pods or len(live) < len(pods):
                self._runs.remove(job_id)
                self._failures.append(Failure(job_id, "PodsLost", "its pods were deleted outside the scheduler",
                                              retry=not is_own_job(job_id)))  # fmt: skip
                self.stop_pods(run, [p for p in live if phase_of(p) not in DONE])
            elif any(phase_of(p) == "Failed" for p in live):
                self._runs.remove(job_id)
                failed = Pod(next(p for p in live if phase_of(p) == "Failed"))
                why = failed.status.get("message") or failed.status.get("reason") or ""
                message = f"pod {failed.name} failed{': ' + why if why else ''}"
                self._failures.append(Failure(job_id, "PodFailed", message, retry=False))
                self.stop_pods(run, [p for p in live if phase_of(p) not in DONE])
            elif all(phase_of(p) == "Succeeded" for p in live):
                self._runs.remove(job_id)
                done.append(job_id)
        tracked = self._runs.job_of
        if self._terminal:
            self._terminal = {k: v for k, v in self._terminal.items() if k in tracked}
        self._gone &= tracked.keys()
        if self._unseen:
            self._unseen = {k: v for k, v in self._unseen.items() if k in tracked and k not in self._pods}
        self._delete_orphans()
        return done

    def _to_check(self) -> list[str]:
        """The runs `finished` looks at, in the order they began: all of them on a full pass; else
        those whose pods changed, and those not seen running yet (`Runs.recheck`)."""
        if self._changed is None:
            return list(self._runs)
        job_of = self._runs.job_of
        touched = {job_of[key] for key in self._changed if key in job_of}
        return self._runs.in_order(touched | self._runs.recheck)

    def failures(self, now: float) -> list[Failure]:
        """The runs that ended without success in the last `finished` (each reported once)."""
        found, self._failures = self._failures, []
        return found

    def next_event(self) -> float | None:
        """When a failed start may be tried again; runs end when KWOK or a kubelet says so (the pod
        watch wakes the loop then)."""
        return min((t for _, t in self._retry.values() if t > 0), default=None)

    # --- plain Pods (gputwin.adapters.kube.plain_pods) ----------------------------------------------

    def own_jobs(self, now: float) -> OwnJobs:
        """Pods with `schedulerName: gputwin` and no GPUJob, from this pass's view."""
        return self.plain.jobs(self._plain, self._runs, self._largest_node(), now, self._changed)

    def start_batch(
        self, starts: Sequence[tuple[Start, Sequence[str]]], now: float
    ) -> list[tuple[str, str | None]]:
        """Hand plain Pods (one node each) to the bind pool; a bind that fails is a later `Failure`."""
        return self.plain.start_batch(starts, self._pods, self._runs, now)

    def own_job_event(self, job_id: str, reason: str, message: str, type: str = "Normal") -> None:
        """An event about a plain Pod's job: warnings only (Scheduled comes from the bind pool)."""
        self.plain.event(self._pods, job_id, reason, message, type)

    # --- helpers ----------------------------------------------------------------------------------

    def _place_gang(self, namespace: str, pods: list[tuple[Obj, str]], partition: str) -> None:
        """Create and bind every pod, or none: on any failure delete what this start made."""
        made: list[str] = []
        try:
            for pod, node in pods:
                got, created = self.api.create(pod)
                name, there = Body(pod).name, Pod(got).node_name
                if not created and (
                    job_id_of(got) != job_id_of(pod)  # someone else's pod: never ours to adopt or delete
                    or Body(got).deleting
                    or (there and there != node)
                ):
                    raise RuntimeError(f"pod {namespace}/{name} exists and is not this run's; retrying later")
                made.append(name)  # created, or ours from a start cut short (a crash): adopted
                if not there:
                    self.api.bind(namespace, name, node)
        except Exception as exc:
            if self.metrics is not None:
                self.metrics.binding_error(partition)
            for name in made:
                self.api.delete(namespace, name, 0)
            if isinstance(exc, ApiException) and exc.status == 422:
                raise StartRefused(f"its pod is invalid: {reason_of(exc)}") from exc
            raise

    def _delete_orphans(self) -> None:
        """Delete GPUJob pods no run accounts for: of the pods changed this pass (all on a full
        pass) and those a run let go of (`_suspects`)."""
        tracked, gang = self._runs.job_of, self._gang
        keys = gang if self._changed is None else [
            k for k in dict.fromkeys((*self._changed, *self._suspects)) if k in gang
        ]
        self._suspects.clear()
        for key in list(keys):
            pod = gang[key]
            if key in tracked or deleting(pod):  # per changed pod: direct, not a view
                continue
            if phase_of(pod) not in DONE:
                log.info("deleting pod %s/%s: no run of its GPUJob accounts for it", *key)
                self.api.delete(key[0], key[1], 0)

    def _still_running(self, run: Run) -> bool:
        """Every pod of `run` in this pass's view, none being deleted or ended: `finished` has
        nothing to do for it (and `_ended`, with its side effects, is not needed)."""
        if not run.pods:
            return False
        for name in run.pods:
            pod = self._pods.get((run.namespace, name))
            if pod is None or deleting(pod) or phase_of(pod) in DONE:  # per pod of a run: direct
                return False
        return True

    def _ended(self, namespace: str, name: str, now: float) -> Obj | None:
        """A tracked pod missing from the pods not ended: ended (kept while its run lasts: a gang
        waits for its slowest pod), or gone (None). With a watch, how it ended came with the event;
        a pod the copy has not shown yet (just created) is taken as pending, and read once after
        `UNSEEN_SECONDS`. Without a watch it is read once."""
        key = (namespace, name)
        if key in self._gone:
            return None
        if key not in self._terminal and self.watch is not None:
            since = self._unseen.setdefault(key, now)
            if now - since < UNSEEN_SECONDS:
                return {"metadata": {"namespace": namespace, "name": name}, "status": {"phase": "Pending"}}
        if key not in self._terminal:
            pod = self.api.pod(namespace, name)
            if pod is None or phase_of(pod) not in DONE:
                return pod
            self._terminal[key] = pod
        return self._terminal[key]

    def stop_pods(self, run: Run, pods: list[Obj]) -> None:
        for pod in pods:
            self.api.delete(run.namespace, Body(pod).name, 0)

    def _grace(self, partition: str) -> int | None:
        """The partition policy's checkpoint time, as the pods' grace period (None: their own)."""
        for part in self._cluster.partitions if self._cluster else ():
            if part.name == partition and part.policy.checkpoint_seconds is not None:
                return math.ceil(part.policy.checkpoint_seconds)
        return None

    def _largest_node(self) -> int:
        return max((n.gpus for n in self._cluster.topology.nodes), default=0) if self._cluster else 0

    def _leaves(self, node_names: Sequence[str]) -> list[str]:
        switch = {n.name: n.switch for n in self._cluster.topology.nodes} if self._cluster else {}
        return sorted({switch.get(n, "?") for n in node_names})


def _attempt(pod: Obj) -> int:
    """The run attempt a GPUJob pod belongs to (its `gputwin.io/attempt` label; 0 without one)."""
    return int(Body(pod).labels.get(ATTEMPT_LABEL, 0))


__all__ = ["KubernetesBackend", "Metrics"]

if TYPE_CHECKING:
    # mypy: every capability JobControl asks a Kubernetes backend for is here, typed alike
    _RUNS: type[RunsJobs] = KubernetesBackend
    _ADOPTS: type[AdoptsRuns] = KubernetesBackend
    _OBSERVES: type[ObservesCluster] = KubernetesBackend
    _FAILS: type[ReportsFailures] = KubernetesBackend
    _OWN: type[BringsOwnJobs] = KubernetesBackend
    _COUNTS: type[CountsPreemptions] = KubernetesBackend

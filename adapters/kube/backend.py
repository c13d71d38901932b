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
3. `ended` / `failures`: from the view, and from the pods the watch saw end or vanish since the
   last pass (`gputwin.adapters.kube.ends`): finished, failed (the GPUJob fails) or lost (it is
   queued again) runs; orphaned pods (no run accounts for them) are deleted. The rule after a
   restart is therefore: the GPUJob status is the truth, bound pods it does not account for are
   cleaned up, and the job is placed again; nothing is ever bound twice.
4. `start_all`: a GPUJob's run is a gang of pods (`gputwin.adapters.kube.gang`), built from the
   start as the controller resolved it (`resolve_with`: node and leaf-switch names, the GPUJob as
   the pass read it, its preemptions so far; nothing is fetched again), placed all or none. With
   a `GangPool` (`from_env`: `GPUTWIN_GANG_THREADS`, default 8) the pass's gangs are placed at once,
   each gang still pod after pod: a backlog of one-pod GPUJobs was one create and one bind round
   trip after another, 93 % of the pass's time, waiting on the socket.
5. `stop`: the run's pods are deleted with the grace the runtime gives: a preemption's checkpoint
   time, as the core charged it; a deleted or evicted job's pods keep their own.

GPU shares (`gpuFraction`): one reservation pod per shared GPU holds it, the share's pod asks for
no GPU (`gputwin.adapters.kube.sharing`: made before a share's pod, deleted after its last share).
Plain Pods (`pod_jobs`, `start_batch`, `pod_event`): `gputwin.adapters.kube.plain_pods`, which
shares this backend's view and runs; their binds are made off the pass, and one that failed is
among the next pass's `failures` (`retry=True`: queued again). `close()` stops the bind threads: a
Controller rebuilt after a failed pass gets a new backend, whose old threads must not linger.
With `GPUTWIN_BIND_TRACE=FILE` every pass's snapshot and every bind are timed into FILE
(`gputwin.adapters.kube.trace`), for the scale benchmark's latency breakdown.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubernetes.config import ConfigException

from gputwin.adapters.kube.nodes import held_by_others
from gputwin.adapters.kube.binds import GANG_THREADS, BindPool, GangPool, thread_count
from gputwin.adapters.kube.cluster_watch import ClusterWatch
from gputwin.adapters.kube.ends import DONE, RunEnds
from gputwin.adapters.kube.gang import BACKOFF_SECONDS, MigRoom, find_run, gang_pods, place_gang
from gputwin.adapters.kube.pods import PodApi
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
    NeedsPayloads,
    ObservesCluster,
    OwnJobs,
    ReportsFailures,
    Resolver,
    RunsJobs,
    is_own_job,
)
from gputwin.adapters.kube.plain_pods import Metrics, PlainPods, deleting, epoch, job_id_of, phase_of
from gputwin.adapters.kube.shared import shared_watch
from gputwin.adapters.kube.sharing import Reservations, ensure_reservation
from gputwin.adapters.kube.trace import BindTrace
from gputwin.adapters.kube.view import Key, NodeView, PodView, Run, Runs

TOLERATED = ("nvidia.com/gpu",)
ACTIVE = "status.phase!=Succeeded,status.phase!=Failed"

log = logging.getLogger(__name__)

# A bind is a round trip that mostly waits for the API server: on the benchmark's burst 16 threads
# bound the first wave (capacity free, hundreds of pods at once) in a fifth of the time 8 took,
# 32 a little faster still (kube-scheduler binds in as many goroutines as pods wait).
BIND_THREADS = 32
SYNC_SECONDS = 60.0  # the watches' first list (10,000 pods take a few seconds)
# Every pass applies only what the watches changed (`gputwin.adapters.kube.view`); this often (and
# after every restart) a pass starts over from the whole copy, as an informer resyncs: a safety net,
# rare because a full pass over a 10,000-pod burst takes a few hundred ms that every pod waits.
FULL_SECONDS = 120.0


@dataclass(frozen=True, slots=True)
class GangPlan:
    """A GPUJob start ready to place: its pods with their nodes, and when the job was submitted."""

    start: Start
    namespace: str
    pods: list[tuple[Obj, str]]
    submitted: float | None
    reservation: tuple[Obj, str] | None = None  # a share opening a GPU: its reservation pod, node


class KubernetesBackend(RunEnds):
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
        gangs: GangPool | None = None,
    ) -> None:
        self.api, self.namespace, self.tolerated = api, namespace or None, tuple(tolerated)
        self.watch = watch  # None: list pods and nodes at every pass instead
        self.metrics, self.trace = metrics, trace
        self.gangs = gangs  # None: each GPUJob's gang placed in turn on `api`
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
        self.shares = Reservations(self.tolerated)  # shared GPUs' reservation pods (GPU shares' runs)
        self._refused: list[Failure] = []  # shares adopted on a GPU the scheduler packs otherwise
        self.resolver: Resolver | None = None  # the controller: a start in names, with its GPUJob
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
        count = thread_count(env, "GPUTWIN_BIND_THREADS", BIND_THREADS)
        gangs = thread_count(env, "GPUTWIN_GANG_THREADS", GANG_THREADS)
        try:
            api = PodApi.connect()
        except ConfigException as exc:  # no kubeconfig, no service account: say so in one line
            raise ConfigError(f"GPUTWIN_BACKEND=kubernetes: no cluster credentials ({exc})") from None
        return cls(api, namespace=env.get("GPUTWIN_NAMESPACE") or None,
                   tolerated=[k for k in keys if k],
                   binder=lambda: BindPool(PodApi.connect, count,
                                           on_event_drop=metrics.event_dropped if metrics else None),
                   metrics=metrics, pod_events=env.get("GPUTWIN_POD_EVENTS", "on") != "off",
                   watch=shared_watch(), trace=BindTrace.from_env(env),
                   gangs=GangPool(PodApi.connect, gangs) if gangs > 1 else None)  # fmt: skip

    def close(self) -> None:
        """Stop the bind threads and the trace (the shared watches stay: the next backend uses them)."""
        self.plain.close()
        if self.gangs is not None:
            self.gangs.close()
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

    def held_by_others(self) -> dict[str, int]:
        """Declared node -> GPUs that pods of other schedulers hold there (from the last `observe`)."""
        return dict(self._held)

    # --- runs (gputwin.runtime.capabilities: RunsJobs, AdoptsRuns) ------------------------------

    def start_all(
        self, starts: Sequence[Start], node_names: Sequence[str], now: float
    ) -> list[tuple[Start, Exception]]:
        """GPUJobs' gangs (at once on the gang pool, else one by one), then plain Pods together
        through the bind pool."""
        failed: list[tuple[Start, Exception]] = []
        pods: list[tuple[Start, Sequence[str]]] = []
        gangs: list[tuple[Start, GangPlan]] = []
        room = MigRoom(self._nodes.nodes, self._gang.values())  # MIG slices the nodes still advertise
        for start in starts:
            names = [node_names[i] for i, _ in start.slots]
            if is_own_job(start.job_id):
                pods.append((start, names))
                continue
            try:
                plan = self._plan(start, names, now, room)
                if self.gangs is None:
                    self._place(self.api, plan)
                    self._placed(plan, now)
                else:
                    gangs.append((start, plan))
            except Exception as exc:  # noqa: BLE001  (the API server's, the template's: all go back)
                failed.append((start, self._failed(start.job_id, exc, now)))
        if gangs and self.gangs is not None:
            errors = self.gangs.run([plan for _, plan in gangs], self._place)
            for (start, plan), error in zip(gangs, errors):
                if error is None:
                    self._placed(plan, now)
                else:
                    failed.append((start, self._failed(start.job_id, error, now)))
        if pods:
            by_id = {start.job_id: start for start, _ in pods}
            failed += [(by_id[job_id], RuntimeError(error))
                       for job_id, error in self.start_batch(pods, now) if error is not None]  # fmt: skip
        return failed

    def _plan(self, start: Start, nodes: Sequence[str], now: float, room: MigRoom | None = None) -> GangPlan:
        """The gang's pods and nodes, resolved on this (the pass's) thread; BackingOff in its backoff."""
        failed, not_before = self._retry.get(start.job_id, (0, 0.0))
        if now < not_before:
            raise BackingOff(f"start failed {failed} time(s); next try at {not_before:.0f}")
        if self.resolver is None:
            raise RuntimeError("no controller resolves this backend's starts (resolve_with)")
        resolved = self.resolver.resolve(start)
        share, reservation = self.shares.plan(start.job_id, resolved, self._view.reservations) or (None, None)
        pods = gang_pods(start, resolved, self.tolerated, share, room)
        namespace = start.job_id.split("/", 1)[0]
        return GangPlan(start, namespace, list(zip(pods, resolved.nodes)), resolved.submitted, reservation)

    def _place(self, api: PodApi, plan: GangPlan) -> None:
        if plan.reservation is not None:  # the share's GPU first: its pod holds it, the share's none
            ensure_reservation(api, *plan.reservation)
        place_gang(api, plan.namespace, plan.pods, lambda: self._bind_failed(plan.start.partition))

    def _placed(self, plan: GangPlan, now: float) -> None:
        self._retry.pop(plan.start.job_id, None)
        self._runs.add(plan.start.job_id, Run(plan.namespace, tuple(Body(p).name for p, _ in plan.pods),
                                              plan.start.partition))  # fmt: skip
        if self.metrics is not None and plan.submitted is not None:
            self.metrics.schedule_latency(now - plan.submitted)

    def _failed(self, job_id: str, exc: Exception, now: float) -> Exception:
        """A failed start waits a growing backoff (a hot retry loop would hammer the API)."""
        if not isinstance(exc, BackingOff):
            failed, _ = self._retry.get(job_id, (0, 0.0))
            self._retry[job_id] = (failed + 1, now + BACKOFF_SECONDS[min(failed, len(BACKOFF_SECONDS) - 1)])
        return exc

    def _bind_failed(self, partition: str) -> None:
        if self.metrics is not None:
            self.metrics.binding_error(partition)

    def resolve_with(self, resolver: Resolver) -> None:
        self.resolver = resolver

    def adopt(self, start: Start, node_names: Sequence[str], since: float) -> None:
        """A Running GPUJob after a restart: its run is the newest attempt of its pods (none: lost,
        which `failures` reports, so the job is queued again)."""
        names, mine = find_run(self.api, start.job_id, [node_names[i] for i, _ in start.slots])
        refused = self.shares.refused(self.api, start, names, mine, self.resolver)
        if refused is not None:  # its pods are orphans now; `failures` queues it again
            self._refused.append(refused)
            names = ()
        for pod in mine:  # ended while we were down (the watch reports no end of a pod it never saw live)
            if Body(pod).name in names and phase_of(pod) in DONE:
                self._terminal[key_of(pod)] = pod
            elif Body(pod).name not in names:
                self._suspects.add(key_of(pod))  # not this run's: an orphan, deleted by `finished`
        if refused is None:
            self._runs.add(start.job_id, Run(start.job_id.split("/", 1)[0], names, start.partition))

    def stop(self, job_id: str, grace: float | None = None) -> None:
        self._retry.pop(job_id, None)
        run = self._runs.remove(job_id)
        self.plain.queued.discard(job_id)
        self.shares.release(self.api, job_id)
        if run is None:
            return
        seconds = math.ceil(grace) if grace is not None else None
        for name in run.pods:
            self.api.delete(run.namespace, name, seconds)

    def preempted(self, job_id: str, partition: str) -> None:
        if self.metrics is not None:
            self.metrics.preemption(partition)

    def ended(self, now: float) -> list[tuple[str, float]]:
        """Runs whose pods all succeeded, as of this pass (each once, in the order they began)."""
        done = self.finished(now)  # then shares that ended leave their GPUs (`gputwin.adapters.kube.sharing`)
        self.shares.tidy(self.api, self._runs.__contains__, self._view.reservations)
        self._failures, self._refused = self._failures + self._refused, []
        return [(job_id, now) for job_id in done]

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

    def _largest_node(self) -> int:
        return max((n.gpus for n in self._cluster.topology.nodes), default=0) if self._cluster else 0


__all__ = ["KubernetesBackend", "Metrics"]

if TYPE_CHECKING:
    # mypy: every capability JobControl asks a Kubernetes backend for is here, typed alike
    _RUNS: type[RunsJobs] = KubernetesBackend
    _ADOPTS: type[AdoptsRuns] = KubernetesBackend
    _OBSERVES: type[ObservesCluster] = KubernetesBackend
    _FAILS: type[ReportsFailures] = KubernetesBackend
    _OWN: type[BringsOwnJobs] = KubernetesBackend
    _COUNTS: type[CountsPreemptions] = KubernetesBackend
    _PAYLOADS: type[NeedsPayloads] = KubernetesBackend

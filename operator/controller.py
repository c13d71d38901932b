"""The reconcilers shared by the embedded emulator and the kopf operator.

    controller = Controller(store, SimBackend())
    controller.reconcile(now)          # cluster, then GPUJobs, then TraceReplays
    controller.next_event()            # when to reconcile again if nothing else happens

No kopf, no clock: every entry point takes `now` (epoch seconds) and works through a `Store`
(`gputwin.operator.store`) and a `Backend` (`gputwin.operator.backends`). The kopf handlers stay
thin: any event -> `reconcile(time.time())`, plus a timer at `next_event()`. A Controller holds
the scheduler's memory and is not thread-safe: one per process, calls serialised.

The cluster follows the last *valid* declaration: while a topology, partition or used policy has
a problem, the objects say so in their `Ready` condition and the scheduler keeps running the
cluster as it last was valid (a typo in a policy must not stop a running cluster). A valid
change builds a fresh scheduler and carries every live job over (see `JobControl.install`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from gputwin.api.bodies import Body, Obj
from gputwin.api.problems import validation_problems
from gputwin.api.status import TraceReplayStatus
from gputwin.api.v1alpha1 import TraceReplay, TraceReplaySpec
from gputwin.core.model import ClusterSpec
from gputwin.core.scheduler import Scheduler, SchedulerOptions
from gputwin.operator.backends import Backend, occupancy_of
from gputwin.operator.cluster import ClusterView, read_cluster, write_cluster_statuses
from gputwin.operator.jobs import JobControl
from gputwin.operator.live_replay import live_snapshot
from gputwin.operator.models import ModelUnusable, estimator_options, with_model_issue
from gputwin.operator.replay import ReplayCluster, ReplayResult, Trace, replay_cluster, run_replay, trace_source
from gputwin.operator.statuses import StatusBook, condition, updated
from gputwin.operator.store import Store, name_of, namespace_of
from gputwin.operator.trace_files import TraceAccess
from gputwin.runtime.capabilities import Deployer, DeployOutcome

COMPLETE = "Complete"
DONE = ("Succeeded", "Failed")


class Controller:
    """Reconciles every gputwin kind in one store against one backend."""

    def __init__(
        self,
        store: Store,
        backend: Backend,
        options: SchedulerOptions | None = None,
        deployer: Deployer | None = None,
        traces: TraceAccess | None = None,
        models: Path | None = None,
    ) -> None:
        self.store, self.backend, self.deployer = store, backend, deployer
        self.traces = traces or TraceAccess()  # where TraceReplay files may come from: by default nowhere
        self.options = options or SchedulerOptions()
        self.jobs = JobControl(store, backend)
        self.cluster: ClusterSpec | None = None
        self.view: ClusterView | None = None
        self.models = models  # GPUTWIN_MODEL_DIR: where a policy's learned model may come from (None: nowhere)
        self._read: ClusterView | None = None  # the view as read, before a model problem blocks it
        self._model: object = None  # the installed scheduler's learned model (None: history)
        self.deployed: DeployOutcome | None = None  # the deployer's last outcome, for the policies' statuses
        self.jobs_at: float | None = None  # when GPUJobs were last reconciled: a live replay's "now"

    @property
    def scheduler(self) -> Scheduler | None:
        return self.jobs.scheduler

    def reconcile(self, now: float) -> None:
        """Everything, in dependency order; a promoted replay winner takes effect at once."""
        self.reconcile_cluster(now)
        self.reconcile_jobs(now)
        if self.reconcile_replays(now):
            self.reconcile_cluster(now)
            self.reconcile_jobs(now)

    def next_event(self) -> float | None:
        """The earliest time something happens by itself: a run ends or a policy asked to be woken."""
        return self.jobs.next_event()

    # --- cluster ------------------------------------------------------------------------------

    def reconcile_cluster(self, now: float) -> None:
        """Validate the cluster objects, write their statuses, rebuild the scheduler on a valid change."""
        self._read = read_cluster(self.store, self._read)
        self.view, options = self._read, self.options
        spec, installed = self.view.spec, False
        if spec is not None:  # the policies' learned model (cached; re-read when its files change)
            try:
                options = estimator_options((d.model for d in self.view.declared), self.models, options)
            except ModelUnusable as exc:
                self.view, spec = with_model_issue(self.view, exc), None
        if spec is not None and (spec, options.estimator) != (self.cluster, self._model):
            self.cluster, self._model, installed = spec, options.estimator, True
            if self.deployer is not None:  # once per valid change; a failure waits for the next edit
                self.deployed = self.deployer.deploy(spec)
            self.jobs.install(Scheduler(spec, options), now)
        self._cluster_statuses(now, installed)

    def _cluster_statuses(self, now: float, installed: bool = False) -> None:
        assert self.view is not None
        write_cluster_statuses(
            self.store, self.view, self.scheduler, self.backend.name, now, installed, self.deployed,
            occupancy_of(self.backend, now),  # SLURM's own counts; None under sim and kubernetes
        )  # fmt: skip

    # --- GPUJobs ------------------------------------------------------------------------------

    def reconcile_jobs(self, now: float) -> None:
        """Submit, adopt, complete and forget GPUJobs, run the scheduling cycle, carry it out."""
        if self.view is None:
            self.reconcile_cluster(now)
        assert self.view is not None
        held = self.deployer.jobs_blocker if self.deployer is not None else None
        self.jobs.reconcile(now, self.view.blocker, held)
        self.jobs_at = now
        self._cluster_statuses(now)  # free GPUs and queue lengths moved

    # --- TraceReplays -------------------------------------------------------------------------

    def reconcile_replays(self, now: float) -> int:
        """Run every TraceReplay not yet run for its current spec; the number of policies promoted.

        The three steps are public so the kopf layer can run the slow middle one in a thread:
        `plan_replay` (cheap; reads a ConfigMap trace) -> `run_replay(spec, cluster, trace)`
        (simulations) -> `record_replay`.
        """
        promoted = 0
        for obj in self.pending_replays():
            plan = self.plan_replay(obj, now)
            result = plan if isinstance(plan, ReplayResult) else run_replay(*plan)
            promoted += self.record_replay(obj, result, now)
        return promoted

    def pending_replays(self) -> list[Obj]:
        """TraceReplays whose spec has not been replayed yet (new, edited, or waiting for a cluster)."""
        out = []
        for obj in self.store.list("TraceReplay"):
            body = Body(obj)
            status = body.status
            if body.deleting or (
                status.get("phase") in DONE and status.get("observedGeneration") == body.generation
            ):
                continue
            out.append(obj)
        return out

    def plan_replay(
        self, obj: Obj, now: float | None = None
    ) -> tuple[TraceReplaySpec, ReplayCluster, Trace] | ReplayResult:
        """What to replay on which cluster (and a ConfigMap trace's text, the checked file, or the
        live present at `now`, by default when GPUJobs were last reconciled), or the result already
        (invalid, no cluster yet, the ConfigMap, its key or the file refused)."""
        try:
            replay = TraceReplay.model_validate({k: v for k, v in obj.items() if k != "status"})
        except ValidationError as exc:
            message = "; ".join(str(p) for p in validation_problems(f"TraceReplay/{name_of(obj)}", exc))
            return ReplayResult("Failed", "Invalid", message)
        cluster = replay_cluster(self.view or read_cluster(self.store), replay.spec)
        if isinstance(cluster, str):
            return ReplayResult("Pending", "ClusterNotReady", cluster)
        if replay.spec.trace.live is not None:
            return self._live_plan(replay.spec, cluster, self.jobs_at if now is None else now)
        annotations = Body(obj).annotations
        trace = trace_source(self.store, namespace_of(obj), replay.spec, self.traces, annotations)
        if isinstance(trace, ReplayResult):
            return trace
        return replay.spec, cluster, trace

    def _live_plan(self, spec: TraceReplaySpec, cluster: ReplayCluster, now: float | None
                   ) -> tuple[TraceReplaySpec, ReplayCluster, Trace] | ReplayResult:  # fmt: skip
        """The present of the running scheduler, taken here, on the thread that owns it."""
        if self.scheduler is None or now is None:
            return ReplayResult("Pending", "ClusterNotReady", "spec.trace.live: the scheduler is not running yet")
        return spec, cluster, live_snapshot(self.scheduler, cluster.spec, now)

    def record_replay(self, obj: Obj, result: ReplayResult, now: float) -> int:
        """Write a replay's outcome (status, event) and promote its winner; the policies written."""
        namespace, name = namespace_of(obj), name_of(obj)
        written = self._promote(namespace, name, result)
        book = StatusBook(self.store, "TraceReplay", TraceReplayStatus)
        status = book.get(namespace, name)
        generation = book.generation(namespace, name)
        flag = "True" if result.phase == "Succeeded" else "False"
        conditions = condition(
            status.conditions, COMPLETE, flag, result.reason, result.message, now, generation
        )
        book.set(namespace, name, updated(
            status, phase=result.phase, candidates=list(result.candidates), winner=result.winner,
            trials=result.trials, promoted=bool(written) or status.promoted, conditions=conditions,
            observed_generation=generation,
        ))  # fmt: skip
        book.flush()  # the status first, then the events: a crash between repeats no event
        if result.phase == "Succeeded":
            self.store.event("TraceReplay", namespace, name, "ReplaySucceeded", result.message)
        elif result.phase == "Failed":
            self.store.event("TraceReplay", namespace, name, "ReplayFailed", result.message, "Warning")
        if written:
            message = f"{result.winner} written into SchedulingPolicy {', '.join(written)}"
            self.store.event("TraceReplay", namespace, name, "Promoted", message)
        return len(written)

    def _promote(self, namespace: str | None, name: str, result: ReplayResult) -> list[str]:
        """Write the winner into the SchedulingPolicies of the replayed partitions."""
        written = []
        for policy, patch in result.promotions.items():
            try:
                self.store.patch_spec("SchedulingPolicy", None, policy, patch)
            except LookupError:
                continue
            written.append(policy)
        return written


__all__ = ["Controller"]

"""The gputwin operator's kopf handlers: every relevant watch event pokes one reconcile loop.

Start it with either of:

    gputwin operator --all-namespaces                  # or --namespace NS; --backend sim; --verbose
    kopf run -m gputwin.operator.handlers --all-namespaces [--verbose]

(`--standalone` is implied: see `configure`). It talks to the cluster of `$KUBECONFIG`, or to
its own in-cluster service account. Settings come from the environment (`OperatorConfig`):
`GPUTWIN_BACKEND` (`sim`), `GPUTWIN_NAMESPACE` (namespace whose GPUJobs and TraceReplays the
operator schedules; empty = all — keep it equal to kopf's `--namespace`; the `gputwin operator`
command sets both), `GPUTWIN_HEALTH_PORT` (`/healthz` and `/readyz`, default 8080).

Thin on purpose: all decisions are the `Controller`'s (`gputwin.operator.controller`), the
asyncio plumbing is `OperatorService`'s (`gputwin.operator.service`). Here:

- on startup: settings, the Controller factory (a `KubeStore` + the chosen backend), the
  reconcile loop and the probe server; on cleanup: stop them (a pass in flight completes), then
  send the status writes still pending and stop the watches.
  The loop is one operator-wide asyncio task that sleeps until `controller.next_event()`: kopf's
  timers and daemons exist per object, and the next event belongs to the whole cluster;
- under `GPUTWIN_BACKEND=kubernetes`, no kopf handler on pods or nodes: the backend keeps its own
  watched copy of both (`gputwin.adapters.kube.watch`, one list then one watch each, parsed as
  plain JSON), and a change that matters to scheduling (a pod appeared, was bound, ended or is
  being deleted; a node was cordoned, tainted, relabelled, went NotReady) pokes the loop from the
  watch thread (`on_cluster_change`). kopf would handle every pod event as a cause for handlers,
  which at 10,000 pods was a fifth of the operator's CPU, and only to poke;
- the five gputwin kinds are read from a watched copy too (`gputwin.adapters.kube.cluster_watch.
  ObjectWatches`, handed to the `KubeStore`; one per process, so a Controller rebuilt after an
  error keeps it): a pass lists none of them, and a change to one (created, deleted, spec edited)
  pokes the loop from its watch thread, so a pass never runs on a copy that lacks the change that
  woke it for long. Our own status writes go into the copy as the API server returns them;
- the statuses of SwitchTopology, GPUPartition and SchedulingPolicy (`CLUSTER_KINDS`: reports the
  operator never rebuilds state from, yet their counts change every pass) are written off the pass
  by one `StatusWriter` per process (`gputwin.adapters.kube.status_writer`: its own thread and client,
  latest wins per object, a pass reads its own pending writes). One per process like the copy, so
  a Controller rebuilt after a failed pass reads the writes the old one left in flight and nothing
  waits for them; cleanup sends what is pending (at most `FLUSH_SECONDS`) before the watches stop.
  GPUJob and TraceReplay statuses stay synchronous: GPUJob statuses are what a restarted operator
  adopts, and their events must precede them;
- no kopf handler on the five gputwin kinds either: the watched copy above already pokes the loop
  on every change that matters (created, deleted, spec edited, being deleted), and the first pass
  after start-up reads everything (kopf's `resume`). kopf's handlers did only `poke()`, yet each
  made kopf patch its progress and diffbase annotations onto the object: a backlog of 2,000
  GPUJobs was 2,000 PATCHes, sent at once, that shared the operator's API priority-and-fairness
  flow with its pod creates and binds (429s, the first bind late), and kopf parsed every status
  write's MODIFIED event again. So kopf here is start-up, clean-up, login and the process.

Kopf settings, and why:
- `peering.standalone`: one Controller owns scheduling; two operators would both place jobs.
  Run one replica (the Deployment uses the Recreate strategy).
- no finalizers: nothing must happen before an object goes away, and a finalizer would block
  every `kubectl delete` while the operator is down.
- progress and diffbase in annotations under `gputwin.io/` (status storage is not possible: the
  CRDs' structural status schemas prune an unknown `status.kopf`): with no resource handlers kopf
  stores nothing, so this only says where it would if a handler came back.
- `scanning.disabled`: the CRDs are installed before the operator starts; this spares the
  ClusterRole list/watch on CustomResourceDefinitions and Namespaces.
- `posting.level = WARNING`: our Controller posts the events that matter (Scheduled, Completed,
  Rejected, ReplaySucceeded, …); kopf adds only its own failures, never "Handler succeeded".
- `watching.*_timeout`: kept for a kopf watch that may come back (kopf watches nothing now); our
  own watches re-list as `gputwin.adapters.kube.watch` says, and the loop's 10 s resync backs them up.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

import kopf

from gputwin.adapters.kube import COMPONENT, KubeStore
from gputwin.adapters.kube.backend import TOLERATED
from gputwin.adapters.kube.status_writer import FLUSH_SECONDS, StatusWriter
from gputwin.adapters.kube.cluster_watch import ObjectWatches
from gputwin.operator.cluster import CLUSTER_KINDS
from gputwin.operator.config import ConfigError, OperatorConfig
from gputwin.operator.controller import Controller
from gputwin.operator.forecasts import Forecaster, ForecastSettings
from gputwin.adapters.kube.shared import on_cluster_change
from gputwin.operator.probes import serve_probes
from gputwin.operator.service import Closable, OperatorService, build_backend, build_deployer

ANNOTATIONS = "gputwin.io"
FIRST_PASS_POLL = 0.5  # seconds between looks at the loop's readiness, before forecasts start

log = logging.getLogger(__name__)


def configure(settings: kopf.OperatorSettings) -> None:
    """kopf's settings for this operator (the module docstring says why each)."""
    settings.peering.standalone = True
    settings.scanning.disabled = True
    settings.posting.level = logging.WARNING
    settings.posting.reporting_component = COMPONENT
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=ANNOTATIONS)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=ANNOTATIONS)
    settings.persistence.finalizer = f"{ANNOTATIONS}/operator"  # never added: no mandatory handlers
    settings.watching.server_timeout = 120
    settings.watching.client_timeout = 150
    settings.watching.connect_timeout = 10


class SharedObjects:
    """The process's watched copy of the gputwin objects and its writer of the cluster kinds'
    statuses, made by the first Controller that needs them (on the reconcile thread: no credentials
    is then a failed pass, like the store's own)."""

    def __init__(self, namespace: str | None, wake: Callable[[], None] | None = None) -> None:
        self.namespace, self.wake = namespace, wake
        self.watches: ObjectWatches | None = None
        self.writer: StatusWriter | None = None

    def get(self) -> ObjectWatches:
        if self.watches is None:
            self.watches = ObjectWatches.connect(self.namespace, self.wake)
        return self.watches

    def status_writer(self) -> StatusWriter:
        if self.writer is None:
            self.writer = StatusWriter.connect(CLUSTER_KINDS, self.namespace, self.get())
        return self.writer

    def stop(self, timeout: float = FLUSH_SECONDS) -> None:
        """Send the pending status writes (at most `timeout` s: blocking, call it off the event
        loop), then stop the watches; after the reconcile loop has stopped, so no pass puts more."""
        if self.writer is not None:
            self.writer.close(timeout)
        if self.watches is not None:
            self.watches.stop()


def make_controller(config: OperatorConfig, objects: SharedObjects | None = None) -> Controller:
    """A fresh Controller on the API server; it adopts whatever the statuses say is running.
    `objects`: the process's watched copy of the gputwin objects and its status writer (None: list
    them every pass, write every status synchronously)."""
    cache = objects.get() if objects else None
    writer = objects.status_writer() if objects else None
    store = KubeStore.connect(config.namespace or None, cache=cache, writer=writer)
    return Controller(store, build_backend(config.backend), deployer=build_deployer(config.backend),
                      traces=config.traces, models=config.models)  # fmt: skip


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    configure(settings)
    try:
        config = OperatorConfig.from_env()
        checked = build_backend(config.backend)  # fail now, with its message, if a setting is wrong
        if isinstance(checked, Closable):
            checked.close()
        build_deployer(config.backend)
    except ConfigError as exc:
        raise kopf.PermanentError(str(exc)) from exc  # a setting is wrong: retrying will not help

    def wake() -> None:  # from a watch thread
        service.poke_from_thread()

    objects = SharedObjects(config.namespace or None, wake)
    memo["objects"] = objects
    service = OperatorService(lambda: make_controller(config, objects), duty=config.pass_duty)
    memo["probes"] = await serve_probes(service, config.health_port)
    memo["service"] = service
    await service.start()
    scope = f"namespace {config.namespace}" if config.namespace else "all namespaces"
    log.info("gputwin operator: backend %s, %s, probes on :%d", config.backend, scope, config.health_port)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    if "service" in memo:
        await memo["service"].stop()
    if "probes" in memo:
        await memo["probes"].cleanup()
    if "objects" in memo:  # the loop has stopped: send the statuses it left pending, then stop watching
        await asyncio.to_thread(memo["objects"].stop)


@kopf.on.startup()
async def start_forecasts(memo: kopf.Memo, **_: Any) -> None:
    """`status.forecast` on a thread of its own, off the reconcile loop (`gputwin.operator.forecasts`);
    not under SLURM, whose GPUJobs the twin of the live queue does not see. Its first round waits
    for the loop's first good pass: started with a backlog, that pass places the backlog, and a
    round during it forecast every job as waiting (written once each, stale at once) on a CPU the
    pass needed."""
    try:
        config, settings = OperatorConfig.from_env(), ForecastSettings.from_env()
    except ConfigError as exc:
        raise kopf.PermanentError(str(exc)) from exc
    if config.backend == "slurm" or settings.period == 0:
        return
    keys = os.environ.get("GPUTWIN_TOLERATED_TAINTS", ",".join(TOLERATED)).split(",")
    tolerated = tuple(k.strip() for k in keys if k.strip())  # as the Kubernetes backend reads them
    forecaster = Forecaster(settings, config.namespace or None, config.backend == "kubernetes", tolerated)
    memo["forecaster"] = forecaster
    memo["forecasts_due"] = asyncio.create_task(_after_first_pass(memo, forecaster.start))


async def _after_first_pass(memo: kopf.Memo, start: Callable[[], None]) -> None:
    while (service := memo.get("service")) is None or not service.readiness().ok:
        await asyncio.sleep(FIRST_PASS_POLL)
    start()


@kopf.on.cleanup()
async def stop_forecasts(memo: kopf.Memo, **_: Any) -> None:
    if "forecasts_due" in memo:
        memo["forecasts_due"].cancel()
    if "forecaster" in memo:
        await asyncio.to_thread(memo["forecaster"].stop)


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod its service account, else the kubeconfig; kopf's own loaders, whatever is installed."""
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


# Pods and nodes: a backend's own watches (the Kubernetes backend's) poke the loop, from their
# thread, so through the event loop. Registered whatever the backend: the hook is called only by
# watches a backend starts (gputwin.adapters.kube.shared), so under sim it is simply never called.
@kopf.on.startup()
async def poke_on_cluster_changes(memo: kopf.Memo, **_: Any) -> None:
    def wake() -> None:  # from a watch thread
        service = memo.get("service")
        if service is not None:
            service.poke_from_thread()

    on_cluster_change(wake)


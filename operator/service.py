"""The operator's engine: reconcile passes on one worker thread, wake-ups, replays off the loop, health.

Plain asyncio, no kopf, so the kopf layer (`gputwin.operator.handlers`) is only decorators that
call `OperatorService.poke()`. One `OperatorService` per process:

- **Passes.** A pass is `controller.reconcile_cluster(now)` then `controller.reconcile_jobs(now)`
  — `Controller.reconcile` without its TraceReplay step, which runs here on its own thread (below).
  Every pass runs on ONE worker thread and under one lock, so the Controller (not thread-safe) and
  its `KubeStore` (one thread only) are never used concurrently, and a slow API call never blocks
  kopf's event loop. Pokes that arrive while a pass runs, or within `debounce` seconds of each
  other, make one more pass, not one each: every pass reads everything, so one is enough.
- **Wake-ups.** After a pass the loop sleeps until `controller.next_event()` (a simulated run
  ends, a policy asked to be woken), a poke, or `resync` seconds, whichever comes first; so a sim
  GPUJob ends `durationSeconds` of wall time after it started, without polling every second.
  The periodic resync also catches anything a watch may have missed.
- **Pacing.** Passes take at most `duty` of the loop's wall time (`GPUTWIN_PASS_DUTY`, default
  0.5): after a pass that took T s the next starts no sooner than T * (1/duty - 1) s later (at most
  `MAX_REST_SECONDS`). A pass reads everything, so one later pass serves every poke meanwhile; on
  a busy cluster the pokes come faster than passes end, and without the rest the loop would take a
  whole core from the API server and the kubelets (KWOK) whose work it waits for. Passes of a few
  ms (a quiet cluster, the sim backend) rest a few ms. 1 = no rest.
- **TraceReplays.** After each pass the pending replays are planned on the worker thread
  (`plan_replay`), simulated on a separate replay thread (`loop.run_in_executor`, `run_replay`
  is a pure function of its inputs), and recorded on the worker thread again (`record_replay`).
  A replay whose object was edited or deleted while it ran is dropped; the next pass plans the new
  spec. A promoted winner pokes a pass, which rebuilds the scheduler.
- **Failures.** A pass that raises (the API server is down, a bug) is logged; the Controller is
  thrown away and the next pass builds a new one from the API server, exactly as after a
  restart (`Scheduler.adopt` via the statuses), after a backoff of 1, 2, 4 … 30 s. A backend
  with threads of its own (`Closable`: the Kubernetes backend's bind pool) is closed with the
  Controller that is thrown away, and on `stop`.
- **Health.** `liveness()`: the loop is running and no pass has been stuck for `stuck` seconds.
  `readiness()`: the last pass succeeded. `gputwin.operator.probes` serves both over HTTP.

State survives restarts because nothing lives only here: the Controller rebuilds from statuses.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from gputwin.adapters.kube.backend import KubernetesBackend
from gputwin.adapters.slurm import SlurmError
from gputwin.adapters.slurm.backend import SlurmBackend, SlurmDeployer, from_sacct
from gputwin.api.bodies import Body, Obj
from gputwin.api.v1alpha1 import TraceReplaySpec
from gputwin.operator.backends import Backend, SimBackend
from gputwin.operator.config import ConfigError, pass_duty
from gputwin.operator.controller import Controller
from gputwin.operator.metrics import OperatorMetricsHooks
from gputwin.operator.replay import ReplayCluster, ReplayResult, Trace, run_replay
from gputwin.operator.store import is_deleted, name_of, namespace_of
from gputwin.runtime.capabilities import Deployer

RESYNC_SECONDS = 10.0
DEBOUNCE_SECONDS = 0.05
STUCK_SECONDS = 300.0
MAX_REST_SECONDS = 0.5  # a long pass (a burst's first wave, a slow API server) rests little
BACKOFF_SECONDS = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)

T = TypeVar("T")
ReplayKey = tuple[str | None, str, int | None]  # namespace, name, generation
Plan = tuple[TraceReplaySpec, ReplayCluster, Trace]  # spec, cluster, a ConfigMap's text or the checked file

log = logging.getLogger(__name__)


def build_deployer(name: str, env: Mapping[str, str] | None = None) -> Deployer | None:
    """What puts policies into effect besides the operator's own scheduler (SLURM only).

    `GPUTWIN_SLURM_HISTORY` (a sacct window start such as `now-30days`): fill job_submit.lua's
    sizing and estimate tables from the jobs finished since then, at every deployment.
    """
    env = os.environ if env is None else env
    if name != "slurm":
        return None
    window = env.get("GPUTWIN_SLURM_HISTORY")
    try:
        return SlurmDeployer(tables=from_sacct(window) if window else None)
    except SlurmError as exc:
        raise ConfigError(str(exc)) from exc


def rest_after(seconds: float, duty: float) -> float:
    """How long the loop rests after a pass of `seconds`, so passes take at most `duty` of the time."""
    return min(max(seconds, 0.0) * (1.0 / duty - 1.0), MAX_REST_SECONDS)


def build_backend(name: str) -> Backend:
    """The backend an operator drives (GPUTWIN_BACKEND)."""
    if name == "sim":
        return SimBackend()
    if name == "slurm":
        return SlurmBackend()
    if name == "kubernetes":
        return KubernetesBackend.from_env(metrics=OperatorMetricsHooks())
    raise ConfigError(f"GPUTWIN_BACKEND={name}: not a backend; want sim, kubernetes or slurm")


@runtime_checkable
class Closable(Protocol):
    """A backend that holds threads or files until it is closed."""

    def close(self) -> None: ...


def close_backend(controller: Controller | None) -> None:
    """Close the controller's backend if it needs it (a failure here must not hide the first one)."""
    backend = controller.backend if controller is not None else None
    if isinstance(backend, Closable):
        try:
            backend.close()
        except Exception:  # noqa: BLE001 - closing is cleanup; the operator goes on without it
            log.exception("closing the backend failed")


@dataclass(frozen=True, slots=True)
class Probe:
    """One health answer: ok or not, and what the operator knows about itself."""

    ok: bool
    detail: dict[str, Any]


class OperatorService:
    """Runs reconcile passes when poked or due, and TraceReplays beside them."""

    def __init__(
        self,
        make_controller: Callable[[], Controller],
        *,
        clock: Callable[[], float] = time.time,
        resync: float = RESYNC_SECONDS,
        debounce: float = DEBOUNCE_SECONDS,
        stuck: float = STUCK_SECONDS,
        duty: float | None = None,
    ) -> None:
        self._make, self._clock = make_controller, clock
        self.resync, self.debounce, self.stuck = resync, debounce, stuck
        self.duty = pass_duty() if duty is None else duty
        self._rest_until = 0.0  # monotonic: no pass starts before (pacing)
        self._controller: Controller | None = None
        self._lock = threading.Lock()  # the one lock every pass and replay record holds
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="gputwin-reconcile")
        self._replayer = ThreadPoolExecutor(1, thread_name_prefix="gputwin-replay")
        self._poked = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None  # set by `start`, for `poke_from_thread`
        self._task: asyncio.Task[None] | None = None
        self._replays: dict[ReplayKey, asyncio.Task[None]] = {}
        self._due: float | None = None
        self._pass_started: float | None = None
        self.passes = self.failures = 0
        self.last_error = ""
        self._ready = False

    # --- the kopf side ------------------------------------------------------------------------

    def poke(self) -> None:
        """Something changed: run a pass soon (many pokes, one pass)."""
        self._poked.set()

    def poke_from_thread(self) -> None:
        """`poke` from another thread (a watch's): through the event loop, and only when no poke is
        pending yet, so a burst of watch events costs one self-pipe write, not one each (on a busy
        cluster those writes held the watch thread, i.e. the copy, back). Skipping is safe: the
        change is in the copy before this is called, and a pending poke is cleared before the pass
        it starts reads the copy. Before `start`, or after the loop closed: nothing to wake."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._poked.is_set():
            return
        loop.call_soon_threadsafe(self.poke)

    async def start(self) -> None:
        """Start the loop; its first pass runs at once (ready only after it succeeded)."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name="gputwin-reconcile-loop")
        self.poke()

    async def stop(self) -> None:
        """Stop the loop and replays; let a pass in flight finish, so its statuses are written."""
        tasks = [t for t in (self._task, *self._replays.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._replayer.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(self._worker.shutdown, True)
        await asyncio.to_thread(close_backend, self._controller)  # binds in flight finish: off the loop
        self._controller = None

    def liveness(self) -> Probe:
        running = self._task is not None and not self._task.done()
        started = self._pass_started
        stuck = started is not None and self._clock() - started > self.stuck
        return Probe(running and not stuck, self._detail(running=running, stuck=stuck))

    def readiness(self) -> Probe:
        return Probe(self._ready, self._detail())

    def _detail(self, **extra: Any) -> dict[str, Any]:
        return {"passes": self.passes, "failures": self.failures, "lastError": self.last_error,
                "nextEvent": self._due, "replaysRunning": len(self._replays), **extra}  # fmt: skip

    # --- the loop -----------------------------------------------------------------------------

    async def _run(self) -> None:
        failed = 0
        while True:
            if failed:
                await asyncio.sleep(BACKOFF_SECONDS[min(failed, len(BACKOFF_SECONDS)) - 1])
                self._poked.clear()
            else:
                await self._wait()
            failed = 0 if await self._pass() else failed + 1
            if not failed:
                await self._start_replays()

    async def _wait(self) -> None:
        """Until poked, the next event is due, or a resync is; a burst of pokes is one wake-up."""
        due = self._due
        timeout = self.resync if due is None else min(max(due - self._clock(), 0.0), self.resync)
        try:
            await asyncio.wait_for(self._poked.wait(), timeout)
            await asyncio.sleep(self.debounce)
        except TimeoutError:
            pass
        rest = self._rest_until - time.monotonic()
        if rest > 0:  # pokes meanwhile are served by the pass after the rest (cleared below)
            await asyncio.sleep(rest)
        self._poked.clear()

    async def _pass(self) -> bool:
        self._pass_started = self._clock()
        began = time.monotonic()
        try:
            self._due = await self._in_worker(self._reconcile)
        except Exception as exc:  # any failure: start over from the API server
            log.exception("reconcile pass failed; the next pass rebuilds the state from the API server")
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            self._ready = False
            return False
        finally:
            self._pass_started = None
            ended = time.monotonic()
            self._rest_until = ended + rest_after(ended - began, self.duty)
        self.passes += 1
        self._ready = True
        return True

    async def _in_worker(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, self._locked, fn, *args)

    def _locked(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            return fn(*args)

    # --- on the worker thread -----------------------------------------------------------------

    def _ensure(self) -> Controller:
        if self._controller is None:
            self._controller = self._make()
        return self._controller

    def _reconcile(self) -> float | None:
        controller = self._ensure()
        now = self._clock()
        try:
            controller.reconcile_cluster(now)
            controller.reconcile_jobs(now)
        except BaseException:
            self._controller = None  # half a pass in memory: start over from the statuses
            close_backend(controller)
            raise
        return controller.next_event()

    def _plan_replays(self, running: frozenset[ReplayKey]) -> list[tuple[ReplayKey, Obj, Plan]]:
        """Replays to simulate now; those that cannot run (invalid, no cluster) are recorded at once."""
        controller = self._ensure()
        out = []
        for obj in controller.pending_replays():
            key = _replay_key(obj)
            if key in running:
                continue
            plan = controller.plan_replay(obj)
            if isinstance(plan, ReplayResult):
                controller.record_replay(obj, plan, self._clock())
            else:
                out.append((key, obj, plan))
        return out

    def _record(self, key: ReplayKey, result: ReplayResult) -> int:
        controller = self._ensure()
        namespace, name, generation = key
        current = controller.store.get("TraceReplay", namespace, name)
        if current is None or is_deleted(current) or _generation(current) != generation:
            return 0  # deleted or edited while it ran: the next pass plans what it says now
        return controller.record_replay(current, result, self._clock())

    # --- replays --------------------------------------------------------------------------------

    async def _start_replays(self) -> None:
        try:
            planned = await self._in_worker(self._plan_replays, frozenset(self._replays))
        except Exception:  # retried after the next pass
            log.exception("planning TraceReplays failed")
            return
        for key, _obj, plan in planned:
            self._replays[key] = asyncio.create_task(self._replay(key, plan), name=f"replay {key[1]}")

    async def _replay(self, key: ReplayKey, plan: Plan) -> None:
        loop = asyncio.get_running_loop()
        log.info("TraceReplay %s/%s: replaying", key[0], key[1])
        try:
            try:
                result = await loop.run_in_executor(self._replayer, run_replay, *plan)
            except Exception as exc:  # a crash is the replay's outcome, not ours
                log.exception("TraceReplay %s/%s crashed", key[0], key[1])
                crashed = f"the replay crashed ({type(exc).__name__}); see the operator log"
                result = ReplayResult("Failed", "ReplayError", crashed)  # not str(exc): it may quote the trace
            if await self._in_worker(self._record, key, result):
                self.poke()  # a promoted winner changed SchedulingPolicies: reschedule with them
        except Exception:  # recording failed: the replay stays pending and runs again
            log.exception("TraceReplay %s/%s: recording the result failed", key[0], key[1])
        finally:
            self._replays.pop(key, None)


def _generation(obj: Obj) -> int | None:
    return Body(obj).generation


def _replay_key(obj: Obj) -> ReplayKey:
    return (namespace_of(obj), name_of(obj), _generation(obj))


__all__ = ["OperatorService", "Probe", "build_backend", "build_deployer", "rest_after"]

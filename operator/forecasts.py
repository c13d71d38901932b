"""Forecasts on the live objects: `status.forecast` on waiting GPUJobs and on GPUPartitions.

Off the scheduling path: a `Forecaster` thread (started by the kopf layer) wakes every
`GPUTWIN_FORECAST_SECONDS` (default 60; 0: off) and runs one round in a child process (spawned:
its own interpreter, GIL and `ApiClient`, so the reconcile thread never waits for it; `NICE` nicer, so
it takes no CPU the reconcile thread wants either). A round
reads a snapshot as `gputwin forecast --kube` does (`gputwin.adapters.kube.snapshot`: the declared
cluster, the GPUJobs and, under the Kubernetes backend, our Pods and the Nodes), replays it
`GPUTWIN_FORECAST_SAMPLES` times (default 16) over `GPUTWIN_FORECAST_HORIZON` seconds (default 7
days; `gputwin.twin.forecast`), each job starting `GPUTWIN_FORECAST_START_LATENCY` seconds after room
appears (the operator's own delay as measured on the cluster, never fitted; default 0, not
modelled: `gputwin.operator.config.forecast_start_latency`), and writes merge patches of
`status.forecast` only; the pass's own status writes, being diffs of what they change, leave the
forecast alone. A waiting job gets its
start at p50 and p90 (`startTime`), every partition the time until its current queue drains
(`drainSeconds`); a job that no longer waits loses its forecast. A forecast whose quantiles did not
change is not written again until it is `REWRITE_PERIODS` periods old (so `computedAt` says how
fresh it is without a write per job per period). A failed round is logged; the next one tries again.

`write_forecasts` is the part without threads or API clients; the emulator calls `refresh` with
its file store after each reconcile (`gputwin get gpujobs` shows the same column).
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.process
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gputwin.api.bodies import Body, Obj
from gputwin.api.status import epoch_seconds, rfc3339
from gputwin.core.model import ClusterSpec
from gputwin.operator.config import ConfigError, forecast_start_latency
from gputwin.operator.store import Store
from gputwin.twin.forecast import Forecast, forecast
from gputwin.twin.snapshot import Snapshot

PERIOD = 60.0
SAMPLES = 16
HORIZON = 7 * 86400.0
REWRITE_PERIODS = 10
ROUND_TIMEOUT = 300.0  # seconds a round may take at least before it is stopped (else 5 periods)
NICE = 10  # a round's child runs this much nicer than the operator (see `yield_cpu`)
CLUSTER = ("SwitchTopology", "GPUPartition", "SchedulingPolicy")

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ForecastSettings:
    period: float = PERIOD  # seconds between rounds; 0: no forecasts
    samples: int = SAMPLES
    horizon: float = HORIZON
    start_latency: float = 0.0  # seconds from room to a start, measured (Snapshot.start_latency_s)

    @staticmethod
    def from_env(env: Mapping[str, str] | None = None) -> ForecastSettings:
        """`GPUTWIN_FORECAST_SECONDS`, `_SAMPLES`, `_HORIZON`, `_START_LATENCY` (`ConfigError` naming
        the bad one)."""
        env = os.environ if env is None else env
        period = _number(env, "GPUTWIN_FORECAST_SECONDS", PERIOD, 0.0)
        samples = int(_number(env, "GPUTWIN_FORECAST_SAMPLES", SAMPLES, 1.0))
        horizon = _number(env, "GPUTWIN_FORECAST_HORIZON", HORIZON, 1.0)
        latency = forecast_start_latency(env)
        return ForecastSettings(period, min(samples, 4096), min(horizon, 366 * 86400.0), latency)


def _number(env: Mapping[str, str], name: str, default: float, low: float) -> float:
    text = env.get(name, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        value = -1.0
    if not low <= value < float("inf"):
        raise ConfigError(f"{name}={text[:40]!r}: want a number >= {low:g}")
    return value


def write_forecasts(store: Store, cluster: ClusterSpec, snap: Snapshot, settings: ForecastSettings,
                    max_age: float = 0.0) -> int:  # fmt: skip
    """Forecast `snap` on `cluster` and write the statuses that changed; the number written."""
    result = forecast(cluster, snap, samples=settings.samples, horizon=settings.horizon, workers=1)
    base = {"computedAt": rfc3339(snap.taken_at), "horizonSeconds": settings.horizon, "samples": result.samples}
    starts = {j.job_id: {k: rfc3339(round(v)) for k, v in (("p50", j.start_p50), ("p90", j.start_p90)) if v is not None}
              for j in result.jobs}  # fmt: skip
    written = 0
    for obj in store.list("GPUJob"):
        body = Body(obj)
        job_id = f"{body.namespace or 'default'}/{body.name}"
        new = {**base, "startTime": starts[job_id]} if job_id in starts else None
        written += _write(store, "GPUJob", body, new, "startTime", snap.taken_at, max_age)
    for obj in store.list("GPUPartition"):
        body = Body(obj)
        drains = _drains(result).get(body.name)
        new = {**base, "drainSeconds": drains} if drains is not None else None
        written += _write(store, "GPUPartition", body, new, "drainSeconds", snap.taken_at, max_age)
    return written


def _drains(result: Forecast) -> dict[str, dict[str, float]]:
    return {p.partition: {k: round(v, 3) for k, v in (("p50", p.drain_p50), ("p90", p.drain_p90)) if v is not None}
            for p in result.partitions}  # fmt: skip


def _write(store: Store, kind: str, body: Body, new: Obj | None, field: str, now: float, max_age: float) -> int:
    old = body.status.get("forecast")
    if new is None and old is None:
        return 0
    if new is not None and isinstance(old, Mapping) and old.get(field) == new[field] and _age(old, now) < max_age:
        return 0  # the same forecast, recently written: computedAt stays
    try:
        store.patch_status(kind, body.namespace or None, body.name, {"forecast": new})
    except LookupError:
        return 0  # deleted since it was listed
    return 1


def _age(old: Mapping[str, Any], now: float) -> float:
    try:
        return now - epoch_seconds(str(old.get("computedAt")))
    except ValueError:
        return float("inf")


def refresh(store: Store, now: float, settings: ForecastSettings) -> int:
    """One round on a store that holds everything (the emulator's): GPUJobs only, no Pods or Nodes;
    nothing when no valid cluster is declared."""
    from gputwin.adapters.kube.snapshot import KubeSnapshotError, build_snapshot, declared_cluster

    try:
        cluster = declared_cluster(*(store.list(kind) for kind in CLUSTER))
        snap = build_snapshot(cluster, store.list("GPUJob"), (), None, now, start_latency_s=settings.start_latency)
    except KubeSnapshotError:
        return 0  # the reconcile pass reports what is wrong with the objects
    return write_forecasts(store, cluster, snap, settings)


class Forecaster:
    """The operator's forecast rounds (see the module docstring): a daemon thread that starts one
    child process per round, so replaying thousands of jobs never holds the reconcile thread's GIL."""

    def __init__(self, settings: ForecastSettings, namespace: str | None, observe: bool,
                 tolerated: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.settings, self.namespace, self.observe, self.tolerated = settings, namespace, observe, tolerated
        self.rounds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gputwin-forecaster", daemon=True)
        self._child: multiprocessing.process.BaseProcess | None = None

    def start(self) -> None:
        if self.settings.period > 0:
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        child = self._child
        if child is not None and child.is_alive():
            child.terminate()  # our own child, by its handle: a round in flight is dropped
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        # spawn, not fork: the operator has watch and HTTP threads a forked child would inherit mid-flight
        context = multiprocessing.get_context("spawn")
        while not self._stop.wait(self.settings.period if self.rounds else min(self.settings.period, 5.0)):
            child = context.Process(target=forecast_round, name="gputwin-forecast", daemon=True,
                                    args=(self.settings, self.namespace, self.observe, self.tolerated))  # fmt: skip
            self._child = child
            child.start()
            child.join(max(ROUND_TIMEOUT, 5 * self.settings.period))
            if child.is_alive():
                log.warning("forecast round %d took too long; stopped", self.rounds)
                child.terminate()
                child.join(5.0)
            elif child.exitcode and not self._stop.is_set():  # `stop` terminating it is no failure
                log.warning("forecast round %d failed (exit status %s)", self.rounds, child.exitcode)
            self.rounds += 1


def yield_cpu(nice: int = NICE) -> None:
    """Make this process `nice` nicer. A round is off the GIL of the reconcile thread but not off its
    CPU: on a 2-core machine (load 6-15), rounds of 10-16 s beside a 2,000-pod burst took the
    operator's own p99 once a node had room from 0.75 s to 2.14 s in one run (benchmarks/kube_scale.py
    phase F against B). A forecast may be late; a binding should not be. Where the OS refuses, the
    round runs as it is."""
    try:
        os.nice(nice)
    except (AttributeError, OSError):
        pass


def forecast_round(settings: ForecastSettings, namespace: str | None, observe: bool,
                   tolerated: tuple[str, ...]) -> int:  # fmt: skip
    """One snapshot, forecast and write (in the round's child process), with a client of its own."""
    from gputwin.adapters.kube.snapshot import read_snapshot
    from gputwin.adapters.kube.store import KubeStore, api_client

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(name)s [%(levelname)-8s] %(message)s")
    yield_cpu()
    began = time.monotonic()
    try:
        with api_client() as api:
            cluster, snap = read_snapshot(api, namespace, tolerated, observe=observe,
                                          start_latency_s=settings.start_latency)  # fmt: skip
            store = KubeStore(api, namespace)
            written = write_forecasts(store, cluster, snap, settings, REWRITE_PERIODS * settings.period)
        log.info("forecast round: %d running, %d pending, %d statuses written, %.1f s", len(snap.running),
                 len(snap.pending), written, time.monotonic() - began)  # fmt: skip
        return written
    except Exception as exc:  # said in one line; the exit status tells the operator it failed
        log.warning("forecast round failed: %s", str(exc)[:300])
        raise SystemExit(1) from None


__all__ = ["NICE", "ForecastSettings", "Forecaster", "forecast_round", "refresh", "write_forecasts", "yield_cpu"]

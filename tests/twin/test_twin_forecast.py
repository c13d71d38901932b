"""Forecasts from a snapshot: the oracle replay reproduces the future, golden numbers on a real
trace excerpt, quantiles, drains, seeds and workers.

The excerpt (data/philly-mix1-2vc.snapshot.json, made by data/make_snapshot.py): two VCs of
../shared/traces/philly_mix1 (8 x 8 GPUs each) replayed under fifo/first-fit to t = 10,000 s,
69 jobs running and 474 queued. The oracle test needs the trace itself (it is skipped without it).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from gputwin.api.loader import load_cluster
from gputwin.core.history import HistoryEstimator
from gputwin.core.model import NodeSpec, SwitchSpec, TopologySpec
from gputwin.core.scheduler import Scheduler
from gputwin.runtime.clock import Replay, VirtualClock, run_steps
from gputwin.runtime.loop import Runtime
from gputwin.runtime.virtual import VirtualRuns
from gputwin.twin.forecast import forecast, quantile
from gputwin.twin.seed import Watch, default_cluster
from gputwin.twin.snapfile import load_snapshot
from gputwin.twin.snapshot import OutOfService, PendingJob, RunningJob, SnapPartition, Snapshot

DATA = Path(__file__).resolve().parent / "data"
SNAPSHOT = DATA / "philly-mix1-2vc.snapshot.json"
CLUSTER = DATA / "philly-mix1-2vc.csv"


def tiny(running: tuple[RunningJob, ...] = (), pending: tuple[PendingJob, ...] = (), out: tuple = ()) -> Snapshot:
    """Two 8-GPU nodes in one partition `p`, at t = 1000."""
    topo = TopologySpec("t", (SwitchSpec("s"),), (NodeSpec("n1", 8, "s"), NodeSpec("n2", 8, "s")))
    return Snapshot(1000.0, "test", topo, (SnapPartition("p", ("n1", "n2")),), running, pending, out)


def test_the_oracle_forecast_is_the_replays_own_future() -> None:
    """Told every true run time (no spread), the twin started from a snapshot of a replay starts
    each queued job exactly when the replay itself went on to start it (fifo: later arrivals
    never overtake, so the future without them is the same)."""
    from data.make_snapshot import AT, TRACES, excerpt

    if not TRACES.is_dir():
        pytest.skip(f"shared traces not found at {TRACES}")
    cluster, jobs = excerpt()
    truth = {j.job_id: j.duration for j in jobs}  # type: ignore[attr-defined]
    scheduler = Scheduler(cluster)  # type: ignore[arg-type]
    watch = Watch()
    run_steps(Replay(Runtime(scheduler, VirtualRuns(), watch), jobs), VirtualClock())  # type: ignore[arg-type]
    snap = load_snapshot(SNAPSHOT)
    told = dataclasses.replace(
        snap,
        running=tuple(dataclasses.replace(r, estimate=truth[r.job_id]) for r in snap.running),
        pending=tuple(dataclasses.replace(p, estimate=truth[p.job_id]) for p in snap.pending),
    )
    result = forecast(cluster, told, samples=1, sigma=0.0, horizon=1e6)  # type: ignore[arg-type]
    assert snap.taken_at == AT and len(result.jobs) == 474
    assert [(j.job_id, j.start_p50) for j in result.jobs] == [(j.job_id, watch.starts[j.job_id]) for j in result.jobs]


def test_golden_forecast_on_the_trace_excerpt() -> None:
    snap = load_snapshot(SNAPSHOT)
    result = forecast(load_cluster(CLUSTER), snap, HistoryEstimator(), samples=16, seed=7, horizon=86400 * 3)
    assert (len(snap.running), len(snap.pending), result.samples) == (69, 474, 16)
    first, last = result.jobs[0], result.jobs[-1]
    drains = [(d.partition, d.pending) for d in result.partitions]
    numbers = [first.start_p50, first.start_p90, last.start_p50] + [
        x for d in result.partitions for x in (d.drain_p50, d.drain_p90)]
    assert (first.job_id, last.job_id, drains) == ("12851", "16429", [("ed69ec", 114), ("103959", 360)])
    assert numbers == pytest.approx(GOLDEN, rel=1e-12)  # floats to the last few bits of exp()
    assert all(j.start_p50 is None or j.start_p50 >= snap.taken_at for j in result.jobs)
    assert all(j.start_p90 is None or j.start_p50 is not None and j.start_p90 >= j.start_p50 for j in result.jobs)


# An empty history: every run time is drawn around DEFAULT_PRIOR (3600 s), sigma 0.5, seed 7.
GOLDEN = [10381.048375128637, 10995.060111599883, 49715.11850313816,  # first job p50/p90, last job p50
          14198.150885348663, 15995.843219584003, 39715.11850313816, 42435.06423052083]  # drains p50/p90


def test_workers_do_not_change_the_result() -> None:
    snap = load_snapshot(SNAPSHOT)
    one = forecast(load_cluster(CLUSTER), snap, samples=6, seed=3, workers=1)
    two = forecast(load_cluster(CLUSTER), snap, samples=6, seed=3, workers=2)
    assert (one.jobs, one.partitions) == (two.jobs, two.partitions)
    assert one.jobs != forecast(load_cluster(CLUSTER), snap, samples=6, seed=4, workers=1).jobs


@pytest.mark.parametrize(
    ("values", "q", "want"),
    [([3.0, 1.0, 2.0], 0.5, 2.0), ([1.0, 2.0, 3.0, 4.0], 0.5, 2.0), ([1.0, 2.0, 3.0, 4.0], 0.9, 4.0),
     ([1.0, math.inf], 0.5, 1.0), ([1.0, math.inf], 0.9, math.inf), ([5.0], 0.1, 5.0)],
    ids=["odd", "even-p50", "even-p90", "inf-above-median", "inf-at-p90", "single"],
)  # fmt: skip
def test_nearest_rank_quantiles(values: list[float], q: float, want: float) -> None:
    assert quantile(values, q) == want


def test_a_full_cluster_queues_behind_the_running_jobs_remaining_time() -> None:
    """A job running 600 s of a 1000 s estimate leaves 400 s: the queued job starts then, and the
    queue drains then; an out-of-service node takes no new work."""
    running = (RunningJob("r", "p", 0.0, 400.0, (("n1", 8),), estimate=1000.0),)
    pending = (PendingJob("q", "p", 900.0, 8, estimate=50.0),)
    result = forecast(default_cluster(tiny(running, pending, ())), tiny(running, pending, ()), samples=1, sigma=0.0)
    assert result.jobs[0].start_p50 == 1000.0  # n2 is free: it starts at once
    snap = tiny(running, pending, (OutOfService("n2", "drained"),))
    result = forecast(default_cluster(snap), snap, samples=1, sigma=0.0)
    assert (result.jobs[0].start_p50, result.jobs[0].end_p50) == (1400.0, 1450.0)
    assert [(d.partition, d.drain_p50) for d in result.partitions] == [("p", 400.0)]


@pytest.mark.parametrize(
    ("pending", "want_start", "rejected"),
    [(PendingJob("big", "p", 0.0, 32), None, True), (PendingJob("x", "nowhere", 0.0, 1), None, True),
     (PendingJob("ok", "p", 0.0, 16, estimate=10.0), 1000.0, False)],
    ids=["too-big-for-the-partition", "unknown-partition", "fits"],
)  # fmt: skip
def test_jobs_the_scheduler_refuses_are_named(pending: PendingJob, want_start: float | None, rejected: bool) -> None:
    snap = tiny(pending=(pending,))
    result = forecast(default_cluster(snap), snap, samples=2, sigma=0.0)
    job = result.jobs[0]
    assert (job.start_p50, bool(job.rejected)) == (want_start, rejected)
    assert job.started == (0.0 if rejected else 1.0)


def test_beyond_the_horizon_is_none() -> None:
    running = (RunningJob("r", "p", 0.0, 900.0, (("n1", 8), ("n2", 8)), estimate=10_000.0),)
    snap = tiny(running, (PendingJob("q", "p", 950.0, 8, estimate=5.0),))
    result = forecast(default_cluster(snap), snap, samples=1, sigma=0.0, horizon=3600)
    assert (result.jobs[0].start_p50, result.jobs[0].started, result.partitions[0].drain_p50) == (None, 0.0, None)


def test_a_running_job_past_its_estimate_still_ends_after_now() -> None:
    running = (RunningJob("r", "p", 0.0, 0.0, (("n1", 8), ("n2", 8)), estimate=10.0),)
    snap = tiny(running, (PendingJob("q", "p", 950.0, 8, estimate=5.0),))
    start = forecast(default_cluster(snap), snap, samples=1, sigma=0.0).jobs[0].start_p50
    assert start is not None and 1000.0 < start <= 1001.0


_ON_N1 = RunningJob("r", "p", 0.0, 900.0, (("n1", 8),), estimate=500.0)


@pytest.mark.parametrize(
    ("running", "nodes", "left_out"),
    [((RunningJob("r", "p", 0.0, 900.0, (("n2", 8),), estimate=500.0),), ("n1",),
      (("r", "no partition of the cluster holds node n2"),)),
     ((_ON_N1, dataclasses.replace(_ON_N1, job_id="s", slots=(("n1", 4),))), ("n1", "n2"),
      (("s", "its GPUs cannot be held in partition p (node 0: asked 4, free 0)"),)),
     ((_ON_N1, dataclasses.replace(_ON_N1, slots=(("n2", 4),))), ("n1", "n2"),
      (("r", "its GPUs cannot be held in partition p (job 'r': no partition serves it, or it is already known)"),))],
    ids=["node-no-partition-holds", "gpus-already-held", "same-id-twice"],
)  # fmt: skip
def test_running_jobs_the_cluster_cannot_hold_are_left_out_and_named(
    running: tuple[RunningJob, ...], nodes: tuple[str, ...], left_out: tuple[tuple[str, str], ...]
) -> None:
    """The cluster's partition `p` spans `nodes`; the job left out holds nothing: the queued job
    starts at once on what the others leave free."""
    snap = tiny(running, (PendingJob("q", "p", 950.0, 8, estimate=5.0),))
    cluster = default_cluster(dataclasses.replace(snap, partitions=(SnapPartition("p", nodes),)))
    for samples in (1, 3):
        result = forecast(cluster, snap, samples=samples, sigma=0.0)
        assert (result.left_out, result.jobs[0].start_p50) == (left_out, 1000.0)

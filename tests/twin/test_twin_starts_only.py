"""A forecast's replay stops once every pending job has started (`Held.seed(starts_only=True)`).

Against the full replay of the same draws: the same starts, ends and rejections of the pending
jobs; where no partition preempts it stops with jobs still running (the tail of ends is not
replayed), where one does it replays all (a preempted job's end moves). Then a whole forecast
with and without it: the same numbers.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from gputwin.core.model import JobSpec, NodeSpec, PolicySpec, SwitchSpec, TopologySpec
from gputwin.core.scheduler import Scheduler
from gputwin.twin.forecast import forecast
from gputwin.twin.seed import Held, Seeded, default_cluster
from gputwin.twin.snapshot import PendingJob, RunningJob, SnapPartition, Snapshot

NOW = 10_000.0


def _snapshot(seed: int) -> Snapshot:
    """4 nodes x 8 GPUs, all busy; 40 jobs queued (1-16 GPUs, one of 64: rejected, too big)."""
    rng = random.Random(seed)
    topo = TopologySpec("t", (SwitchSpec("s"),), tuple(NodeSpec(f"n{i}", 8, "s") for i in range(4)))
    running = tuple(RunningJob(f"r{i}", "p", NOW - 500, NOW - rng.uniform(0, 400), ((f"n{i // 2}", 4),),
                               time_limit=rng.choice((600.0, 3600.0)), user="u")
                    for i in range(8))  # fmt: skip
    pending = tuple(PendingJob(f"q{i}", "p", NOW - 100 + i, 64 if i == 7 else rng.choice((1, 2, 4, 8, 16)),
                               1, rng.randrange(3), rng.choice((None, 1800.0)), None, f"u{i % 3}", "j")
                    for i in range(40))  # fmt: skip
    part = SnapPartition("p", tuple(n.name for n in topo.nodes))
    return Snapshot(NOW, "test", topo, (part,), running, pending)


def _seeded(policy: PolicySpec, starts_only: bool) -> Seeded:
    snap = _snapshot(3)
    cluster = default_cluster(snap, policy)
    rng = random.Random(5)
    durations = [rng.uniform(600.0, 3000.0) for _ in snap.running]
    pending = [JobSpec(j.job_id, j.submit, rng.uniform(60.0, 4000.0), j.gpus, "p", j.user,
                       priority=j.priority) for j in snap.pending]  # fmt: skip
    held = Held(cluster, snap, snap.running)
    return held.seed(Scheduler(cluster), durations, pending, starts_only=starts_only)


@pytest.mark.parametrize(("policy", "stops_early"), [
    (PolicySpec(queue="priority", placement="first-fit", backfill=True), True),  # the live one
    (PolicySpec(queue="fifo"), True),
    (PolicySpec(queue="srtf"), False),  # preemptive: replayed to the end
])  # fmt: skip
def test_a_starts_only_replay_sees_what_the_full_one_sees(policy: PolicySpec, stops_early: bool) -> None:
    full, cut = _seeded(policy, False), _seeded(policy, True)
    whole, short = full.run(1e9), cut.run(1e9)
    ids = [j.job_id for j in full.pending]
    assert [whole.starts.get(i) for i in ids] == [short.starts.get(i) for i in ids]
    assert [whole.ends.get(i) for i in ids] == [short.ends.get(i) for i in ids]
    assert whole.rejects == short.rejects and set(whole.rejects) == {"q7"}
    assert not full.runtime.runs.running()  # type: ignore[attr-defined]  # VirtualRuns
    assert bool(cut.runtime.runs.running()) is stops_early  # type: ignore[attr-defined]
    assert cut.starts_only is stops_early


def test_a_forecast_is_the_same_with_its_replays_cut_short(monkeypatch: pytest.MonkeyPatch) -> None:
    snap = _snapshot(11)
    cluster = default_cluster(snap)
    cut = dataclasses.replace(forecast(cluster, snap, samples=6, seed=2, workers=1), wall_seconds=0.0)
    seed = Held.seed
    monkeypatch.setattr(Held, "seed", lambda self, *a, starts_only=False, **kw: seed(self, *a, starts_only=False, **kw))
    full = dataclasses.replace(forecast(cluster, snap, samples=6, seed=2, workers=1), wall_seconds=0.0)
    assert cut == full and any(j.end_p50 is not None for j in cut.jobs)

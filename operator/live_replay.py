"""A TraceReplay on the live queue (`spec.trace.live`): candidates compared on the present's forecast.

`live_snapshot` reads the operator's present from its own scheduler (what the emulator and the
kopf operator both hold, whatever the backend): the GPUJobs running on their GPUs since their
start, the queued ones in the scheduler's queue order, the nodes out of service; a job's
`durationSeconds` is its estimate, as in `status.forecast` (`gputwin.adapters.kube.snapshot`).
It is taken on the controller's thread, when the replay is planned, and cut down to the
replay's partitions.

`live_scores` forks it once per candidate (`gputwin.twin.whatif.outcomes`: one plan of draws, one
seed, so sample i gives every candidate the same run times and the differences are the policies'
alone) over the horizon, and summarises each candidate as `gputwin whatif` does: over the jobs
queued now, the mean over samples, a job not ended by the horizon counted as ending there.
`gputwin.operator.replay.run_replay` ranks them with `current` first, as for a trace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gputwin.api.convert import candidate
from gputwin.api.workloads import LiveQueue, TraceReplaySpec
from gputwin.core.model import Candidate, ClusterSpec
from gputwin.core.scheduler import Scheduler
from gputwin.sim.evaluation import Scores
from gputwin.sim.metrics import horizon_figures
from gputwin.sim.run import with_overrides
from gputwin.twin.forecast import Sample
from gputwin.twin.replayed import state_snapshot
from gputwin.twin.snapshot import OutOfService, Snapshot
from gputwin.twin.whatif import outcomes

NOTHING_QUEUED = "nothing queued: the live queue has no job to compare on"


def live_snapshot(scheduler: Scheduler, cluster: ClusterSpec, now: float) -> Snapshot:
    """The scheduler's present at `now`, on `cluster` (the replay's partitions only)."""
    snap = state_snapshot(scheduler, scheduler.cluster, now)
    names = scheduler.topology.node_names
    estimates = {j.spec.job_id: j.spec.duration for j in scheduler.jobs.values() if j.spec.duration > 0}
    out = sorted({names[i] for part in scheduler.partitions.values() for i in part.ledger.out_of_service()})
    parts = {p.name for p in cluster.partitions}
    nodes = {n.name for n in cluster.topology.nodes}
    running = tuple(dataclasses.replace(r, estimate=estimates.get(r.job_id)) for r in snap.running
                    if r.partition in parts)  # fmt: skip
    pending = tuple(dataclasses.replace(p, estimate=estimates.get(p.job_id)) for p in snap.pending
                    if p.partition in parts)  # fmt: skip
    return dataclasses.replace(
        snap, source="live", topology=cluster.topology, running=running, pending=pending,
        partitions=tuple(s for s in snap.partitions if s.name in parts),
        out_of_service=tuple(OutOfService(n, "out of service") for n in out if n in nodes),
    )  # fmt: skip


def live_scores(
    spec: TraceReplaySpec, cluster: ClusterSpec, snap: Snapshot
) -> list[tuple[Candidate | None, Scores]]:
    """The current policies (None) and each candidate as listed, with its scores over the fork."""
    live = spec.trace.live
    assert live is not None
    listed: list[Candidate | None] = [candidate(c) for c in spec.candidates]
    clusters = [cluster, *(with_overrides(cluster, c) for c in listed if c is not None)]
    # workers=1: a replay thread of the operator forks no processes (the forecaster's child does)
    runs = outcomes(clusters, snap, samples=live.samples, seed=live.seed, horizon=live.horizon_seconds,
                    workers=1)  # fmt: skip
    return [(c, summary(snap, run.samples, live)) for c, run in zip([None, *listed], runs)]


def summary(snap: Snapshot, samples: Sequence[Sample], live: LiveQueue) -> Scores:
    """The metrics of one candidate over the jobs queued now (see the module docstring)."""
    mean = horizon_figures(snap.taken_at, [j.submit for j in snap.pending], samples, live.horizon_seconds)
    return {**mean, "jobs": round(mean["jobs"])}  # a count, as in a trace replay's status


def live_message(spec: TraceReplaySpec, snap: Snapshot, policies: int) -> str:
    """What was compared, for the end of the status message."""
    live = spec.trace.live
    assert live is not None
    return (f"{len(snap.pending):,} queued and {len(snap.running):,} running jobs forecast under {policies} "
            f"policies over {live.horizon_seconds:,.0f} s ({live.samples} samples)")  # fmt: skip


__all__ = ["NOTHING_QUEUED", "live_message", "live_scores", "live_snapshot", "summary"]

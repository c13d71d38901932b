"""A snapshot of a replay at a chosen moment: the present of a cluster that a trace drives.

`snapshot_at(cluster, jobs, at)` replays `jobs` (sorted by submit) on the one runtime up to `at`
and reads what the scheduler holds then: running jobs on their GPUs since their start, queued
jobs in each partition's queue order (partitions in declared order), arrivals after `at` unseen.
It turns a real trace into a realistic present for tests and benchmarks, and is the "snapshot a
replay at random moments" step of measuring forecasts against what then happened. Jobs carry no
time limit or estimate: what a forecast knows of them comes from its estimator.
`state_snapshot` reads the same from a scheduler paused by a replay the caller drives
(`gputwin.twin.horizon` takes many snapshots along one replay).
"""

from __future__ import annotations

from collections.abc import Sequence

from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.core.scheduler import Scheduler, SchedulerOptions
from gputwin.core.state import JobState, Phase
from gputwin.runtime.clock import Replay, VirtualClock, run_steps
from gputwin.runtime.loop import Runtime
from gputwin.runtime.virtual import VirtualRuns
from gputwin.twin.snapshot import PendingJob, RunningJob, SnapPartition, Snapshot


def snapshot_at(
    cluster: ClusterSpec, jobs: Sequence[JobSpec], at: float, options: SchedulerOptions = SchedulerOptions()
) -> Snapshot:
    """The replay's state at `at` (every event at or before `at` has happened)."""
    scheduler = Scheduler(cluster, options)
    runtime = Runtime(scheduler, VirtualRuns())
    run_steps(Replay(runtime, jobs), VirtualClock(), at)
    return state_snapshot(scheduler, cluster, at)


def state_snapshot(scheduler: Scheduler, cluster: ClusterSpec, at: float) -> Snapshot:
    """What `scheduler` (of `cluster`) holds now, `at`, as a snapshot (a replay paused there)."""
    names = scheduler.topology.node_names
    running = tuple(_running(job, names) for job in scheduler.jobs.values() if job.phase is Phase.RUNNING)
    pending = tuple(_pending(job) for part in scheduler.partitions.values() for job in part.queued_jobs())
    partitions = tuple(SnapPartition(p.name, p.nodes) for p in cluster.partitions)
    return Snapshot(at, "replay", cluster.topology, partitions, running, pending)


def _running(job: JobState, names: Sequence[str]) -> RunningJob:
    spec = job.spec
    slots = tuple((names[i], g) for i, g in job.slots)
    return RunningJob(spec.job_id, job.partition, spec.submit, job.seg_start, slots, user=spec.user, name=spec.name,
                      gpu_milli=spec.gpu_milli, model=spec.model, gpu_profile=spec.gpu_profile)  # fmt: skip


def _pending(job: JobState) -> PendingJob:
    spec = job.spec
    return PendingJob(spec.job_id, job.partition, spec.submit, job.gpus, spec.num_nodes, spec.priority,
                      user=spec.user, name=spec.name, gpu_milli=spec.gpu_milli, model=spec.model,
                      gpu_profile=spec.gpu_profile)  # fmt: skip


__all__ = ["snapshot_at", "state_snapshot"]

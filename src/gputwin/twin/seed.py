"""The one runtime started from a snapshot instead of from empty, and one replay of it.

`replay` builds what the simulator builds (`Scheduler`, `VirtualRuns`, `Runtime`) and, before the
clock moves: marks the snapshot's out-of-service nodes (`Scheduler.set_out_of_service`), adopts
every running job on the GPUs it holds since its start (as the operator adopts runs after a
restart: its run ends `duration` after its start, so what is left is the draw minus the elapsed
time), and queues the pending jobs in the snapshot's queue order (their waits count from their
own submit times). The clock starts at `taken_at` and runs to the horizon (a forecast's replay,
made `starts_only`, stops once every pending job has started, if no partition preempts).

A snapshot's partition is matched to the cluster's partition of the same name. A running job that
no partition can hold where it runs (live partitions may overlap, the core's may not) is adopted
by the partition that holds its first node; one that none can hold is left out and named.
`default_cluster` is the cluster a snapshot implies when none is declared: its nodes, each in the
first partition listing it, with SLURM's own order (priority, then submit; EASY backfill).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from gputwin.core.model import ClusterSpec, JobSpec, PartitionSpec, PolicySpec
from gputwin.core.scheduler import Scheduler, SchedulerOptions
from gputwin.runtime.clock import Replay, VirtualClock, run_steps, run_until_settled
from gputwin.runtime.loop import Runtime
from gputwin.runtime.virtual import VirtualRuns
from gputwin.runtime.watch import StartsWatch, Watch
from gputwin.twin.adoption import Adoptees, adopt_all
from gputwin.twin.snapshot import RunningJob, Snapshot

_SUBMIT = attrgetter("submit")
LIVE_POLICY = PolicySpec(queue="priority", placement="first-fit", backfill=True)


def default_cluster(snap: Snapshot, policy: PolicySpec = LIVE_POLICY) -> ClusterSpec:
    """The snapshot's nodes and partitions (made disjoint, see the module docstring) as a cluster."""
    owner: dict[str, str] = {}
    for part in snap.partitions:
        for node in part.nodes:
            owner.setdefault(node, part.name)
    parts = []
    for part in snap.partitions:
        nodes = tuple(n for n in part.nodes if owner[n] == part.name)
        if nodes:
            parts.append(PartitionSpec(part.name, nodes, (part.name,), policy))
    return ClusterSpec(snap.topology, tuple(parts))


@dataclass
class Seeded:
    """A runtime holding the snapshot's present, ready to be driven from `now`."""

    runtime: Runtime
    watch: Watch
    pending: list[JobSpec]
    now: float
    left_out: dict[str, str] = field(default_factory=dict)  # running job id -> why it is not held
    # Stop once every pending job has started or been rejected (`Held.seed`'s `starts_only`).
    starts_only: bool = False
    run_times: list[float] | None = None  # the pending jobs' run times (None: their specs')
    # A hint of the queues' order (job id -> place; `Scheduler.submit_all`'s `ranks`): empty, this
    # replay fills it once its pending jobs are queued, for the next replay of the same jobs.
    ranks: dict[str, int] | None = None

    def run(self, until: float) -> Watch:
        """Queue the pending jobs at `now` and replay until `until` (or nothing is left; made
        `starts_only`: until every pending job has started or been rejected)."""
        runtime, now, pending = self.runtime, self.now, self.pending
        replay, clock = Replay(runtime, ()), VirtualClock(now)
        if pending and pending[0].submit <= until:
            # The first instant, as a replay of `pending` steps it (each arrived by now), but
            # queued in one batch (`Runtime.submit_all`): a sorted insert per job was most of it.
            runtime.due(now)
            ranks = self.ranks
            run_times = self.run_times or [job.duration for job in pending]
            runtime.submit_all(pending, run_times, now, ranks or None)
            if ranks is not None and not ranks:
                ranks.update(queue_ranks(runtime.scheduler))
            runtime.cycle(now)
        if not self.starts_only:
            run_steps(replay, clock, until)
            return self.watch
        # Each pending job adds its id to the starts or the rejects (a second one of an id is
        # rejected): the two hold as many entries as there are jobs only once all are settled.
        run_until_settled(replay, clock, until, self.watch.starts, self.watch.rejects, len(pending))
        return self.watch


def queue_ranks(scheduler: Scheduler) -> dict[str, int]:
    """Each queued job's place in its partition's queue (job id -> place)."""
    parts = scheduler.partitions.values()
    return {job.job_id: k for part in parts for k, job in enumerate(part.queued_jobs())}


def task_types(cluster: ClusterSpec) -> dict[str, str]:
    """Partition name -> a task type that routes there (the first it serves)."""
    return {p.name: p.task_types[0] for p in cluster.partitions if p.task_types}


def seed(
    cluster: ClusterSpec,
    snap: Snapshot,
    running: Sequence[tuple[RunningJob, float]],
    pending: Sequence[JobSpec],
    options: SchedulerOptions = SchedulerOptions(),
    scheduler: Scheduler | None = None,
) -> Seeded:
    """The runtime at `snap.taken_at`: `running` are (job, total run time drawn), `pending` the
    queued jobs as specs, in queue order (submit times at most `taken_at`)."""
    held = Held(cluster, snap, [job for job, _ in running])
    return held.seed(scheduler or Scheduler(cluster, options), [d for _, d in running], pending)


class Held:
    """What every replay of one snapshot on one cluster shares, worked out once: where each
    running job is held (its partition, task type and GPU indexes, or why it cannot be) and the
    clock's start. A forecast seeds one runtime per sample from it; only the run times differ."""

    def __init__(self, cluster: ClusterSpec, snap: Snapshot, running: Sequence[RunningJob]) -> None:
        self.snap = snap
        self.now = snap.taken_at
        self.kinds = task_types(cluster)
        holders = _holders(cluster)
        index = {node.name: i for i, node in enumerate(cluster.topology.nodes)}  # `Topology.node_index`
        self.running = [_where(job, self.kinds, holders, index) for job in running]
        self.adoptees = adoptees = Adoptees()  # the same, as the compiled adoption reads them
        for where in self.running:
            job = where.job
            adoptees.add(job.job_id, where.spec, where.slots, job.start, job.share_gpu, where.partition,
                         where.why)  # fmt: skip

    def seed(self, scheduler: Scheduler, durations: Sequence[float], pending: Sequence[JobSpec], *,
             starts_only: bool = False, run_times: list[float] | None = None,
             ranks: dict[str, int] | None = None) -> Seeded:  # fmt: skip
        """The runtime at the snapshot with the running jobs' run times `durations` (in the order
        given when made) and `pending` queued (see `seed`), run for `run_times` if given (else
        their specs' durations: a forecast shares its specs across samples). `starts_only`: its replay is wanted
        only for the pending jobs' starts and ends; when no partition preempts, it then stops
        once all have started (each end is its start plus its run: nothing can change it) and
        tells no completion. The tail of ends was a good part of a forecast's replay. `ranks`:
        `Seeded.ranks`."""
        starts_only = starts_only and not any(p.policy.preemptive for p in scheduler.partitions.values())
        watch, runs = StartsWatch() if starts_only else Watch(), VirtualRuns()
        runtime = Runtime(scheduler, runs, watch)
        scheduler.set_out_of_service(out.node for out in self.snap.out_of_service)
        now = self.now
        # Each sample of a forecast queues 10,000 specs already due: checked at C speed, not per spec here.
        if all(map(now.__ge__, map(_SUBMIT, pending))):  # each `submit <= now`
            queue = list(pending)
        else:
            queue = [j if j.submit <= now else dataclasses.replace(j, submit=now) for j in pending]
        seeded = Seeded(runtime, watch, queue, now, starts_only=starts_only, run_times=run_times, ranks=ranks)
        seeded.left_out.update(adopt_all(scheduler, runs, self.adoptees, durations))
        return seeded


@dataclass(frozen=True, slots=True)
class _Where:
    """Where a running job is held: its partition, the task type routing there, its slots as
    node indexes; or why it cannot be (`why`, then nothing else counts)."""

    job: RunningJob
    partition: str = ""
    task_type: str = ""
    slots: tuple[tuple[int, int], ...] = ()
    why: str = ""
    # Its spec, made once for every replay: each adopts it for its own draw (`Scheduler.adopt`'s
    # `duration`; the spec's own is 0). A spec made per job and sample cost more than adopting it.
    spec: JobSpec | None = None


def _where(job: RunningJob, kinds: dict[str, str], holders: dict[str, str], index: dict[str, int]) -> _Where:
    nodes = [node for node, _ in job.slots]
    partition = job.partition if all(holders.get(n) == job.partition for n in nodes) else holders.get(nodes[0])
    if partition is None or partition not in kinds:
        return _Where(job, why=f"no partition of the cluster holds node {nodes[0]}")
    missing = [node for node in nodes if node not in index]
    if missing:  # as the scheduler's own lookup would have said
        return _Where(job, why=f"its GPUs cannot be held in partition {partition} ({KeyError(missing[0])})")
    task_type = kinds[partition]
    spec = JobSpec(job.job_id, job.submit, 0.0, job.gpus, task_type, job.user, job.name, "RUNNING", 0, len(job.slots),
                   model=job.model, gpu_milli=job.gpu_milli, gpu_profile=job.gpu_profile)  # fmt: skip
    return _Where(job, partition, task_type, tuple((index[node], gpus) for node, gpus in job.slots), "", spec)


def _holders(cluster: ClusterSpec) -> dict[str, str]:
    return {node: p.name for p in cluster.partitions for node in p.nodes}


__all__ = ["LIVE_POLICY", "Held", "Seeded", "StartsWatch", "Watch", "default_cluster", "seed", "task_types"]

"""History -> the data tables of job_submit.lua: GPU sizing and QSSF/SRTF runtime estimates.

`history_tables(cluster, jobs)` turns finished jobs (a trace file, or `sacct` on the live cluster)
into `LuaTables` for `render`:

- estimates: mean run time per (user, job name) of the jobs (`render.estimate_table`), or with
  `model` (a folder `gputwin estimator train` wrote) that model's predictions for them;
- GPU sizes: the `history` sizing rule (`render.sizing_table`) evaluated on a `JobHistory` of run
  times and queueing delays per (partition, task type, GPU count). A trace carries submit and
  run times but not the waits the sizing rule weighs (sacct's Start is folded into the run time
  by the readers), so the waits come from replaying the history through the simulator on the
  same cluster with every request kept as asked (`sizing: as-requested`): the twin's own model
  of what each size waited. Documented, deterministic, and the same for every trace format.

Which partition and task type a history job counts for: a job whose task type a partition serves
counts there; a job from `sacct` carries its partition name as task type (the readers' rule), so
it counts for every task type that partition serves (they share its queue). Anything else is
left out and counted in `HistoryTables.skipped`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gputwin.adapters.traces import read_trace

from gputwin.core.history import JobHistory
from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.sim.run import Overrides, run

from .history import TimeBound, sacct_history
from .render_gres import cluster_shards
from .render import LuaTables, estimate_table, sizing_table
from .render_tables import learned_estimate_table

FINISHED = "COMPLETED"


@dataclass(frozen=True, slots=True)
class HistoryTables:
    """The tables plus what went into them (for the CLI's summary line)."""

    tables: LuaTables
    jobs: int
    used: int
    skipped: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, object]:
        return {
            "history_jobs": self.jobs,
            "history_used": self.used,
            "history_skipped": dict(sorted(self.skipped.items())),
            "gpu_sizes": len(self.tables.gpu_sizes),
            "estimates": len(self.tables.estimates),
        }


def tables_from_trace(cluster: ClusterSpec, path: Path, fmt: str = "auto", model: Path | None = None) -> HistoryTables:
    """Tables from a trace file (any format `gputwin.adapters.traces.read_trace` reads)."""
    trace = read_trace(path, fmt)
    return history_tables(cluster, trace.jobs, model, trace.origin)


def tables_from_sacct(cluster: ClusterSpec, start: TimeBound, end: TimeBound = "now",
                      transport: str = "cli", model: Path | None = None) -> HistoryTables:  # fmt: skip
    """Tables from the live cluster's accounting: finished jobs of the window, all partitions."""
    # Shares read back against the rendered config's shards per GPU (one count, or none: whole GPUs).
    found = sacct_history(start, end, None, [FINISHED], transport, shards_per_gpu=cluster_shards(cluster))
    return history_tables(cluster, found.jobs, model, found.origin)


def history_tables(cluster: ClusterSpec, jobs: Iterable[JobSpec], model: Path | None = None,
                   origin: float = 0.0) -> HistoryTables:  # fmt: skip
    """Estimates and GPU sizes from finished jobs, as job_submit.lua's tables; with `model`, the
    estimates are that saved model's predictions (`origin`: the epoch of the jobs' time 0)."""
    all_jobs = list(jobs)
    placed, skipped = _assign(cluster, all_jobs)
    finished = [job for job in placed if job.state == FINISHED]
    skipped["not finished"] = len(placed) - len(finished)
    tables = LuaTables(
        gpu_sizes=sizing_table(cluster, _replayed_history(cluster, finished)) if finished else {},
        estimates=estimate_table(finished) if model is None else learned_estimate_table(
            [job for job in all_jobs if job.state == FINISHED], finished, model, origin),  # each job once
    )
    return HistoryTables(tables, len(all_jobs), len(finished), {k: v for k, v in skipped.items() if v})


def _assign(cluster: ClusterSpec, jobs: Sequence[JobSpec]) -> tuple[list[JobSpec], dict[str, int]]:
    """Each job under a task type the cluster routes (see the module docstring); others counted."""
    served = {task for part in cluster.partitions for task in part.task_types}
    by_partition = {part.name: part.task_types for part in cluster.partitions if part.task_types}
    placed: list[JobSpec] = []
    skipped = {"no partition serves it": 0}
    for job in jobs:
        if job.task_type in served:
            placed.append(job)
        elif job.task_type in by_partition:
            # One copy per task type of that partition; distinct ids keep the replay happy.
            placed += [dataclasses.replace(job, job_id=f"{job.job_id}:{task}", task_type=task)
                       for task in by_partition[job.task_type]]  # fmt: skip
        else:
            skipped["no partition serves it"] += 1
    return placed, skipped


def _replayed_history(cluster: ClusterSpec, jobs: Sequence[JobSpec]) -> JobHistory:
    """Run and wait per (partition, task type, GPUs) from a replay with requests kept as asked."""
    ordered = sorted(jobs, key=lambda job: (job.submit, job.seq, job.job_id))
    _, outcome = run(cluster, ordered, overrides=Overrides(sizing="as-requested"))
    history = JobHistory()
    for job in outcome.finished:
        history.record(job.partition, job.spec, job.gpus, job.duration, job.wait)
    return history

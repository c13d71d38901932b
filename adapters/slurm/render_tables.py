"""History -> job_submit.lua's data: the GPU-sizing table and the mean-run-time estimate table."""

from __future__ import annotations

from collections.abc import Iterable

from gputwin.api.meta import CATCH_ALL
from gputwin.core.history import JobHistory
from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.core.plugins import make_sizer
from gputwin.core.sizing import HistorySizing

from .checks import NAME

def sizing_table(cluster: ClusterSpec, history: JobHistory) -> dict[tuple[str, str, int], int]:
    """The `history` sizing rule evaluated per (partition, task type, requested GPUs) with evidence."""
    gpus_of = {n.name: n.gpus for n in cluster.topology.nodes}
    table: dict[tuple[str, str, int], int] = {}
    for part in cluster.partitions:
        if part.policy.sizing != "history":
            continue
        sizer = make_sizer("history", part.policy.params)
        assert isinstance(sizer, HistorySizing)
        capacity = sum(gpus_of[n] for n in part.nodes)
        # "*" is no job's task type: jobs it catches keep their own and are sized as requested.
        for task in (t for t in part.task_types if t != CATCH_ALL):
            for requested in range(1, capacity + 1):
                run = history.run_stats(part.name, task, requested)
                if run.count == 0:
                    continue  # never requested: no evidence to size from
                job = JobSpec("table", 0.0, run.mean, requested, task)
                chosen = sizer.size(job, part.name, capacity, history).gpus
                if chosen != requested:
                    table[(part.name, task, requested)] = chosen
    return table


def estimate_table(jobs: Iterable[JobSpec]) -> dict[tuple[str, str], float]:
    """Mean run time per (user, job name) of finished jobs; names the Lua guard refuses are skipped."""
    sums: dict[tuple[str, str], tuple[float, int]] = {}
    for job in jobs:
        if NAME.fullmatch(job.user) is None or NAME.fullmatch(job.name) is None:
            continue  # e.g. `a|b`: such a job cannot be matched safely, so it gets the default
        total, count = sums.get((job.user, job.name), (0.0, 0))
        sums[(job.user, job.name)] = (total + job.duration, count + 1)
    return {key: total / count for key, (total, count) in sums.items()}

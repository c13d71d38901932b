"""History -> job_submit.lua's data: the GPU-sizing table and the estimate table (mean run time, or a
saved learned model's predictions: `learned_estimate_table`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

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


def learned_estimate_table(history: Iterable[JobSpec], jobs: Iterable[JobSpec], model: Path,
                           origin: float = 0.0) -> dict[tuple[str, str], float]:  # fmt: skip
    """The saved learned model's predicted run time per (user, job name) of `jobs`, instead of their
    mean (`gputwin.estimators.saved.SavedModel.table`; every finished job of `history` informs the
    features); names the Lua guard refuses are skipped, as in `estimate_table`."""
    from gputwin.estimators.saved import read  # LightGBM loads only when a model is asked for

    keys = {(j.user, j.name) for j in jobs if NAME.fullmatch(j.user) and NAME.fullmatch(j.name)}
    return read(model).table(history, origin, keys)


def policy_model(cluster_path: Path, base: Path | None) -> Path | None:
    """The folder of the learned model the cluster's used SchedulingPolicies name (resolved inside
    the model folder `base`, `$GPUTWIN_MODEL_DIR`), or None when they use history (or a VC table)."""
    from gputwin.api.estimator import cluster_model
    from gputwin.api.loader import load_documents
    from gputwin.api.v1alpha1 import GPUPartition, SchedulingPolicy
    from gputwin.estimators.modeldir import ModelRefused, locate

    if cluster_path.suffix.lower() == ".csv":
        return None  # a VC table declares no policies
    resources = load_documents(cluster_path)
    used = {r.spec.policy for r in resources if isinstance(r, GPUPartition)}
    uses = [(r.metadata.name, r.spec.estimator) for r in resources
            if isinstance(r, SchedulingPolicy) and r.metadata.name in used]  # fmt: skip
    try:
        named = cluster_model(uses)
    except ValueError as exc:
        raise ModelRefused(f"{cluster_path}: {exc}") from None
    if named is None:
        return None
    policy, name = named
    return locate(name, base, f"{cluster_path}: SchedulingPolicy/{policy}: spec.estimator.model")

"""The preemptive re-rank of a partition whose nodes declare GPU models (docs/tenancy.md).

The plain re-rank (`gputwin.core.cycle`) counts one pool of GPUs: a queued job ranked ahead of a
running one takes its place whatever model either runs on. With models that would preempt an a100
job for an h100 job that cannot start on its GPUs, paying the a100 job's checkpoint for nothing.
Here each model has a budget of its own beside the partition's: a job asking for a model spends
that model's GPUs and the total; a job asking for any model spends the total only (where it lands
is the placer's choice, so it may still start fewer than were ranked); a running job spends the
GPUs it holds, model by model. A running job is kept while every model it holds has room.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gputwin.core.ledger import Ledger
from gputwin.core.placement import ModelPools
from gputwin.core.policies import Key, RunningEntry
from gputwin.core.state import JobState


def rank_by_model(pools: ModelPools, ledger: Ledger, order: Iterable[tuple[Key, int]], queued: Mapping[int, JobState],
                  running: list[RunningEntry]) -> tuple[list[JobState], list[JobState]]:  # fmt: skip
    """Walk the queue (`order`, in key order) and the running jobs (`running`, sorted) in key order,
    queued first on equal keys; the jobs to start, and the running jobs to preempt (`victims`)."""
    held = {entry[1]: _held(pools, ledger, entry[2]) for entry in running}
    budget = {model: sum(ledger.free_of(n) for n in nodes) for model, nodes in pools.nodes.items()}
    for models in held.values():
        for model, gpus in models.items():
            budget[model] += gpus
    total = ledger.usable_gpus()
    to_run: list[JobState] = []
    victims: list[JobState] = []
    entries = iter(order)
    entry = next(entries, None)
    count, r = len(running), 0
    while entry is not None or r < count:
        if entry is not None and (r == count or entry[0] <= running[r][0]):
            job, entry = queued[entry[1]], next(entries, None)
            model = job.spec.model
            if job.gpus > total or (model and job.gpus > budget[model]):
                continue
            total -= job.gpus
            if model:
                budget[model] -= job.gpus
            to_run.append(job)
        else:
            job, models = running[r][2], held[running[r][1]]
            r += 1
            need = sum(models.values())
            if need > total or any(gpus > budget[model] for model, gpus in models.items()):
                victims.append(job)
                continue
            total -= need
            for model, gpus in models.items():
                budget[model] -= gpus
    return to_run, victims


def _held(pools: ModelPools, ledger: Ledger, job: JobState) -> dict[str, int]:
    """The GPUs `job` holds on nodes in service, by model (those out of service no one else could use)."""
    out: dict[str, int] = {}
    for node, gpus in job.slots:
        if ledger.in_service(node):
            model = pools.model_of[node]
            out[model] = out.get(model, 0) + gpus
    return out


__all__ = ["rank_by_model"]

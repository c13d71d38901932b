"""What a preemptive re-rank has left to hand out: one pool of GPUs, or a budget per GPU model.

A re-rank (`gputwin.core.cycle`, and `gputwin.core.quota.rank_with_quota` under quotas) walks queued
and running jobs in key order and keeps or starts each that its budget still allows. Counted as one
pool, a queued job ranked ahead of a running one takes its place whatever model either runs on: that
would preempt an a100 job for an h100 job that cannot start on its GPUs, paying the a100 job's
checkpoint for nothing. So a partition whose nodes declare models (docs/tenancy.md) spends a
`ModelBudget`: each model has a budget of its own beside the partition's; a job asking for a model
spends that model's GPUs and the total; a job asking for any model spends the total only (where it
lands is the placer's choice, so it may still start fewer than were ranked); a running job spends
the GPUs it holds, model by model, and is kept while every model it holds has room.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from gputwin.core.ledger import Ledger
from gputwin.core.placement import ModelPools
from gputwin.core.policies import Key, RunningEntry
from gputwin.core.state import JobState, PartitionState


class GpuBudget(Protocol):
    """The GPUs a re-rank walk has left: `take` spends what a job needs if it has room."""

    def take(self, job: JobState, running: bool) -> bool:
        """Spend what `job` (`running` or queued) needs and say True, or spend nothing and say False."""
        ...

    def spent(self) -> bool:
        """Nothing more can be taken: the walk may stop."""
        ...


class PoolBudget:
    """One pool of `gpus`; a running job needs `need(job)` of them (with nodes out of service
    (`partial`), what it holds in service, which may be none: then the walk cannot stop early)."""

    def __init__(self, gpus: int, need: Callable[[JobState], int], partial: bool) -> None:
        self.gpus, self.need, self.partial = gpus, need, partial

    def take(self, job: JobState, running: bool) -> bool:
        size = self.need(job) if running else job.gpus
        if size > self.gpus:
            return False
        self.gpus -= size
        return True

    def spent(self) -> bool:
        return self.gpus == 0 and not self.partial


class ModelBudget:
    """The partition's usable GPUs and, per model, its free GPUs plus those the `running` jobs hold."""

    def __init__(self, pools: ModelPools, ledger: Ledger, running: Iterable[RunningEntry]) -> None:
        self.held = {entry[1]: _held(pools, ledger, entry[2]) for entry in running}
        self.budget = {model: sum(ledger.free_of(n) for n in nodes) for model, nodes in pools.nodes.items()}
        for models in self.held.values():
            for model, gpus in models.items():
                self.budget[model] += gpus
        self.total = ledger.usable_gpus()

    def take(self, job: JobState, running: bool) -> bool:
        if running:
            return self._take_held(self.held[job.order])
        model = job.spec.model
        if job.gpus > self.total or (model and job.gpus > self.budget[model]):
            return False
        self.total -= job.gpus
        if model:
            self.budget[model] -= job.gpus
        return True

    def _take_held(self, models: dict[str, int]) -> bool:
        need = sum(models.values())
        if need > self.total or any(gpus > self.budget[model] for model, gpus in models.items()):
            return False
        self.total -= need
        for model, gpus in models.items():
            self.budget[model] -= gpus
        return True

    def spent(self) -> bool:
        # A running job holding GPUs only out of service needs none: never stop early.
        return False


def budget_of(part: PartitionState, running: Iterable[RunningEntry]) -> GpuBudget:
    """What `part`'s re-rank may hand out, `running` its running jobs: per model where it has models."""
    ledger = part.ledger
    if part.models is not None:
        return ModelBudget(part.models, ledger, running)
    partial = ledger.has_out_of_service
    return PoolBudget(ledger.usable_gpus(), lambda job: ledger.held_in_service(job.slots) if partial else job.gpus,
                      partial)


def rank_by_model(pools: ModelPools, ledger: Ledger, order: Iterable[tuple[Key, int]], queued: Mapping[int, JobState],
                  running: list[RunningEntry]) -> tuple[list[JobState], list[JobState]]:  # fmt: skip
    """Walk the queue (`order`, in key order) and the running jobs (`running`, sorted) in key order,
    queued first on equal keys; the jobs to start, and the running jobs to preempt (`victims`)."""
    budget = ModelBudget(pools, ledger, running)
    to_run: list[JobState] = []
    victims: list[JobState] = []
    entries = iter(order)
    entry = next(entries, None)
    count, r = len(running), 0
    while entry is not None or r < count:
        if entry is not None and (r == count or entry[0] <= running[r][0]):
            job, entry = queued[entry[1]], next(entries, None)
            if budget.take(job, False):
                to_run.append(job)
        else:
            job = running[r][2]
            r += 1
            if not budget.take(job, True):
                victims.append(job)
    return to_run, victims


def rank_pool(part: PartitionState, running: list[RunningEntry]) -> tuple[list[JobState], list[JobState]]:
    """Walk queued (already in key order) and running jobs (`running`, unsorted) in key order,
    queued first on equal keys, then arrival order; keep or start each job that still fits the
    quota. The walk stops once every GPU is spoken for: what is left of the queue cannot run,
    and every running job not yet kept is a victim. Returns (jobs to start, victims)."""
    ledger = part.ledger
    quota = ledger.usable_gpus()
    # With nodes out of service a running job needs from the quota only the GPUs it holds on
    # nodes in service (it keeps the others, which nobody else could use); one that needs
    # nothing is kept even when the quota is spent, so the walk cannot stop early.
    partial = ledger.has_out_of_service
    # Running jobs whose key is below the queue head's come before every queued job: the walk
    # meets them first, as a sorted prefix. They fit the quota (it counts every GPU running
    # jobs hold in service), so each is kept whatever their order, and the quota drops by
    # their total: only the other running jobs need sorting. Sorting every running job each
    # cycle was a good part of a preemptive replay's cost, and usually far fewer rank behind
    # the head. Should they not fit after all, the full walk below decides, as it always did.
    head = part.order[0][0]
    ahead = 0
    contested: list[RunningEntry] = []
    for item in running:
        if item[0] < head:
            ahead += ledger.held_in_service(item[2].slots) if partial else item[2].gpus
        else:
            contested.append(item)
    victims: list[JobState] = []
    if ahead <= quota:
        quota -= ahead
        running = contested
        if ahead and quota == 0 and not partial:
            # The walk would stop after the last of them (every GPU spoken for) and preempt
            # the rest in key order; this saves it a pass over a queue that cannot start.
            victims.extend(e[2] for e in sorted(contested))
            return [], victims
    running.sort()  # orders are unique: jobs and change times are never compared
    to_run: list[JobState] = []
    queued, jobs = iter(part.order), part.queued
    entry = next(queued, None)
    count, r = len(running), 0
    while entry is not None or r < count:
        if entry is not None and (r == count or entry[0] <= running[r][0]):
            job = jobs[entry[1]]
            entry = next(queued, None)
            if job.gpus > quota:
                continue
            quota -= job.gpus
            to_run.append(job)
        else:
            job = running[r][2]
            r += 1
            need = ledger.held_in_service(job.slots) if partial else job.gpus
            if need > quota:
                victims.append(job)
                continue
            quota -= need
        if quota == 0 and not partial:
            victims.extend(e[2] for e in running[r:])
            break
    return to_run, victims


def _held(pools: ModelPools, ledger: Ledger, job: JobState) -> dict[str, int]:
    """The GPUs `job` holds on nodes in service, by model (those out of service no one else could use)."""
    out: dict[str, int] = {}
    for node, gpus in job.slots:
        if ledger.in_service(node):
            model = pools.model_of[node]
            out[model] = out.get(model, 0) + gpus
    return out


__all__ = ["GpuBudget", "ModelBudget", "PoolBudget", "budget_of", "rank_by_model", "rank_pool"]

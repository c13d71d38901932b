"""Why a GPUJob waits: its place in its partition's queue and what it waits for, from stored state.

`describe` shows this for a Queued or Pending job. It is computed from what the store holds (the
jobs' statuses, the partition's `freeGPUs`/`totalGPUs`, the partition's queue policy), not from a
live scheduler, so a reader needs no lock beyond a shared one and changes nothing.

The order within a queue follows the policy's key where that key is a pure function of the job
(fifo: submit time; sjf: duration; priority: highest first, then submit time); every other policy
(qssf, srtf, las: keys that depend on predictions or on service attained) is shown in submit
order, and the text says so. A job first in line whose GPUs are free waits for its placement:
topology-aware placement holds out for GPUs under one leaf switch for `maxWaitSeconds` (counted
here from the job's submit time, so after a preemption the time left is an upper bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Policies whose order describe can reproduce exactly: name -> what the order is by.
EXACT_ORDERS = {"fifo": "submit time", "sjf": "duration", "priority": "priority, then submit time"}


@dataclass(frozen=True, slots=True)
class Waiting:
    """A queued job as the queue order sees it."""

    name: str  # namespace/name
    submit: float  # epoch seconds (when the scheduler received it)
    duration: float
    priority: int
    gpus: int


@dataclass(frozen=True, slots=True)
class Placement:
    """The partition's placement policy, and how long the job has waited so far."""

    policy: str = ""
    max_wait: float = 0.0  # topology-aware: seconds it waits for GPUs under one leaf switch
    waited: float = 0.0


@dataclass(frozen=True, slots=True)
class Why:
    """A pending job's place and the reason it waits, ready to print."""

    position: int  # 1-based
    queued: int
    order: str  # what the position is by
    reason: str


def _key(job: Waiting, policy: str) -> tuple[float, ...]:
    if policy == "sjf":
        return (job.duration, job.submit)
    if policy == "priority":
        return (-float(job.priority), job.submit)
    return (job.submit,)


def why_waiting(
    job: str,
    queue: Sequence[Waiting],
    policy: str,
    partition: str,
    free: int,
    total: int,
    placement: Placement = Placement(),
) -> Why:
    """Where `job` stands in `queue` (every queued job of its partition, itself included) under
    `policy`, and what it waits for given the partition's `free` and `total` GPUs and its
    `placement` policy."""
    ordered = sorted(queue, key=lambda w: (*_key(w, policy), w.name))
    names = [w.name for w in ordered]
    position = names.index(job) + 1 if job in names else len(names) + 1
    order = EXACT_ORDERS.get(policy, f"submit time ({policy}'s own order may differ)")
    me = next((w for w in ordered if w.name == job), None)
    wanted = me.gpus if me is not None else 0
    ahead = position - 1
    if wanted > total:
        reason = f"requests {wanted} GPUs; partition {partition} has only {total}"
    elif wanted > free:
        reason = f"waits for {wanted} GPUs; partition {partition} has {free} of {total} free"
        if ahead:
            reason += f", and {ahead} job{'s' if ahead > 1 else ''} ahead"
    elif ahead:
        reason = (
            f"{free} GPUs free cover its {wanted}; waits behind {ahead} job{'s' if ahead > 1 else ''} ahead"
        )
    else:
        reason = f"{free} GPUs free cover its {wanted}; {_placing(placement)}"
    return Why(position, len(ordered), order, reason)


def _placing(placement: Placement) -> str:
    """What a head-of-queue job whose GPUs are free waits for: its placement's choice."""
    if placement.policy == "topology-aware":
        left = max(0.0, placement.max_wait - placement.waited)
        return (
            "topology-aware placement waits for them under one leaf switch, "
            f"{left:g} s more of its {placement.max_wait:g} s, then spreads"
        )
    named = f"{placement.policy} placement" if placement.policy else "the placement policy"
    return f"waits for {named} to place it at the next scheduling pass"


__all__ = ["EXACT_ORDERS", "Placement", "Waiting", "Why", "why_waiting"]

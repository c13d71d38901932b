"""What GPU shares (`gputwin.core.sharing`) did in a replay: `simulate --json`'s `sharing` object.

`gpu_utilization` and the busy GPU-hours count a share as its fraction (a 0.25 share running an hour
is 0.25 GPU-hours). Here the other view, GPUs allocated: a shared GPU counts whole while any share
is on it, and a share that ran unpacked (a preemptive partition) counts its whole GPU, as whole-GPU
rounding would. For a trace without shares there is no `sharing` object at all.

* `share_jobs`: finished jobs that asked for a share; `shared_gpus_opened`: times a GPU was opened
  for sharing.
* `gpu_hours_used`: every job's GPU-hours, shares by their fraction (the utilisation's numerator).
* `gpu_hours_allocated`, `gpus_allocated` (its time average over the makespan) and
  `allocated_utilization` (over GPUs x makespan, what `gpu_utilization` would be if shares were
  counted whole): GPUs held, whole-GPU jobs plus shared GPUs while open.
"""

from __future__ import annotations

from collections.abc import Mapping

from gputwin.core.state import PartitionState
from gputwin.sim.engine import SimOutcome


def share_metrics(outcome: SimOutcome, partitions: Mapping[str, PartitionState], makespan: float
                  ) -> dict[str, float] | None:  # fmt: skip
    """The `sharing` figures of a replay, or None when no finished job asked for a share."""
    shares = [job for job in outcome.finished if job.spec.gpu_milli < 1000]
    if not shares:
        return None
    used = sum(outcome.busy.area.values())
    allocated = used
    for part in partitions.values():
        if part.shares is not None:
            allocated += part.shares.open_area - part.shares.used_area
    # Shares in partitions that do not pack them held a whole GPU: their unused rest counts too.
    allocated += sum((1 - job.spec.gpu_milli / 1000) * job.attained for job in shares
                     if partitions[job.partition].shares is None)  # fmt: skip
    gpus = sum(outcome.partitions.values())
    return {
        "share_jobs": len(shares),
        "shared_gpus_opened": sum(p.shares.opened for p in partitions.values() if p.shares is not None),
        "gpu_hours_used": round(used / 3600, 3),
        "gpu_hours_allocated": round(allocated / 3600, 3),
        "gpus_allocated": round(allocated / makespan, 3) if makespan > 0 else 0.0,
        "allocated_utilization": round(allocated / (gpus * makespan), 4) if makespan > 0 and gpus else 0.0,
    }

"""EASY backfill's reservation: when the head of a partition's queue starts at the latest (its
shadow time) and how many GPUs are spare then, from the running jobs' ends (`gputwin.core.cycle`'s
backfill walk asks once a later job could start now)."""

from __future__ import annotations

from operator import attrgetter

from gputwin.core.state import JobState, PartitionState


def reservation(part: PartitionState, head: JobState, now: float) -> tuple[float, int]:
    """When the head job will start at the latest (shadow time), and GPUs to spare then.

    Counted in GPUs, as EASY does: enough GPUs free up when running jobs end in order. A placer
    that holds the head back for a better slot (topology-aware `max_wait`) pushes the shadow to
    that deadline. Fragmentation is not modelled, so under consolidate the shadow is a lower bound.
    """
    shadow, extra = float("inf"), 0
    free = part.ledger.free_gpus
    if free >= head.gpus:
        shadow, extra = now, free - head.gpus
    elif part.running:
        shadow, extra = _first_enough(sorted(part.running.values(), key=_END), free, head.gpus)
    max_wait = getattr(part.placer, "max_wait", None)
    if max_wait is not None:
        shadow = max(shadow, head.queued_since + max_wait)
    return shadow, extra


_END = attrgetter("seg_end")


def _first_enough(ending: list[JobState], free: int, need: int) -> tuple[float, int]:
    """The end at which `free` plus the GPUs of the jobs `ending` (in end order) reach `need`,
    and the GPUs beyond `need` then; (inf, 0) if they never do.

    The jobs come sorted by end alone (a C-level float key: sorting (end, GPUs) pairs built for
    the purpose was most of a backfill replay's time); among jobs ending at the same moment the
    walk takes the smaller ones first, exactly as the pairs' order did, so `extra` is unchanged.
    """
    group_end, group_free, group_at = -1.0, free, 0
    for i, job in enumerate(ending):
        if job.seg_end != group_end:
            group_end, group_free, group_at = job.seg_end, free, i
        free += job.gpus
        if free >= need:
            stop = i + 1
            while stop < len(ending) and ending[stop].seg_end == group_end:
                stop += 1
            free = group_free
            for gpus in sorted(j.gpus for j in ending[group_at:stop]):
                free += gpus
                if free >= need:
                    break
            return group_end, free - need
    return float("inf"), 0


__all__ = ["reservation"]

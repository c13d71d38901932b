"""EASY backfill's reservation: when the head of a partition's queue starts at the latest (its
shadow time) and how many GPUs are spare then, from the running jobs' ends (`gputwin.core.cycle`'s
backfill walk asks once a later job could start now).

A backfilling partition keeps its running jobs sorted by (end, GPUs, start order) as they start and
stop (`PartitionState.ends`), so a reservation walks only the first few ends it needs instead of
sorting every running job each time (that sort was a quarter of a compiled backfill replay)."""

from __future__ import annotations

from typing import Iterable

from gputwin.core.policies import Key
from gputwin.core.state import JobState, PartitionState, Window


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
        ends = part.ends if part.ends is not None else ending(part.running.values())
        shadow, extra = _first_enough(ends, free, head.gpus)
    max_wait = getattr(part.placer, "max_wait", None)
    if max_wait is not None:
        shadow = max(shadow, head.queued_since + max_wait)
    return shadow, extra


def first_candidate(part: PartitionState, window: list[tuple[Key, int]], head: JobState, now: float
                    ) -> tuple[int, float, int]:  # fmt: skip
    """Where in `window` the first job is that passes the first two tests of `gputwin.core.cycle`'s
    backfill walk (enough GPUs free; ends by the head's shadow time or fits in its spare GPUs), as
    the walk starts (len(window): none), and the reservation (shadow, extra) if it was needed
    (shadow -1.0: not). Whole GPUs only (a share's test differs).

    The window's jobs are kept as (order, GPUs, work left) with, per GPU count, the least work left
    (`PartitionState.window`): while the window is the same, a cycle asks that job of each count
    only (`now + work` grows with `work`: it passes if any of its count does); a changed window
    reuses those of the entries it still holds (`_jobs`). On a busy queue most cycles find the
    window of the last and none of it able to start: walking it each time was half of a forecast's
    compiled replay (issue 15)."""
    free = part.ledger.free_gpus
    shadow, extra = -1.0, 0
    memo = part.window
    if memo is not None and memo[0] == window:  # the same entries are the same jobs: orders are unique
        jobs = memo[1]
        for gpus, work in memo[2]:
            if gpus > free:
                return len(window), shadow, extra  # neither this count nor any larger one fits
            if shadow < 0.0:
                shadow, extra = reservation(part, head, now)
            if not (now + work > shadow and gpus > extra):
                break  # one of them passes: which is the first, below
        else:
            return len(window), shadow, extra
    else:
        jobs = _jobs(part, window, memo)
        least: dict[int, float] = {}
        for _, gpus, work in jobs:
            known = least.get(gpus)
            if known is None or work < known:
                least[gpus] = work
        part.window = (window, jobs, sorted(least.items()))
    for i in range(len(jobs)):
        _, gpus, work = jobs[i]
        if gpus <= free:
            if shadow < 0.0:
                shadow, extra = reservation(part, head, now)
            if not (now + work > shadow and gpus > extra):
                return i, shadow, extra
    return len(window), shadow, extra


LOOK_AHEAD = 8  # entries gone from the kept window that `_jobs` steps over at one place


def _jobs(part: PartitionState, window: list[tuple[Key, int]], memo: Window | None
          ) -> list[tuple[int, int, float]]:  # fmt: skip
    """(order, GPUs, work left) of each job of `window`: an entry whose order the kept window also
    holds (the same job: orders are unique, and a waiting job's GPUs and work do not change) at or
    a few places after where the last match left off is taken from it; any other is looked up. A
    head that started, a backfilled job or an arrival changes a window in one place or a few: most
    of it is reused. Orders are compared, not the entries' tuples: compiled, those are unboxed."""
    kept = memo[1] if memo is not None else []
    queued, out = part.queued, []
    j, count = 0, len(kept)
    for _, order in window:
        k, stop = j, min(count, j + LOOK_AHEAD)
        while k < stop and kept[k][0] != order:
            k += 1
        if k < stop:
            out.append(kept[k])
            j = k + 1
        else:
            job = queued[order]
            out.append((order, job.gpus, job.work_left))
    return out


def ending(jobs: Iterable[JobState]) -> list[tuple[float, int, int]]:
    """Running jobs as `PartitionState.ends` holds them, sorted: for a partition that keeps none."""
    return sorted([(job.seg_end, job.gpus, job.order) for job in jobs])


def _first_enough(ends: Iterable[tuple[float, int, int]], free: int, need: int) -> tuple[float, int]:
    """The end at which `free` plus the GPUs of the jobs ending by then (`ends` in order) reach
    `need`, and the GPUs beyond `need` then; (inf, 0) if they never do. Among jobs ending at the
    same moment the smaller ones come first, so `extra` is the least the head leaves spare."""
    for end, gpus, _ in ends:
        free += gpus
        if free >= need:
            return end, free - need
    return float("inf"), 0


__all__ = ["ending", "first_candidate", "reservation"]

"""EASY backfill's reservation: when the head of a partition's queue starts at the latest (its
shadow time) and how many GPUs are spare then, from the running jobs' ends (`gputwin.core.cycle`'s
backfill walk asks once a later job could start now).

A backfilling partition keeps its running jobs sorted by (end, GPUs, start order) as they start and
stop (`PartitionState.ends`), so a reservation walks only the first few ends it needs instead of
sorting every running job each time (that sort was a quarter of a compiled backfill replay)."""

from __future__ import annotations

from typing import Any, Iterable

from gputwin.core.sortedqueue import Entry, SortedQueue
from gputwin.core.state import Ends, JobState, PartitionState


def reservation(part: PartitionState, head: JobState, now: float) -> tuple[float, int]:
    """When the head job will start at the latest (shadow time), and GPUs to spare then.

    Counted in GPUs, as EASY does: enough GPUs free up when running jobs end in order. A placer
    that holds the head back for a better slot (topology-aware `max_wait`) pushes the shadow to
    that deadline. Fragmentation is not modelled, so under consolidate the shadow is a lower bound.
    A head asking for a GPU model counts only that model's GPUs (`_of_model`).
    """
    shadow, extra = float("inf"), 0
    free = part.ledger.free_gpus
    model = head.spec.model
    if model and part.models is not None:
        shadow, extra = _of_model(part, part.models.nodes[model], head.gpus, now)
    elif free >= head.gpus:
        shadow, extra = now, free - head.gpus
    elif part.ends is not None:
        shadow, extra = _first_ending(part.ends, free, head.gpus)
    elif part.running:
        shadow, extra = _first_enough(ending(part.running.values()), free, head.gpus)
    max_wait = part.max_wait
    if max_wait is not None:
        shadow = max(shadow, head.queued_since + max_wait)
    return shadow, extra


def _of_model(part: PartitionState, nodes: frozenset[int], need: int, now: float) -> tuple[float, int]:
    """The reservation of a head that runs only on `nodes` (its GPU model's): their free GPUs, and
    each running job's GPUs on them as it ends. Counted over every GPU, the shadow could come when
    other models' GPUs free up (a backfilled job then taking GPUs the head needs), or at once while
    only other models' GPUs were free (and nothing would backfill on them)."""
    ledger = part.ledger
    free = sum(ledger.free_of(n) for n in nodes)
    if free >= need:
        return now, free - need
    ends = []
    for job in part.running.values():
        held = sum(gpus for node, gpus in job.slots if node in nodes)
        if held:
            ends.append((job.seg_end, held, job.order))
    ends.sort()
    return _first_enough(ends, free, need)


def backfill_start(part: PartitionState, depth: int, head: JobState, now: float
                   ) -> tuple[int, float, int, list[Entry]]:  # fmt: skip
    """`first_candidate` of the backfill window (the queue's `depth` entries after the head), and
    that window. A SortedQueue unchanged since the window's least works were kept (its `changes`)
    holds the same window: it is not sliced and compared again (half of the cycles that backfill
    in a forecast come after an end that started nothing)."""
    memo, order = part.window, part.order
    changes = -1
    if isinstance(order, SortedQueue):
        changes = order.changes
        if memo is not None and memo[4] == changes:
            first, shadow, extra = _first_in(part, memo[0], (memo[1], memo[3]), head, now, changes)
            return first, shadow, extra, memo[0]
        window = order.between(1, 1 + depth)
    else:
        window = order[1:1 + depth]
    first, shadow, extra = _first_in(part, window, _kept_least(part, window, changes), head, now, changes)
    return first, shadow, extra, window


def first_candidate(part: PartitionState, window: list[Entry], head: JobState, now: float
                    ) -> tuple[int, float, int]:  # fmt: skip
    """Where in `window` the first job is that passes the first two tests of `gputwin.core.cycle`'s
    backfill walk (enough GPUs free; ends by the head's shadow time or fits in its spare GPUs), as
    the walk starts (len(window): none), and the reservation (shadow, extra) if it was needed
    (shadow -1.0: not). Whole GPUs only (a share's test differs).

    A window in which no job passes leaves, per GPU count, the least work left among its jobs
    (`PartitionState.window`): a later cycle asks that job of each count only (`now + work` grows
    with `work`: it passes if any of its count does). On a busy queue most cycles find none able
    to start: walking the window each time was half of a forecast's compiled replay (issue 15).
    While the window is the same the least works are exact; while no job was queued since (a
    SortedQueue then only lost entries: the window holds some of the kept one's and new ones
    after them) they stay lower bounds, the new entries' added: "none passes" still holds then,
    and only a "some may pass" walks the window again (rebuilding them after every start was
    most of the backfill's cost)."""
    return _first_in(part, window, _kept_least(part, window, -1), head, now, -1)


def _first_in(part: PartitionState, window: list[Entry], kept: tuple[list[tuple[int, float]], bool] | None,
              head: JobState, now: float, changes: int) -> tuple[int, float, int]:  # fmt: skip
    """`first_candidate` given the least works kept for `window` and whether they are exact
    (None: none kept); `changes`: the queue's `SortedQueue.changes` when `window` is
    `backfill_start`'s, else -1 (the least works it keeps are then found again by comparing)."""
    free = part.ledger.free_gpus
    shadow, extra = -1.0, 0
    if kept is not None:
        least, exact = kept
        for gpus, work in least:
            if gpus > free:
                return len(window), shadow, extra  # neither this count nor any larger one fits
            if shadow < 0.0:
                shadow, extra = reservation(part, head, now)
            if not (now + work > shadow and gpus > extra):
                if exact:
                    return 0, shadow, extra  # one of them passes: the walk finds which
                break  # one of them may pass: walk, and know the window's own again
        else:
            return len(window), shadow, extra
    least_of: dict[int, float] = {}
    queued = part.queued
    entries: list[tuple[Any, Any]] = window  # an order read as an object (typed: unboxed, boxed anew)
    for i in range(len(window)):
        job = queued[entries[i][1]]
        gpus, work = job.gpus, job.work_left
        if gpus <= free:
            if shadow < 0.0:
                shadow, extra = reservation(part, head, now)
            if not (now + work > shadow and gpus > extra):
                return i, shadow, extra
        known = least_of.get(gpus)
        if known is None or work < known:
            least_of[gpus] = work
    part.window = (window, sorted(least_of.items()), part.enqueued, True, changes)
    return len(window), shadow, extra


def _kept_least(part: PartitionState, window: list[Entry], changes: int
                ) -> tuple[list[tuple[int, float]], bool] | None:  # fmt: skip
    """The kept least works per GPU count that hold for `window` (see `first_candidate`), and
    whether they are exact; None: none hold. `changes` as `_first_in`'s."""
    memo = part.window
    if memo is None:
        return None
    seen, least, enqueued, exact, then = memo
    if seen == window:  # the same entries are the same jobs: orders are unique
        part.window = (seen, least, enqueued, exact, changes)
        return least, exact
    if enqueued != part.enqueued or not seen or not isinstance(part.order, SortedQueue):
        return None  # a FairQueue's order moves with its tenants' usage
    # Entries after the kept window's last are new (`bisect_right(window, last)`): as many came
    # in as left, at most one per queue change since (nothing was queued), so while the last is
    # still there it is among that many from the end, found by identity, not by comparing keys
    # (~800 instructions each, compiled). Read as objects: an entry read as a (Key, int) is
    # unboxed, then boxed anew to be compared or told apart.
    items: list[Any] = window
    olds: list[Any] = seen
    last, new = olds[-1], len(items)
    if 0 <= then <= changes:
        stop = max(new - (changes - then) - 1, 0)
        while new > stop and items[new - 1] is not last:
            new -= 1
        if new == stop and (not new or items[new - 1] is not last):
            new = len(items)  # the last left too: compare
    while new and items[new - 1] is not last and items[new - 1] > last:
        new -= 1
    merged = list(least)
    queued = part.queued
    for i in range(new, len(window)):
        job = queued[items[i][1]]
        _lower(merged, job.gpus, job.work_left)
    kept = (merged, exact and new == len(seen))
    part.window = (window, merged, enqueued, kept[1], changes)
    return kept


def _lower(least: list[tuple[int, float]], gpus: int, work: float) -> None:
    """`least` (GPU counts ascending, each with the least work left) with a job of `gpus` GPUs and
    `work` seconds counted in."""
    for k in range(len(least)):
        count, known = least[k]
        if count == gpus:
            if work < known:
                least[k] = (gpus, work)
            return
        if count > gpus:
            least.insert(k, (gpus, work))
            return
    least.append((gpus, work))


def ending(jobs: Iterable[JobState]) -> list[tuple[float, int, int]]:
    """Running jobs as `PartitionState.ends` holds them, sorted: for a partition that keeps none."""
    return sorted([(job.seg_end, job.gpus, job.order) for job in jobs])


def _first_enough(ends: list[tuple[float, int, int]], free: int, need: int, first: int = 0
                  ) -> tuple[float, int]:  # fmt: skip
    """The end at which `free` plus the GPUs of the jobs ending by then (`ends` from `first` on,
    in order) reach `need`, and the GPUs beyond `need` then; (inf, 0) if they never do. Among
    jobs ending at the same moment the smaller ones come first, so `extra` is the least the head
    leaves spare."""
    for k in range(first, len(ends)):
        end, gpus, _ = ends[k]
        free += gpus
        if free >= need:
            return end, free - need
    return float("inf"), 0


def _first_ending(ends: Ends, free: int, need: int) -> tuple[float, int]:
    """`_first_enough` over the running jobs as `PartitionState.ends` keeps them."""
    first = ends.first
    for block in ends.blocks:
        for k in range(first, len(block)):
            job = block[k]
            free += job.gpus
            if free >= need:
                return job.seg_end, free - need
        first = 0
    return float("inf"), 0


__all__ = ["backfill_start", "ending", "first_candidate", "reservation"]

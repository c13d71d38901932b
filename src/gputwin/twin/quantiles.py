"""A forecast's summary loops over its samples, compiled (`gputwin.twin.forecast`'s quantiles).

Compiled by mypyc (setup.py): at issue 15's size (10,000 pending jobs x 32 samples) the
interpreted summary - a column per job from `zip`, two sorts, four quantiles, and each partition's
latest start per sample through `itemgetter` and `max` - took 341 M instructions, more than half a
replay, in the parent alone after every worker had finished. Here a job's column is a list of the
samples' own float objects (typed `object`, so that mypyc neither unboxes nor boxes them again),
sorted by `list.sort`, and the latest start is a loop over unboxed floats.
"""

from __future__ import annotations

from typing import cast

Column = list[float | None]  # per pending job, in order: a quantile, None beyond the horizon


def job_quantiles(starts: list[list[float]], ends: list[list[float]], mid: int, high: int, until: float,
                  ) -> tuple[Column, Column, Column, Column, list[float]]:  # fmt: skip
    """Per pending job (the samples' lists are in job order) its start at ranks `mid` and `high`
    of the sorted samples, its end at the same ranks (None: later than `until`), and the share of
    samples in which it started by `until`."""
    start_mid: Column = []
    start_high: Column = []
    end_mid: Column = []
    end_high: Column = []
    shares: list[float] = []
    count = len(starts)
    if not count:
        return start_mid, start_high, end_mid, end_high, shares
    # The same lists seen as objects: a column copies the float objects, never their values.
    start_rows, end_rows = cast(list[list[object]], starts), cast(list[list[object]], ends)
    for j in range(len(starts[0])):
        column = [row[j] for row in start_rows]
        column.sort()
        start_mid.append(_finite(column[mid], until))
        start_high.append(_finite(column[high], until))
        shares.append(_count_by(column, until) / count)
        column = [row[j] for row in end_rows]
        column.sort()
        end_mid.append(_finite(column[mid], until))
        end_high.append(_finite(column[high], until))
    return start_mid, start_high, end_mid, end_high, shares


def _finite(value: object, until: float) -> float | None:
    seconds = cast(float, value)
    return seconds if seconds <= until else None


def _count_by(ordered: list[object], until: float) -> int:
    """How many of the sorted `ordered` are at most `until` (`bisect_right`): counted from the top,
    as in most columns every sample started."""
    k = len(ordered)
    while k and cast(float, ordered[k - 1]) > until:
        k -= 1
    return k


def latest(starts: list[float], idx: list[int], default: float) -> float:
    """The latest of `starts` at the indexes `idx` (`default` if none)."""
    if not idx:
        return default
    best = starts[idx[0]]
    for i in idx:
        seconds = starts[i]
        if seconds > best:
            best = seconds
    return best

"""A sample's run times drawn in one loop each, compiled (`gputwin.twin.sampling`'s numbers).

Compiled by mypyc (setup.py): a forecast draws every pending job of every sample (10,000 x 32 at
issue 15's size), and interpreted this loop was ~6 % of a replay; the running jobs' draws
(2,624 a sample), interpreted, ~1 %. Each takes the draws' fields as columns of floats, worked
out once per forecast, so that the loop reads no attribute: `sampling.draw_all_pending` is
`draw_columns` over `pending_columns` of its draws, `sampling.draw_bounded` per job what
`draw_running_columns` does over `running_columns`.
"""

from __future__ import annotations

import math
import random
from statistics import NormalDist

MIN_SECONDS = 1.0  # no run is drawn shorter (a zero-length run would end before it starts)
_TWOPI = 2.0 * math.pi  # `random.TWOPI`

_UNIT = NormalDist()

# Per pending job, in order: the median, the spread above it, the spread below it, the limit (inf: none).
Columns = tuple[list[float], list[float], list[float], list[float]]
# Per running job, in order: `sampling.running_bounds` (the run time if it needs no random number,
# else -1.0; the least it may be; the lowest uniform quantile and the range's width), then the
# draw's median, spreads above and below and limit.
RunningColumns = tuple[list[float], list[float], list[float], list[float],
                       list[float], list[float], list[float], list[float]]  # fmt: skip


def draw_columns(columns: Columns, rng: random.Random) -> list[float]:
    """Each job's run time: its median times exp(spread * z) for a standard-normal z (the spread
    below the median when z < 0), cut to [MIN_SECONDS, limit]. `rng.gauss()` is written out
    (CPython's `random.gauss`, pair by pair, the generator left as it leaves it): the same numbers,
    `0.0 + z * 1.0` being z (-0.0 becomes 0.0, which draws the same)."""
    medians, highs, lows, limits = columns
    rand, out = rng.random, []
    spare: float | None = rng.gauss_next  # type: ignore[attr-defined]  # `random.Random`'s own state
    z = 0.0
    for k in range(len(medians)):
        if spare is None:
            x2pi = rand() * _TWOPI
            g2rad = math.sqrt(-2.0 * math.log(1.0 - rand()))
            z = math.cos(x2pi) * g2rad
            spare = math.sin(x2pi) * g2rad
        else:
            z, spare = spare, None
        seconds = medians[k] * math.exp((highs[k] if z >= 0 else lows[k]) * z)
        limit = limits[k]
        out.append(max(min(seconds, limit), MIN_SECONDS))
    rng.gauss_next = spare  # type: ignore[attr-defined]
    return out


def draw_running_columns(columns: RunningColumns, rng: random.Random) -> list[float]:
    """Each running job's run time, as `sampling.draw_bounded` draws it (the same numbers, the
    same random numbers used, in order): fixed, or at a uniform quantile of its range."""
    fixed, least, lowest, widths, medians, highs, lows, limits = columns
    rand, out = rng.random, []
    for k in range(len(fixed)):
        if fixed[k] >= 0.0:
            out.append(fixed[k])
            continue
        low, limit = least[k], limits[k]
        u = lowest[k] + widths[k] * rand()
        if not 0.0 < u < 1.0:  # far out in a tail: the bound is the answer
            out.append(low if u <= 0.0 else min(limit, low * 2))
            continue
        z = _UNIT.inv_cdf(u)
        seconds = medians[k] * math.exp((highs[k] if z >= 0 else lows[k]) * z)  # `Draw.at`
        out.append(min(max(seconds, low), limit))
    return out


__all__ = ["Columns", "MIN_SECONDS", "RunningColumns", "draw_columns", "draw_running_columns"]

"""A sample's pending run times drawn in one loop, compiled (`gputwin.twin.sampling`'s numbers).

The only part of the twin that mypyc compiles (setup.py): a forecast draws every pending job of
every sample (10,000 x 32 at issue 15's size), and interpreted this loop was ~6 % of a replay. It
takes each draw's fields as columns of floats, worked out once per forecast, so that the loop
reads no attribute: `sampling.draw_all_pending` is this over `pending_columns` of its draws.
"""

from __future__ import annotations

import math
import random

MIN_SECONDS = 1.0  # no run is drawn shorter (a zero-length run would end before it starts)
_TWOPI = 2.0 * math.pi  # `random.TWOPI`

# Per pending job, in order: the median, the spread above it, the spread below it, the limit (inf: none).
Columns = tuple[list[float], list[float], list[float], list[float]]


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


__all__ = ["Columns", "MIN_SECONDS", "draw_columns"]

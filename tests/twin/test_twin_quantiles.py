"""The forecast summary's compiled loops (`gputwin.twin.quantiles`) against the plain definitions:
nearest-rank quantiles of the sorted samples, `bisect_right` for the share started, `max` for the
latest start; over samples that hold infinities (not started) and values at the horizon itself."""

from __future__ import annotations

import math
from bisect import bisect_right

from hypothesis import given
from hypothesis import strategies as st

from gputwin.twin.forecast import quantile
from gputwin.twin.quantiles import job_quantiles, latest

UNTIL = 100.0
TIMES = st.sampled_from([0.0, 1.5, 50.0, UNTIL, 100.5, math.inf]) | st.floats(0.0, 200.0)


def _finite(value: float) -> float | None:
    return value if value <= UNTIL else None


Samples = list[tuple[list[float], list[float]]]  # per sample: each job's start and end


def _samples(jobs: int) -> st.SearchStrategy[Samples]:
    times = st.lists(TIMES, min_size=jobs, max_size=jobs)
    return st.lists(st.tuples(times, times), min_size=1, max_size=12)


@given(st.integers(1, 40).flatmap(_samples))
def test_job_quantiles_are_the_nearest_rank_quantiles_of_each_jobs_samples(samples: Samples) -> None:
    starts, ends = [s for s, _ in samples], [e for _, e in samples]
    count = len(samples)
    mid, high = max(math.ceil(0.5 * count) - 1, 0), max(math.ceil(0.9 * count) - 1, 0)
    got = job_quantiles(starts, ends, mid, high, UNTIL)
    for j in range(len(starts[0])):
        column, ends_column = [s[j] for s in starts], [e[j] for e in ends]
        assert (got[0][j], got[1][j]) == (_finite(quantile(column, 0.5)), _finite(quantile(column, 0.9)))
        ends_p50, ends_p90 = quantile(ends_column, 0.5), quantile(ends_column, 0.9)
        assert (got[2][j], got[3][j]) == (_finite(ends_p50), _finite(ends_p90))
        assert got[4][j] == bisect_right(sorted(column), UNTIL) / count


def test_no_samples_give_no_jobs() -> None:
    assert job_quantiles([], [], 0, 0, UNTIL) == ([], [], [], [], [])


@given(st.lists(TIMES, min_size=1, max_size=30), st.data())
def test_latest_is_the_max_at_the_indexes(starts: list[float], data: st.DataObject) -> None:
    idx = data.draw(st.lists(st.integers(0, len(starts) - 1), max_size=10))
    assert latest(starts, idx, -1.0) == (max(starts[i] for i in idx) if idx else -1.0)

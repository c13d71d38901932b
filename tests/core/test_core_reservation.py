"""`reservation`'s walk (`_first_enough`) against the plain definition it replaced: running jobs
sorted by (end, GPUs), GPUs added until the head's need is met. Ends are drawn from a few values
so that ties - where the order among jobs ending together decides the GPUs to spare - are common."""

from __future__ import annotations

from hypothesis import given, strategies as st

from gputwin.core.reservation import _END, _first_enough
from gputwin.core.model import JobSpec
from gputwin.core.state import JobState


def _job(i: int, end: float, gpus: int) -> JobState:
    job = JobState(JobSpec(f"j{i}", 0.0, 1.0, gpus, "t"), "p", gpus, 1.0, 1.0)
    job.seg_end = end
    return job


def _reference(jobs: list[JobState], free: int, need: int) -> tuple[float, int]:
    for end, gpus in sorted((j.seg_end, j.gpus) for j in jobs):
        free += gpus
        if free >= need:
            return end, free - need
    return float("inf"), 0


@given(st.lists(st.tuples(st.sampled_from([10.0, 20.0, 20.0, 35.5, 90.0]), st.sampled_from([1, 2, 4, 8, 16])),
                max_size=40),
       st.integers(0, 8), st.integers(1, 64))  # fmt: skip
def test_first_enough_matches_the_sorted_pairs_walk(ends: list[tuple[float, int]], free: int, need: int) -> None:
    jobs = [_job(i, end, gpus) for i, (end, gpus) in enumerate(ends)]
    assert _first_enough(sorted(jobs, key=_END), free, need) == _reference(jobs, free, need)

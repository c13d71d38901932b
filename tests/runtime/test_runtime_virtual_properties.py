"""`VirtualRuns` against a plain model, on random starts, restarts, stops and clock steps: the same
ends in the same order, the same next event, and its count of stale runs exact, so the fast paths
(no stale run in the heap) come back once a preempted run's end has passed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.decision import Start
from gputwin.runtime.virtual import VirtualRuns

JOBS = ("a", "b", "c", "d")
# (what, job, seconds): start (a run again if live), stop, or move the clock on by `seconds`.
OPS = st.lists(st.tuples(st.sampled_from(("start", "stop", "step")), st.sampled_from(JOBS),
                         st.integers(0, 6).map(float)), max_size=40)  # fmt: skip


class Model:
    """What `VirtualRuns` promises: each job's current run ends `seconds` after it started; ends at
    one instant in the order their runs started."""

    def __init__(self) -> None:
        self.live: dict[str, tuple[float, int]] = {}  # job -> (end, start sequence)
        self.seq = 0

    def start(self, job: str, end: float) -> None:
        self.seq += 1
        self.live[job] = (end, self.seq)

    def ended(self, now: float) -> list[tuple[str, float]]:
        done = sorted((end, seq, job) for job, (end, seq) in self.live.items() if end <= now)
        for _, _, job in done:
            del self.live[job]
        return [(job, end) for end, _, job in done]

    def next_event(self) -> float | None:
        return min((end for end, _ in self.live.values()), default=None)


def stale_in_heap(runs: VirtualRuns) -> int:
    live = runs._live
    return sum(live.get(job) != seq for entries in runs._at.values() for seq, job in entries)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_virtual_runs_match_the_model_and_count_their_stale_runs(ops: list[tuple[str, str, float]]) -> None:
    runs, model, now = VirtualRuns(), Model(), 0.0
    for what, job, seconds in ops:
        if what == "start":
            runs.start_all((Start(job, "p", ((0, 1),), seconds, 0.0, 1, 0, 1),), (), now)
            model.start(job, now + seconds)
        elif what == "stop":
            runs.stop(job)
            model.live.pop(job, None)
        else:
            assert runs.next_event() == model.next_event()
            now += seconds
            assert runs.ended(now) == model.ended(now)
        assert runs._stale == stale_in_heap(runs)
    assert runs.running() == {job: end for job, (end, _) in model.live.items()}

"""The runtime's parts on their own: the event heap (`VirtualRuns`), the one place a Decision is
carried out (`Runtime.apply`: starts a backend refuses go back to the scheduler), the wake-up rule,
and the one loop on both clocks."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from gputwin.core.decision import Decision, Start
from gputwin.core.model import ClusterSpec, JobSpec, NodeSpec, PartitionSpec, SwitchSpec, TopologySpec
from gputwin.core.scheduler import Scheduler
from gputwin.core.state import JobState
from gputwin.runtime.capabilities import StartRefused
from gputwin.runtime.clock import VirtualClock, WallClock, drive, run_steps
from gputwin.runtime.loop import Quiet, Runtime
from gputwin.runtime.virtual import VirtualRuns


def start(job_id: str, seconds: float) -> Start:
    return Start(job_id, "p", ((0, 1),), seconds, 0.0, 1, 0, 1)


@pytest.mark.parametrize(
    ("starts", "stopped", "at", "ended"),
    [
        pytest.param([("a", 10.0), ("b", 5.0)], [], 10.0, [("b", 5.0), ("a", 10.0)], id="in-end-order"),
        pytest.param([("b", 5.0), ("a", 5.0)], [], 5.0, [("b", 5.0), ("a", 5.0)], id="ties-in-start-order"),
        pytest.param([("a", 10.0), ("b", 5.0)], ["b"], 10.0, [("a", 10.0)], id="a-stopped-run-never-ends"),
        pytest.param([("a", 10.0)], [], 9.999, [], id="not-yet"),
        pytest.param([("a", 5.0), ("b", 5.0)], ["a"], 5.0, [("b", 5.0)], id="a-stopped-run-beside-a-live-one"),
    ],
)
def test_virtual_runs_end_in_time_order_then_start_order(
    starts: list[tuple[str, float]], stopped: list[str], at: float, ended: list[tuple[str, float]]
) -> None:
    runs = VirtualRuns()
    assert runs.start_all([start(j, s) for j, s in starts], (), 0.0) == []
    for job_id in stopped:
        runs.stop(job_id)
    assert runs.ended(at) == ended
    assert runs.ended(at) == []  # each end is reported once


def test_a_stopped_run_is_never_the_next_event_and_a_late_run_is_refused() -> None:
    runs = VirtualRuns(latest=100.0, latest_label="t=100")
    assert runs.start_all([start("a", 5.0), start("b", 50.0)], (), 0.0) == []
    runs.stop("a")
    assert runs.next_event() == 50.0
    ((refused, error),) = runs.start_all([start("c", 200.0)], (), 0.0)
    assert refused.job_id == "c" and isinstance(error, StartRefused) and error.reason == "InvalidDuration"
    assert "t=100" in str(error) and "c" not in runs.running()


def test_an_end_time_only_stopped_runs_share_is_dropped_and_every_end_is_counted_once() -> None:
    runs = VirtualRuns()
    runs.start_all([start("a", 5.0), start("b", 5.0), start("c", 8.0)], (), 0.0)
    runs.stop("a"), runs.stop("b")
    runs.start_all([start("a", 2.0)], (), 4.0)  # a runs again: its first end, at 5, is stale
    assert runs.running() == {"a": 6.0, "c": 8.0}
    assert runs.next_event() == 6.0 and runs.ended(6.0) == [("a", 6.0)]
    assert runs.next_event() == 8.0  # the time 5.0 had only stopped runs: dropped
    assert runs.ended(8.0) == [("c", 8.0)] and runs.next_event() is None
    assert runs.popped == 4  # every end taken off the heap once, the stale ones included


def cluster() -> ClusterSpec:
    nodes = (NodeSpec("n0", 2, "leaf"),)
    return ClusterSpec(TopologySpec("t", (SwitchSpec("leaf"),), nodes), (PartitionSpec("p", ("n0",), ("train",)),))


class RefusesFirst(VirtualRuns):
    """A backend whose first start fails (as an API server's error would)."""

    def __init__(self) -> None:
        super().__init__()
        self.refusals = 1

    def start_all(
        self, starts: Sequence[Start], node_names: Sequence[str], now: float
    ) -> list[tuple[Start, Exception]]:
        if self.refusals:
            self.refusals -= 1
            return [(s, RuntimeError("API down")) for s in starts]
        return super().start_all(starts, node_names, now)


class Heard(Quiet):
    def __init__(self) -> None:
        self.heard: list[tuple[str, str]] = []

    def started(self, starts: Sequence[Start], now: float) -> None:
        self.heard.extend(("started", start.job_id) for start in starts)

    def start_failed(self, start: Start, error: Exception, now: float) -> None:
        self.heard.append(("start_failed", start.job_id))

    def completed(self, ends: Sequence[tuple[JobState, float]], now: float) -> None:
        self.heard.extend(("completed", state.job_id) for state, _ in ends)


def test_a_refused_start_gives_its_gpus_back_and_the_job_starts_at_the_next_cycle() -> None:
    heard = Heard()
    runtime = Runtime(Scheduler(cluster()), RefusesFirst(), heard)
    runtime.submit(JobSpec("a", 0.0, 10.0, 2, "train"), 0.0)
    runtime.cycle(0.0)
    assert heard.heard == [("start_failed", "a")]
    assert runtime.scheduler.partitions["p"].ledger.free_gpus == 2  # back, not leaked
    runtime.scheduler.wake("p")
    runtime.cycle(1.0)
    runtime.due(11.0)
    assert heard.heard[1:] == [("started", "a"), ("completed", "a")]


@pytest.mark.parametrize(
    ("requests", "fired_at"),
    [
        pytest.param([(20.0, "p")], [20.0], id="one"),
        pytest.param([(20.0, "p"), (10.0, "p")], [10.0, 20.0], id="an-earlier-one-is-added-the-later-still-fires"),
        pytest.param([(10.0, "p"), (20.0, "p")], [10.0], id="a-later-one-is-dropped"),
        pytest.param([(0.0, "p")], [], id="not-in-the-future"),
    ],
)
def test_the_one_wake_up_rule(requests: list[tuple[float, str]], fired_at: list[float]) -> None:
    runtime = Runtime(Scheduler(cluster()), VirtualRuns())
    for when, partition in requests:
        runtime.apply(Decision(wakes=((when, partition),)), 0.0)
    fired = []
    while (when := runtime.next_event()) is not None:
        before = runtime.wakes_fired
        runtime.due(when)
        fired += [when] * (runtime.wakes_fired - before)
    assert fired == fired_at


def test_the_one_loop_on_a_wall_clock_sleeps_until_each_event() -> None:
    """A mock clock (time.time and time.sleep replaced): the loop sleeps exactly to each event."""
    now = [1000.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))
        now[0] += seconds

    jobs = [JobSpec("a", 0.0, 10.0, 1, "train"), JobSpec("b", 3.0, 1.0, 1, "train")]
    runtime = Runtime(Scheduler(cluster()), VirtualRuns())
    assert drive(runtime, jobs, WallClock(offset=1000.0, clock=lambda: now[0], sleep=sleep)) == 2
    assert slept == [3.0, 1.0, 6.0]  # b arrives at 3, ends at 4; a ends at 10


def test_run_steps_stops_at_until_and_the_virtual_clock_never_goes_back() -> None:
    runtime = Runtime(Scheduler(cluster()), VirtualRuns())
    runtime.submit(JobSpec("a", 0.0, 50.0, 1, "train"), 0.0)
    runtime.cycle(0.0)
    clock = VirtualClock(5.0)
    assert clock.advance_to(1.0) == 5.0

    class Target:
        def next_event(self) -> float | None:
            return runtime.next_event()

        def step(self, now: float) -> None:
            runtime.due(now)

    assert run_steps(Target(), clock, until=40.0) == 0 and runtime.next_event() == 50.0
    assert run_steps(Target(), clock) == 1 and clock.now == 50.0

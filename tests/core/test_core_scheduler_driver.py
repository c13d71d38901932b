"""The Scheduler's contract with a driver: idle cycles, aborted starts, wake-up requests."""

from __future__ import annotations

from gputwin.core.decision import Decision, DecisionBuilder
from gputwin.core.model import JobSpec
from gputwin.core.scheduler import Scheduler
from gputwin.core.state import Phase


def test_a_cycle_with_nothing_changed_decides_nothing(cluster) -> None:
    sched = Scheduler(cluster({"l0": [8]}))
    assert sched.run_cycle(0) == Decision()
    sched.submit(JobSpec("a", 0, 10, 4, "x"), 0)
    assert len(sched.run_cycle(0).starts) == 1
    assert sched.run_cycle(1) == Decision()  # nothing happened since


def test_abort_start_gives_the_gpus_back_and_requeues_the_job(cluster) -> None:
    sched = Scheduler(cluster({"l0": [8]}))
    sched.submit(JobSpec("a", 0, 10, 8, "x"), 0)
    (first,) = sched.run_cycle(0).starts
    ledger = sched.partitions["p"].ledger
    assert ledger.free_gpus == 0
    sched.abort_start("a", 3)
    assert ledger.free_gpus == 8
    assert sched.jobs["a"].phase is Phase.QUEUED
    (again,) = sched.run_cycle(3).starts
    assert again.slots == ((0, 8),)
    assert again.run_seconds == 10  # nothing ran, so nothing is lost or gained
    # a newer generation, so the driver can drop the first start's end event
    assert again.generation > first.generation


def test_decision_builder_keeps_the_earliest_wake_per_partition() -> None:
    out = DecisionBuilder()
    out.wake(50, "b")
    out.wake(30, "a")
    out.wake(40, "a")
    out.wake(None, "a")  # "no wake needed" never overrides a request
    out.wake(20, "b")
    assert out.build().wakes == ((20, "b"), (30, "a"))

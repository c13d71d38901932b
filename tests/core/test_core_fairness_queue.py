"""FairQueue (gputwin.core.fairqueue) read directly: its cached tenant ranking against keys worked
out afresh, and its lazy walk (the strict quota loop's read) against the plain queue order, while
the walk removes what it reads as the loop's starts do. A job's tenant is its user."""

from __future__ import annotations

import pytest
from cluster_builders import job_state
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.fairness import Fairness
from gputwin.core.fairqueue import FairQueue
from gputwin.core.state import JobState

TENANTS = ("a", "b", "c", "d")
HOLDER = {t: job_state(t) for t in TENANTS}  # a job of each tenant, for usage changes

# (tenant index, GPUs held more, seconds later: 0 keeps the instant) changes, (tenant, policy key) jobs
CHANGES = st.lists(st.tuples(st.integers(0, 3), st.integers(-2, 4), st.sampled_from([0.0, 0.0, 1.0, 30.0])),
                   max_size=25)  # fmt: skip
JOBS = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=80)


def _queue(mode: str, jobs: list[tuple[int, int]]) -> tuple[FairQueue, Fairness]:
    """A FairQueue of `jobs` (order i: tenant, policy key), tenants read from the jobs' users."""
    queued: dict[int, JobState] = {order: job_state(TENANTS[t], order=order) for order, (t, _) in enumerate(jobs)}
    fair = Fairness(mode, 16, half_life=60.0, weights={"b": 2.0})
    queue = FairQueue(fair, queued)
    for order, (_, key) in enumerate(jobs):
        queue.add(((float(key),), order))
    return queue, fair


def _fresh_order(queue: FairQueue, fair: Fairness, jobs: list[tuple[int, int]], present: set[int]) -> list[int]:
    """The queue order from keys worked out now, no cache: (tenant key, policy key, order)."""
    def key(tenant: str) -> float:
        weight = fair.weights.get(tenant, 1.0)
        if fair.mode == "drf":
            return fair.held.get(tenant, 0) / fair.total / weight
        return fair.usage(tenant, fair.now) / weight

    return sorted(present, key=lambda o: (key(TENANTS[jobs[o][0]]), float(jobs[o][1]), o))


@pytest.mark.parametrize("mode", ["fairshare", "drf"], ids=["fairshare", "drf"])
@settings(max_examples=60, deadline=None)
@given(jobs=JOBS, changes=CHANGES)
def test_the_cached_ranking_follows_every_change_of_usage_and_time(mode: str, jobs, changes) -> None:
    queue, fair = _queue(mode, jobs)
    now = 0.0
    for t, gpus, later in changes:
        now += later
        fair.at(now)
        list(queue)  # read between changes, so a stale ranking would be seen
        fair.change(now, HOLDER[TENANTS[t]], gpus)
        assert [order for _, order in queue] == _fresh_order(queue, fair, jobs, set(range(len(jobs))))


@settings(max_examples=80, deadline=None)
@given(jobs=JOBS, skip=st.sets(st.sampled_from(TENANTS)), first=st.integers(1, 40))
def test_the_walk_reads_the_queue_order_less_the_skipped_tenants(jobs, skip, first) -> None:
    queue, _ = _queue("fairshare", jobs)
    expected = [(TENANTS[jobs[o][0]], o) for _, o in queue if TENANTS[jobs[o][0]] not in skip]
    assert list(queue.walk(set(skip), first)) == expected


@pytest.mark.parametrize("mode", ["fairshare", "drf"], ids=["fairshare", "drf"])
@settings(max_examples=80, deadline=None)
@given(jobs=JOBS, first=st.integers(1, 40), stop=st.sets(st.sampled_from(TENANTS)))
def test_the_walk_reads_each_job_once_while_it_starts_them(mode: str, jobs, first, stop) -> None:
    """The loop's use: each job read is started (removed; its tenant's usage moves the ranking)
    unless its tenant is in `stop`, which then waits. Each job is read at most once, the first
    `first` as ranked at the start and first; every job of a tenant that never waits is read."""
    queue, fair = _queue(mode, jobs)
    head = [o for _, o in queue][:first]
    waiting: set[str] = set()
    read = []
    for tenant, order in queue.walk(waiting, first):
        read.append(order)
        if tenant in stop:
            waiting.add(tenant)
            continue
        queue.remove(((float(jobs[order][1]),), order))
        fair.change(0.0, HOLDER[tenant], 1)
    assert len(read) == len(set(read))
    in_head = [o for o in read if o in head]
    assert read[: len(in_head)] == in_head == [o for o in head if o in in_head]
    left = {TENANTS[jobs[o][0]] for _, o in queue}
    assert left <= stop  # the others' jobs were all read and started
    for tenant in stop:  # a waiting tenant is read once, then skipped
        assert sum(TENANTS[jobs[o][0]] == tenant for o in read) == (1 if any(TENANTS[t] == tenant for t, _ in jobs) else 0)


# (id, jobs (tenant, policy key) in order, first, tenants that wait when read, expected reads)
WALKS = [
    ("tied-tenants-a-waiting-one-skipped-alone", [(0, 0), (1, 1), (1, 1), (0, 2), (2, 3)], 1, {"b"}, [0, 1, 3, 4]),
    ("tied-tenants-in-the-head", [(0, 0), (1, 1), (1, 1), (0, 2), (2, 3)], 4, {"b"}, [0, 1, 3, 4]),
    ("nobody-waits", [(0, 0), (1, 1), (1, 1), (0, 2), (2, 3)], 1, set(), [0, 1, 2, 3, 4]),
    ("all-wait", [(0, 0), (1, 1), (1, 1), (0, 2), (2, 3)], 2, {"a", "b", "c"}, [0, 1, 4]),
]  # fmt: skip


@pytest.mark.parametrize("jobs,first,stop,expected", [c[1:] for c in WALKS], ids=[c[0] for c in WALKS])
def test_a_waiting_tenant_among_tied_ones_does_not_stop_the_walk(jobs, first, stop, expected) -> None:
    queue, fair = _queue("fairshare", jobs)  # nothing used yet at 0: every tenant's key ties
    waiting: set[str] = set()
    read = []
    for tenant, order in queue.walk(waiting, first):
        read.append(order)
        if tenant in stop:
            waiting.add(tenant)
            continue
        queue.remove(((float(jobs[order][1]),), order))
        fair.change(0.0, HOLDER[tenant], 1)
    assert read == expected

"""GPUs held by others (pods another scheduler bound on a shared node): the ledger shows placers a
node's free GPUs less those, never below 0, keeps its own count for allocate/release, and the
Scheduler never places a job into GPUs someone else holds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.ledger import OverAllocation
from gputwin.core.model import JobSpec, PolicySpec
from gputwin.core.scheduler import Scheduler

from cluster_builders import assert_placers_see

# n0: 4 GPUs, n1: 8 (leaf 0); n2: 2, n3: 8 (leaf 1). 22 GPUs.
LAYOUT = {"l0": [4, 8], "l1": [2, 8]}


@pytest.mark.parametrize(
    ("held", "ours", "free_of", "free_gpus", "leaf_free", "best_fit_8", "idle"),
    [
        pytest.param({}, [], [4, 8, 2, 8], 22, [12, 10], 1, [0, 1, 2, 3], id="none"),
        pytest.param({1: 6}, [], [4, 2, 2, 8], 16, [6, 10], 3, [0, 2, 3], id="6-of-8-held"),
        pytest.param({1: 6}, [(1, 2)], [4, 0, 2, 8], 14, [4, 10], 3, [0, 2, 3], id="held-and-ours-fill-it"),
        pytest.param({0: 9, 3: 8}, [], [0, 8, 2, 0], 10, [8, 2], 1, [1, 2], id="more-than-capacity-is-0"),
        pytest.param({1: 2}, [(1, 4)], [4, 2, 2, 8], 16, [6, 10], 3, [0, 2, 3], id="both-subtract"),
        pytest.param({7: 3}, [], [4, 8, 2, 8], 22, [12, 10], 1, [0, 1, 2, 3], id="unknown-node-ignored"),
    ],
)
def test_gpus_held_by_others_are_hidden_from_every_index(
    ledger, held, ours, free_of, free_gpus, leaf_free, best_fit_8, idle
) -> None:
    led = ledger(LAYOUT, ours)
    assert led.set_external_use(held) is bool({n: g for n, g in held.items() if n < 4})
    assert_placers_see(led, free_of, free_gpus, leaf_free, best_fit_8, idle)
    assert led.external_use() == {n: g for n, g in held.items() if n < 4}
    assert led.total_gpus == 22


def test_own_jobs_allocate_and_release_against_their_own_count_while_others_hold_gpus(ledger) -> None:
    led = ledger(LAYOUT, [(1, 5)])
    led.set_external_use({1: 6})  # 5 ours + 6 theirs on 8: what is already bound stays accounted
    assert led.free_of(1) == 0
    led.release([(1, 5)])
    assert led.free_of(1) == 2  # their 6 still held
    led.allocate([(1, 2)])
    assert led.free_of(1) == 0
    with pytest.raises(OverAllocation):
        led.release([(1, 7)])  # the ledger's own count (6 free of 8) is still checked against capacity
    assert led.set_external_use({}) is True
    assert led.free_of(1) == 6 and led.set_external_use({}) is False


def test_held_gpus_and_out_of_service_combine(ledger) -> None:
    led = ledger(LAYOUT)
    led.set_external_use({1: 3})
    led.set_out_of_service([1])
    assert led.free_of(1) == 0 and led.free_gpus == 14
    led.set_external_use({1: 5})  # changes while out: still nothing visible
    assert led.free_of(1) == 0 and led.free_gpus == 14
    led.set_out_of_service([])
    assert led.free_of(1) == 3 and led.free_gpus == 17


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["alloc", "release", "out", "held"]), st.integers(0, 3), st.integers(0, 9)),
        max_size=30,
    )
)
def test_random_operations_agree_with_a_naive_recount(ledger, ops) -> None:
    led = ledger(LAYOUT)
    cap, free, out, held = [4, 8, 2, 8], [4, 8, 2, 8], set(), {}
    for op, node, gpus in ops:
        if op == "alloc" and 0 < gpus <= free[node]:
            led.allocate([(node, gpus)])
            free[node] -= gpus
        elif op == "release" and 0 < gpus and free[node] + gpus <= cap[node]:
            led.release([(node, gpus)])
            free[node] += gpus
        elif op == "out":
            out ^= {node}
            led.set_out_of_service(out)
        elif op == "held":
            held[node] = gpus
            led.set_external_use(held)
        seen = [0 if n in out else max(free[n] - held.get(n, 0), 0) for n in range(4)]
        assert [led.free_of(n) for n in range(4)] == seen
        assert led.free_gpus == sum(seen)
        assert [led.leaf_free(0), led.leaf_free(1)] == [seen[0] + seen[1], seen[2] + seen[3]]
        assert list(led.avail_nodes()) == [n for n in range(4) if seen[n]]
        assert list(led.idle_nodes()) == [n for n in range(4) if seen[n] == cap[n]]
        assert list(led.fullest_first()) == sorted(
            (n for n in range(4) if seen[n]), key=lambda n: (-seen[n], n)
        )


@pytest.mark.parametrize("placement", ["first-fit", "consolidate", "topology-aware", "random"])
def test_the_scheduler_places_nothing_into_gpus_others_hold(cluster, placement) -> None:
    sched = Scheduler(cluster({"l0": [8, 8]}, PolicySpec(placement=placement)))
    sched.set_external_use({"n0": 6, "n1": 8, "no-such-node": 4})
    for i in range(3):
        sched.submit(JobSpec(f"j{i}", 0, 10, 1, "x"), 0)
    starts = sched.run_cycle(0).starts
    assert sorted(s.job_id for s in starts) == ["j0", "j1"]  # n0 has 2 GPUs left, n1 none
    assert {node for s in starts for node, _ in s.slots} == {0}
    sched.set_external_use({"n0": 6})  # n1's holder ended: the waiting job starts in the next cycle
    (third,) = sched.run_cycle(1).starts
    assert third.job_id == "j2" and third.slots == ((1, 1),)


def test_a_job_needing_more_than_what_is_left_waits(cluster) -> None:
    sched = Scheduler(cluster({"l0": [8]}))
    sched.set_external_use({"n0": 6})
    sched.submit(JobSpec("big", 0, 10, 4, "x"), 0)
    assert sched.run_cycle(0).starts == ()
    sched.set_external_use({"n0": 4})
    assert [s.slots for s in sched.run_cycle(1).starts] == [((0, 4),)]


# The preemptive re-rank counts only GPUs that can be used: GPUs others hold are not among them.
# Two 8-GPU nodes, srtf: `held` GPUs per node are held by others before `running` starts (8 GPUs
# each, in order), then S (8 GPUs, 10 s, the shortest) arrives.
@pytest.mark.parametrize(
    ("held", "running", "preempted", "started"),
    [
        # n0 is all others': only B's n1 can go to S, so B (longer) yields. Counting n0 (the total)
        # kept B and left S waiting for GPUs it can never get.
        pytest.param({"n0": 8}, [("B", 500)], ["B"], [("S", 1)], id="other-node-held"),
        # n0 half held: S (8) cannot fit there; B yields n1.
        pytest.param({"n0": 4}, [("B", 500)], ["B"], [("S", 1)], id="other-node-half-held"),
        # Nothing held: B took n0, S starts on the free n1, nobody is preempted.
        pytest.param({}, [("B", 500)], [], [("S", 1)], id="nothing-held"),
        # Both nodes ours and busy: the longest running job yields to S.
        pytest.param({}, [("A", 1000), ("B", 500)], ["A"], [("S", 0)], id="both-ours-longest-yields"),
    ],
)
def test_preemptive_rerank_counts_only_gpus_that_can_be_used(cluster, held, running, preempted, started) -> None:
    sched = Scheduler(cluster({"l0": [8, 8]}, PolicySpec(queue="srtf", placement="consolidate")))
    sched.set_external_use(held)
    for t, (name, duration) in enumerate(running):
        sched.submit(JobSpec(name, t, duration, 8, "x"), t)
        assert [s.job_id for s in sched.run_cycle(t).starts] == [name]
    sched.submit(JobSpec("S", 5, 10, 8, "x"), 5)
    decision = sched.run_cycle(5)
    assert [p.job_id for p in decision.preempts] == preempted
    assert [(s.job_id, s.slots[0][0]) for s in decision.starts] == started


@pytest.mark.parametrize(
    ("held", "out", "allocated", "usable", "in_service"),
    [
        pytest.param({}, [], [], 22, 0, id="idle"),
        pytest.param({}, [], [(1, 5), (3, 8)], 22, 13, id="ours-count"),
        pytest.param({1: 3}, [], [], 19, 0, id="theirs-do-not"),
        pytest.param({1: 3}, [], [(1, 5)], 19, 5, id="ours-and-theirs-on-one-node"),
        pytest.param({}, [1], [(1, 5)], 14, 0, id="ours-on-a-node-out"),
        pytest.param({3: 2}, [1], [(1, 5), (3, 4)], 12, 4, id="all-three"),  # 4 + 0 + 2 + (8 - 2)
    ],
)
def test_usable_gpus_are_visible_free_plus_ours_in_service(ledger, held, out, allocated, usable, in_service) -> None:
    led = ledger(LAYOUT, allocated)
    led.set_external_use(held)
    led.set_out_of_service(out)
    assert led.usable_gpus() == usable
    assert led.held_in_service(allocated) == in_service
    assert led.held_gpus == sum(g for _, g in allocated)

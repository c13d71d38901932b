"""Nodes out of service (NotReady, cordoned, tainted in a live cluster): the ledger hides their free
GPUs from every placer while keeping them accounted, and the Scheduler places nothing new there."""

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
    ("out", "free_of", "free_gpus", "leaf_free", "best_fit_8", "idle"),
    [
        pytest.param([], [4, 8, 2, 8], 22, [12, 10], 1, [0, 1, 2, 3], id="none"),
        pytest.param([1], [4, 0, 2, 8], 14, [4, 10], 3, [0, 2, 3], id="n1"),
        pytest.param([1, 3], [4, 0, 2, 0], 6, [4, 2], None, [0, 2], id="both-8s"),
        pytest.param([0, 1, 2, 3], [0, 0, 0, 0], 0, [0, 0], None, [], id="all"),
    ],
)
def test_out_of_service_nodes_vanish_from_every_index(
    ledger, out, free_of, free_gpus, leaf_free, best_fit_8, idle
) -> None:
    led = ledger(LAYOUT)
    assert led.set_out_of_service(out) is bool(out)
    assert_placers_see(led, free_of, free_gpus, leaf_free, best_fit_8, idle)
    assert led.out_of_service() == tuple(sorted(out))
    assert led.total_gpus == 22  # capacity is still declared: a node coming back brings it back


def test_jobs_on_a_node_that_goes_out_keep_their_gpus_and_release_them_while_out(ledger) -> None:
    led = ledger(LAYOUT, [(1, 5)])
    led.set_out_of_service([1])
    assert led.free_gpus == 4 + 2 + 8
    led.release([(1, 5)])  # the job ends while the node is cordoned: nothing shows up yet
    assert led.free_of(1) == 0 and led.free_gpus == 14
    with pytest.raises(OverAllocation):
        led.release([(1, 1)])  # the true free count (8) is still checked against capacity
    assert led.set_out_of_service([]) is True
    assert led.free_of(1) == 8 and led.free_gpus == 22 and list(led.idle_nodes()) == [0, 1, 2, 3]


def test_setting_the_same_set_again_changes_nothing_and_unknown_nodes_are_ignored(ledger) -> None:
    led = ledger(LAYOUT, nodes=[0, 1])
    assert led.set_out_of_service([1, 3]) is True  # n3 is not in this partition
    assert led.set_out_of_service([1]) is False
    assert led.out_of_service() == (1,)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["alloc", "release", "out"]), st.integers(0, 3), st.integers(1, 8)),
        max_size=30,
    )
)
def test_random_operations_agree_with_a_naive_recount(ledger, ops) -> None:
    led = ledger(LAYOUT)
    cap, free, out = [4, 8, 2, 8], [4, 8, 2, 8], set()
    for op, node, gpus in ops:
        if op == "alloc" and gpus <= free[node]:
            led.allocate([(node, gpus)])
            free[node] -= gpus
        elif op == "release" and free[node] + gpus <= cap[node]:
            led.release([(node, gpus)])
            free[node] += gpus
        elif op == "out":
            out ^= {node}
            led.set_out_of_service(out)
        seen = [0 if n in out else free[n] for n in range(4)]
        assert [led.free_of(n) for n in range(4)] == seen
        assert led.free_gpus == sum(seen)
        assert [led.leaf_free(0), led.leaf_free(1)] == [seen[0] + seen[1], seen[2] + seen[3]]
        assert list(led.avail_nodes()) == [n for n in range(4) if seen[n]]
        assert list(led.idle_nodes()) == [n for n in range(4) if n not in out and free[n] == cap[n]]
        assert list(led.fullest_first()) == sorted((n for n in range(4) if seen[n]), key=lambda n: (-seen[n], n))


@pytest.mark.parametrize("placement", ["first-fit", "consolidate", "topology-aware", "random"])
def test_the_scheduler_places_nothing_on_nodes_out_of_service(cluster, placement) -> None:
    sched = Scheduler(cluster({"l0": [8, 8], "l1": [8]}, PolicySpec(placement=placement)))
    sched.set_out_of_service(["n0", "n2", "no-such-node"])
    for i in range(3):
        sched.submit(JobSpec(f"j{i}", 0, 10, 4, "x"), 0)
    starts = sched.run_cycle(0).starts
    assert sorted(s.job_id for s in starts) == ["j0", "j1"]  # only n1's 8 GPUs are usable
    assert {node for s in starts for node, _ in s.slots} == {1}
    sched.set_out_of_service([])  # back in service: the waiting job starts in the next cycle
    (third,) = sched.run_cycle(1).starts
    assert third.job_id == "j2" and third.slots[0][0] in (0, 2)


def test_a_running_job_on_a_node_going_out_completes_normally(cluster) -> None:
    sched = Scheduler(cluster({"l0": [8]}))
    sched.submit(JobSpec("a", 0, 10, 8, "x"), 0)
    sched.run_cycle(0)
    sched.set_out_of_service(["n0"])
    sched.complete("a", 10)
    sched.submit(JobSpec("b", 10, 10, 1, "x"), 10)
    assert sched.run_cycle(10).starts == ()
    sched.set_out_of_service([])
    assert [s.job_id for s in sched.run_cycle(11).starts] == ["b"]


# The preemptive re-rank counts only GPUs that can be used: free ones placers see, and those running
# jobs hold on nodes in service. A job on a node taken out of service keeps its GPUs (nobody else
# could use them, so preempting it frees nothing). Two 8-GPU nodes, srtf: `running` jobs start in
# order (consolidate: n0 first unless it is out), then `out` goes out of service and S (8 GPUs,
# 10 s, the shortest) arrives.
@pytest.mark.parametrize(
    ("out_before", "running", "out", "preempted", "started"),
    [
        # Only n1 is usable and B holds it: S is shorter, so B yields. Counting n0's idle 8 GPUs
        # (the total) kept B and left S waiting for a node it can never get.
        pytest.param(["n0"], [("B", 500)], ["n0"], ["B"], [("S", 1)], id="idle-node-out"),
        # A keeps n0 while it is out; only B's n1 can go to S. Counting A's GPUs as everyone's
        # ranked B (shorter) ahead of A and preempted A, whose GPUs nobody can use.
        pytest.param([], [("A", 1000), ("B", 500)], ["n0"], ["B"], [("S", 1)], id="busy-node-out"),
        # Nothing S could use (n1 too is out): A keeps running, nothing is preempted for nothing.
        pytest.param([], [("A", 1000)], ["n0", "n1"], [], [], id="all-out"),
        # The longest job is the one on the node that is out: it still keeps its GPUs, and the
        # job that yields is the one whose GPUs S can use.
        pytest.param([], [("A", 1000), ("B", 2000)], ["n0"], ["B"], [("S", 1)], id="longer-job-on-the-out-node"),
    ],
)
def test_preemptive_rerank_counts_only_gpus_that_can_be_used(cluster, out_before, running, out, preempted,
                                                               started) -> None:  # fmt: skip
    sched = Scheduler(cluster({"l0": [8, 8]}, PolicySpec(queue="srtf", placement="consolidate")))
    sched.set_out_of_service(out_before)
    for t, (name, duration) in enumerate(running):
        sched.submit(JobSpec(name, t, duration, 8, "x"), t)
        assert [s.job_id for s in sched.run_cycle(t).starts] == [name]
    sched.set_out_of_service(out)
    sched.submit(JobSpec("S", 5, 10, 8, "x"), 5)
    decision = sched.run_cycle(5)
    assert [p.job_id for p in decision.preempts] == preempted
    assert [(s.job_id, s.slots[0][0]) for s in decision.starts] == started
    assert all(sched.jobs[name].phase.value == "Running" for name, _ in running if name not in preempted)

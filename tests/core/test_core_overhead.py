"""Communication overhead (claim 5): the fraction a spread-out job pays, applied in the simulator
and recorded on the job; and topology-aware placement trading wait for spread."""

from __future__ import annotations

import pytest

from gputwin.core.model import OverheadModel, PolicySpec
from gputwin.sim.engine import simulate


@pytest.mark.parametrize(
    ("per_tier", "cross_node", "nodes", "tiers", "fraction"),
    [
        pytest.param(0.5, 0.2, 1, 0, 0.0, id="one-node-pays-nothing"),
        pytest.param(0.5, 0.2, 2, 0, 0.2, id="two-nodes-one-leaf"),
        pytest.param(0.5, 0.2, 2, 1, 0.7, id="two-leaves-one-spine"),
        pytest.param(0.5, 0.2, 3, 2, 1.2, id="across-spines"),
        pytest.param(0.0, 0.0, 4, 2, 0.0, id="free-network"),
        pytest.param(0.25, 0.0, 2, 3, 0.75, id="tiers-only"),
    ],
)
def test_overhead_fraction(per_tier, cross_node, nodes, tiers, fraction) -> None:
    assert OverheadModel(per_tier=per_tier, cross_node=cross_node).fraction(nodes, tiers) == pytest.approx(
        fraction
    )


# s0: l0 (n0, n1), l1 (n2); s1: l2 (n3). 4 GPUs each.
LAYOUT = {"s0": {"l0": [4, 4], "l1": [4]}, "s1": {"l2": [4]}}
MODEL = OverheadModel(per_tier=0.5, cross_node=0.2)


@pytest.mark.parametrize(
    ("nodes", "gpus", "end", "overhead", "leaves", "tiers"),
    [
        pytest.param((0, 1), 4, 100.0, 0.0, 1, 0, id="fits-one-node"),
        pytest.param((0, 1), 8, 100 * 1.2, 0.2, 1, 0, id="two-nodes-same-leaf"),
        pytest.param((0, 2), 8, 100 * 1.7, 0.7, 2, 1, id="two-leaves-same-spine"),
        pytest.param((0, 3), 8, 100 * 2.2, 1.2, 2, 2, id="two-spines"),
    ],
)
def test_spread_job_runs_longer_by_the_overhead_and_records_it(
    cluster, jobs, nodes, gpus, end, overhead, leaves, tiers
) -> None:
    # One partition over just these two nodes, so a job of 8 GPUs must span both of them.
    spec = cluster(LAYOUT, overhead=MODEL, partitions=[("p", nodes, ("*",))])
    out = simulate(spec, jobs([("j", 0, 100, gpus)]))
    (job,) = out.finished
    assert job.end == pytest.approx(end)
    assert (job.overhead, job.leaves, job.tiers) == (pytest.approx(overhead), leaves, tiers)
    assert job.duration == 100  # the job's own duration is not rewritten


def test_preempted_spread_job_keeps_its_work_and_pays_overhead_again(cluster, jobs) -> None:
    # Two 4-GPU nodes, cross_node 1.0: every 8-GPU run lasts twice its work.
    # L (100 s of work) runs from 0; at 40 it has done 20 s of work, 80 left. S (10 s of work) preempts it
    # and runs 40..60; L resumes at 60 with 80 + 30 (checkpoint) = 110 s of work -> 220 s -> ends 280.
    spec = cluster({"l0": [4, 4]}, PolicySpec(queue="srtf"), overhead=OverheadModel(cross_node=1.0))
    out = simulate(spec, jobs([("L", 0, 100, 8), ("S", 40, 10, 8)]))
    ends = {j.job_id: j.end for j in out.finished}
    assert ends == {"S": 60.0, "L": 280.0}
    assert {j.job_id: j.overhead for j in out.finished} == {"S": 1.0, "L": 1.0}


def test_topology_aware_waits_for_max_wait_then_spreads_and_pays(cluster, jobs) -> None:
    # 10 GPUs fit no leaf (l0 has 8). The job waits max_wait = 50 s (the scheduler asks to be woken then),
    # then spreads over l0 (n0 4, n1 4) + l1 (n2 2): 2 leaves under s0 -> 0.2 + 0.5 = 0.7 -> 170 s.
    policy = PolicySpec(placement="topology-aware", params={"max_wait": 50})
    out = simulate(cluster(LAYOUT, policy, overhead=MODEL), jobs([("j", 0, 100, 10)]))
    (job,) = out.finished
    assert (job.first_start, job.wait, job.slots) == (50.0, 50.0, ((0, 4), (1, 4), (2, 2)))
    assert job.end == pytest.approx(50 + 170)


# Regression guard; the core used to get this wrong: the topology-aware wake is at queued_since +
# max_wait, but the placer compares now - queued_since < max_wait; in floats (0.7 + 0.1) - 0.7 < 0.1,
# so at the wake the job still waits, the new wake (same instant) is dropped by the engine, and the
# job never runs
def test_topology_aware_wake_with_fractional_times_still_spreads(cluster, jobs) -> None:
    policy = PolicySpec(placement="topology-aware", params={"max_wait": 0.1})
    out = simulate(cluster(LAYOUT, policy, overhead=MODEL), jobs([("j", 0.7, 100, 10)]))
    assert [j.job_id for j in out.finished] == ["j"]

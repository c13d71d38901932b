"""What-if forks: the spec of added nodes, what a fork changes, and that every candidate replays the
same draws. Fixture: the snapshot of tests/twin/data (two VCs of the Philly-shaped trace at
t = 10,000 s; see data/make_snapshot.py), on the cluster it implies."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from gputwin.core.model import ClusterSpec
from gputwin.errors import InputError
from gputwin.twin.seed import default_cluster
from gputwin.twin.snapfile import load_snapshot
from gputwin.twin.snapshot import PendingJob
from gputwin.twin.whatif import AddNodes, Change, fork, outcomes

SNAP = load_snapshot(Path(__file__).resolve().parent / "data" / "philly-mix1-2vc.snapshot.json")
CLUSTER = default_cluster(SNAP)
DAY = 86400.0


@pytest.mark.parametrize(("spec", "parsed"), [("gpu:4x8", AddNodes("gpu", 4, 8)), (" p-1:1x1 ", AddNodes("p-1", 1, 1)),
                                               ("a.b:99999x1024", AddNodes("a.b", 99999, 1024))],
                         ids=["plain", "spaces", "largest"])  # fmt: skip
def test_add_nodes_spec(spec: str, parsed: AddNodes) -> None:
    assert AddNodes.parse(spec) == parsed


@pytest.mark.parametrize("spec", ["gpu", "gpu:4", "gpu:0x8", "gpu:4x0", ":4x8", "gpu:4x8x2", "gpu:-1x8", "gpu:4X8"],
                         ids=["no-count", "no-gpus", "zero-nodes", "zero-gpus", "no-partition", "extra", "negative",
                              "capital-x"])  # fmt: skip
def test_a_bad_add_nodes_spec_is_one_line(spec: str) -> None:
    with pytest.raises(InputError, match=r"^--add-nodes: .*: want PARTITION:COUNTxGPUS, e.g. gpu:4x8$"):
        AddNodes.parse(spec)


def test_a_fork_drains_adds_and_submits() -> None:
    job = PendingJob("new-1", "ed69ec", 0.0, 8, estimate=600.0)
    change = Change((CLUSTER.partitions[0].nodes[0],), (AddNodes("103959", 2, 8),), (job,))
    snap, cluster = fork(SNAP, CLUSTER, change)
    assert [o.node for o in snap.out_of_service][-1] == change.drain[0]
    part = next(p for p in cluster.partitions if p.name == "103959")
    assert part.nodes[-2:] == ("103959-whatif0-0", "103959-whatif0-1")
    assert {n.name for n in cluster.topology.nodes} >= set(part.nodes)
    assert snap.pending[-1] == dataclasses.replace(job, submit=SNAP.taken_at)
    assert len(snap.pending) == len(SNAP.pending) + 1 and SNAP.out_of_service == ()  # the original is untouched


@pytest.mark.parametrize(("change", "message"),
                         [(Change(drain=("nowhere",)), "--drain: 'nowhere': no such node in the cluster"),
                          (Change(add=(AddNodes("x", 1, 8),)), "--add-nodes: 'x': no such partition"),
                          (Change(submit=(PendingJob("j", "x", 0.0, 1),)), "--submit: job j: partition: no partition")],
                         ids=["drain", "add", "submit"])  # fmt: skip
def test_unknown_names_are_refused(change: Change, message: str) -> None:
    with pytest.raises(InputError, match="^" + message):
        fork(SNAP, CLUSTER, change)


def _with_queue(queue: str) -> ClusterSpec:
    return dataclasses.replace(CLUSTER, partitions=tuple(
        dataclasses.replace(p, policy=dataclasses.replace(p.policy, queue=queue)) for p in CLUSTER.partitions))


def test_every_candidate_replays_the_same_draws() -> None:
    """Every priority in the snapshot is 0, so priority order is submit order: fifo replays
    exactly what priority does only if both drew the same run times; sjf differs."""
    assert {j.priority for j in SNAP.pending} == {0}
    prio, fifo, sjf = outcomes([CLUSTER, _with_queue("fifo"), _with_queue("sjf")], SNAP, samples=3, seed=4,
                               horizon=DAY)  # fmt: skip
    assert prio.samples == fifo.samples and prio.samples != sjf.samples
    assert prio.samples[0] != prio.samples[1]  # the samples themselves differ


def test_draining_a_partition_starts_none_of_its_queue() -> None:
    ed = next(p for p in CLUSTER.partitions if p.name == "ed69ec")
    snap, cluster = fork(SNAP, CLUSTER, Change(drain=ed.nodes))
    (run,) = outcomes([cluster], snap, samples=2, horizon=DAY)
    waiting = [i for i, j in enumerate(snap.pending) if j.partition == "ed69ec"]
    assert len(waiting) == 114
    assert all(math.isinf(sample[0][i]) for sample in run.samples for i in waiting)
    assert any(math.isfinite(t) for t in run.samples[0][0])  # the other partition goes on

"""Routing by task type to a partition (claim 2) and admission: who is refused, and why."""

from __future__ import annotations

import pytest

from gputwin.core.decision import Reject
from gputwin.core.model import ClusterSpec, JobSpec, PartitionSpec, PolicySpec
from gputwin.core.scheduler import Scheduler
from gputwin.sim.engine import simulate

LAYOUT = {"l0": [8, 8], "l1": [4, 8]}  # n0, n1 (16 GPUs) | n2 (4), n3 (8)


def _cluster(topology_spec, with_catch_all: bool = True) -> ClusterSpec:
    parts = [
        PartitionSpec("train", ("n0", "n1"), ("train", "finetune"), max_gpus_per_job=8),
        PartitionSpec("dev", ("n2",), ("*", "debug") if with_catch_all else ("debug",)),
        # declared later: loses "train" to the first partition and "*" to dev
        PartitionSpec("late", ("n3",), ("train", "*", "batch")),
    ]
    return ClusterSpec(topology_spec(LAYOUT), tuple(parts))


@pytest.mark.parametrize(
    ("task_type", "with_catch_all", "partition"),
    [
        pytest.param("train", True, "train", id="explicit-type"),
        pytest.param("finetune", True, "train", id="second-type-of-a-partition"),
        pytest.param("debug", True, "dev", id="explicit-type-beside-catch-all"),
        pytest.param("batch", True, "late", id="explicit-type-of-a-later-partition"),
        pytest.param("inference", True, "dev", id="unknown-type-goes-to-first-catch-all"),
        pytest.param("", True, "dev", id="empty-type-goes-to-catch-all"),
        pytest.param("inference", False, "late", id="catch-all-of-a-later-partition"),
    ],
)
def test_task_type_routes_to_the_first_partition_that_declares_it(
    topology_spec, task_type, with_catch_all, partition
) -> None:
    sched = Scheduler(_cluster(topology_spec, with_catch_all))
    assert sched.route(JobSpec("j", 0, 1, 1, task_type)) == partition


def test_no_catch_all_leaves_unknown_types_unrouted(topology_spec) -> None:
    spec = ClusterSpec(topology_spec(LAYOUT), (PartitionSpec("train", ("n0",), ("train",)),))
    sched = Scheduler(spec)
    assert sched.route(JobSpec("j", 0, 1, 1, "inference")) is None
    assert sched.submit(JobSpec("j", 0, 1, 1, "inference"), 0).rejects == (
        Reject("j", "no partition serves task type 'inference'"),
    )
    assert sched.jobs == {}


@pytest.mark.parametrize(
    ("task_type", "gpus", "reason"),
    [
        pytest.param("train", 8, None, id="at-the-per-job-limit"),
        pytest.param(
            "train", 9, "asks for 9 GPUs; partition 'train' allows 8 per job", id="over-max-gpus-per-job"
        ),
        # the capacity check comes first: 17 > 16 names the partition size, not the limit
        pytest.param("train", 17, "asks for 17 GPUs; partition 'train' has 16", id="more-than-the-partition"),
        pytest.param("debug", 4, None, id="whole-small-partition"),
        pytest.param(
            "debug", 5, "asks for 5 GPUs; partition 'dev' has 4", id="more-than-the-small-partition"
        ),
    ],
)
def test_admission_rejects_with_a_reason(topology_spec, task_type, gpus, reason) -> None:
    sched = Scheduler(_cluster(topology_spec))
    d = sched.submit(JobSpec("j", 0, 1, gpus, task_type), 0)
    if reason is None:
        assert d.rejects == ()
        assert sched.jobs["j"].phase.value == "Queued"
    else:
        assert d.rejects == (Reject("j", reason),)
        assert "j" not in sched.jobs


def test_rejections_are_counted_in_the_sim_outcome(topology_spec) -> None:
    specs = [
        JobSpec("ok-train", 0, 10, 8, "train", seq=0),
        JobSpec("too-wide", 0, 10, 9, "train", seq=1),
        JobSpec("ok-dev", 1, 5, 2, "inference", seq=2),
        JobSpec("too-big", 2, 5, 5, "debug", seq=3),
        JobSpec("ok-late", 3, 5, 8, "batch", seq=4),
    ]
    out = simulate(_cluster(topology_spec), specs)
    assert [r.job_id for r in out.rejected] == ["too-wide", "too-big"]
    assert {j.job_id: j.partition for j in out.finished} == {
        "ok-train": "train",
        "ok-dev": "dev",
        "ok-late": "late",
    }
    assert out.partitions == {"train": 16, "dev": 4, "late": 8}


# Regression guard; the core used to get this wrong: Scheduler.submit overwrites a live job with
# the same job_id; the first job's end event then completes the second, the first's GPUs are never
# released (4 of 8 stay used after the run) and one job silently disappears
def test_duplicate_job_id_is_rejected_not_merged(cluster) -> None:
    sched = Scheduler(cluster({"l0": [8]}))
    sched.submit(JobSpec("a", 0, 10, 4, "x"), 0)
    sched.run_cycle(0)
    d = sched.submit(JobSpec("a", 1, 100, 4, "x", seq=1), 1)
    assert [r.job_id for r in d.rejects] == ["a"]


@pytest.mark.parametrize("placer", ["first-fit", "consolidate", "topology-aware", "random"])
def test_a_job_asking_for_no_gpus_is_rejected_not_a_crash(cluster, placer) -> None:
    spec = cluster({"l0": [4]}, PolicySpec(placement=placer))
    out = simulate(spec, [JobSpec("z", 0, 10, 0, "x"), JobSpec("ok", 0, 10, 1, "x", seq=1)])
    assert [r.job_id for r in out.rejected] == ["z"]
    assert [j.job_id for j in out.finished] == ["ok"]

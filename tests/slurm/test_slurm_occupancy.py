"""SLURM's occupancy per partition: the sinfo/squeue parsers on output captured from the real 22.05
test cluster (plus the GRES forms SLURM documents), and `live_occupancy` on the running cluster."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from gputwin.adapters.slurm import SlurmCommandError
from gputwin.adapters.slurm.occupancy import (
    PartitionOccupancy,
    gpu_count,
    live_occupancy,
    occupancy_from,
    parse_sinfo,
    parse_squeue,
)
from slurm_testcluster import Cluster  # tests/slurm/ helpers

# Captured from the test cluster (start.sh: batch = gpu[01-16], debug = gpu[09-16]) with a 3- and a
# 5-GPU job on gpu01 (batch) and a 2-node x 8-GPU job on gpu[09-10] (debug), via occupancy.SINFO_ARGV.
SINFO = """\
gpu01|batch*|gpu:h100:8|gpu:h100:8(IDX:0-7)
gpu02|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu03|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu04|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu05|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu06|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu07|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu08|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu09|batch*|gpu:h100:8|gpu:h100:8(IDX:0-7)
gpu09|debug|gpu:h100:8|gpu:h100:8(IDX:0-7)
gpu10|batch*|gpu:h100:8|gpu:h100:8(IDX:0-7)
gpu10|debug|gpu:h100:8|gpu:h100:8(IDX:0-7)
gpu11|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu11|debug|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu12|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu12|debug|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu13|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu13|debug|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu14|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu14|debug|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu15|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu15|debug|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu16|batch*|gpu:h100:8|gpu:h100:0(IDX:N/A)
gpu16|debug|gpu:h100:8|gpu:h100:0(IDX:N/A)
"""
# The same moment via occupancy.SQUEUE_ARGV: a 3-task pending array (expanded by -r), a job pending in
# two partitions (captured a moment earlier: sbatch -p batch,debug), two running on gpu01, one on debug.
SQUEUE = """\
6|batch|RUNNING
11|batch|RUNNING
10_1|debug|PENDING
10_2|debug|PENDING
10_3|debug|PENDING
4|batch,debug|PENDING
8|debug|PENDING
7|debug|RUNNING
"""


def test_captured_output_gives_each_partitions_counts() -> None:
    assert occupancy_from(SINFO, SQUEUE) == {
        # gpu09-10 are in both partitions: the debug job's 16 GPUs are in use for batch too.
        "batch": PartitionOccupancy("batch", nodes=16, total_gpus=128, used_gpus=24, pending=1, running=2),
        "debug": PartitionOccupancy("debug", nodes=8, total_gpus=64, used_gpus=16, pending=5, running=1),
    }
    assert occupancy_from(SINFO, SQUEUE)["debug"].free_gpus == 48


def test_an_idle_cluster_and_a_queue_without_nodes() -> None:
    idle = "gpu01|train|gpu:8|gpu:0\n"
    assert occupancy_from(idle, "") == {"train": PartitionOccupancy("train", 1, 8, 0, 0, 0)}
    assert occupancy_from("", "3|ghost|PENDING\n") == {"ghost": PartitionOccupancy("ghost", 0, 0, 0, 1, 0)}


@pytest.mark.parametrize(
    ("gres", "gpus"),
    [
        ("gpu:h100:8", 8),
        ("gpu:8", 8),
        ("gpu:h100:3(IDX:0-2)", 3),
        ("gpu:h100:0(IDX:N/A)", 0),
        ("gpu:4(S:0-1)", 4),
        ("gpu:a100:2(IDX:0,3),gpu:v100:1(IDX:1)", 3),  # two types; a comma inside IDX
        ("gpu:3g.20gb:2,mps:400", 2),  # a MIG type; mps shares are not GPUs
        ("shard:16", 0),
        ("(null)", 0),
    ],
)
def test_gres_values(gres: str, gpus: int) -> None:
    assert gpu_count(gres, "Gres") == gpus


@pytest.mark.parametrize("gres", ["gpu", "gpu:h100:eight", "gpu:8)", "gpu:h100:8(IDX:0-7", "", "gpu:8;rm"])
def test_malformed_gres_is_refused(gres: str) -> None:
    with pytest.raises(SlurmCommandError, match="Gres: not a GRES list"):
        gpu_count(gres, "Gres")


@pytest.mark.parametrize(
    ("sinfo", "message"),
    [
        ("gpu01|batch|gpu:8\n", r"sinfo: line 1: want 4 fields"),
        ("gpu01|batch|gpu:8|gpu:0|extra\n", r"sinfo: line 1: want 4 fields"),
        ("gpu01|-x|gpu:8|gpu:0\n", r"sinfo: line 1: partition name: refused '-x'"),
        ("gpu 01|batch|gpu:8|gpu:0\n", r"sinfo: line 1: node name: refused"),
        ("gpu01|batch|gpu:8|gpu:9\n", r"sinfo: line 1: GresUsed 'gpu:9' exceeds Gres 'gpu:8'"),
        ("gpu01|b|gpu:8|gpu:0\ngpu01|b|gpu:8|gpu:0\n", r"sinfo: line 2: node gpu01 listed twice"),
    ],
)
def test_malformed_sinfo_lines_are_refused(sinfo: str, message: str) -> None:
    with pytest.raises(SlurmCommandError, match=message):
        parse_sinfo(sinfo)


@pytest.mark.parametrize(
    ("squeue", "message"),
    [
        ("7|debug\n", r"squeue: line 1: want 3 fields"),
        ("7|debug|SUSPENDED\n", r"squeue: line 1: state: not one of PENDING, RUNNING"),
        ("7|debug|R\n", r"squeue: line 1: state"),
        ("7;x|debug|RUNNING\n", r"squeue: line 1: job id"),
        ("7|debug,|PENDING\n", r"squeue: line 1: partition name: refused ''"),
        ("7|a=b|PENDING\n", r"squeue: line 1: partition name: refused 'a=b'"),
    ],
)
def test_malformed_squeue_lines_are_refused(squeue: str, message: str) -> None:
    with pytest.raises(SlurmCommandError, match=message):
        parse_squeue(squeue)


# --- the live cluster -------------------------------------------------------------------------------


Counts = Callable[[dict[str, PartitionOccupancy]], object]


def poll(read: Counts, want: object, timeout: float = 30) -> None:
    """Poll live_occupancy() until `read(occupancy)` equals `want`."""
    deadline = time.monotonic() + timeout
    while (got := read(live_occupancy())) != want:
        if time.monotonic() > deadline:
            raise AssertionError(f"occupancy never showed {want!r}; last: {got!r}")
        time.sleep(0.2)


def test_live_occupancy_follows_a_running_and_a_pending_job(slurm_cluster: Cluster) -> None:
    before = live_occupancy()
    assert before, "the test cluster has partitions"
    name = "debug" if "debug" in before else min(before)
    part = before[name]
    assert part.total_gpus == 8 * part.nodes and part.nodes > 0  # start.sh: 8 fake GPUs per node
    nodes = part.nodes

    def counts(o: dict[str, PartitionOccupancy]) -> tuple[int, int, int]:
        return o[name].used_gpus, o[name].running, o[name].pending

    poll(counts, (0, 0, 0))  # earlier tests' jobs have ended
    running = slurm_cluster.submit(f"--partition={name}", "--gres=gpu:3", command="sleep 120")
    # Every node of the partition, 8 GPUs each: cannot start while the first job holds 3 of them.
    waiting = slurm_cluster.submit(f"--partition={name}", f"--nodes={nodes}", "--gres=gpu:8", command="true")
    try:
        poll(counts, (3, 1, 1))
        slurm_cluster.run("scancel", running, waiting)
        poll(counts, (0, 0, 0))
    finally:
        slurm_cluster.run("scancel", running, waiting, check=False)

"""The SLURM snapshot reader: the `--json` parsers on output captured from the real 22.05 test cluster,
their refusals, and `slurm_snapshot` on the running cluster against what `squeue` itself says.

data/squeue-22.05.json and data/sinfo-22.05.json were captured from a 4-node x 8-GPU test cluster
(start.sh --nodes 4 --leaves 2: batch = gpu[01-04], debug = gpu[03-04]) with gpu04 drained, a 2-node
x 8-GPU job (10) and an unlimited 3-GPU job (11) running, a pending 8-GPU job (12), an array 13 = 1-3,7
of which tasks 1 and 2 run (as jobs 15, 16) and 3,7 wait, and a job pending in two partitions (14);
each job and node kept only the fields the reader reads (values untouched).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gputwin.adapters.slurm import SlurmCommandError
from gputwin.adapters.slurm.snapshot import expand_tasks, parse_sinfo_json, parse_squeue_json, slurm_snapshot
from gputwin.twin.forecast import forecast
from gputwin.twin.seed import default_cluster
from gputwin.twin.snapshot import OutOfService, SnapPartition
from slurm_testcluster import Cluster  # tests/slurm/ helpers

DATA = Path(__file__).resolve().parent / "data"
SQUEUE = (DATA / "squeue-22.05.json").read_text()
SINFO = (DATA / "sinfo-22.05.json").read_text()


def test_captured_squeue_gives_running_slots_and_the_queue_in_order() -> None:
    running, pending = parse_squeue_json(SQUEUE)
    assert [(r.job_id, r.slots, r.time_limit) for r in running] == [
        ("10", (("gpu01", 8), ("gpu02", 8)), 1200.0),
        ("11", (("gpu03", 3),), None),  # --time=UNLIMITED
        ("13_1", (("gpu03", 2),), 240.0),  # array tasks named as squeue -r names them
        ("13_2", (("gpu03", 2),), 240.0),
    ]
    assert [(p.job_id, p.partition, p.gpus, p.num_nodes, p.time_limit) for p in pending] == [
        ("12", "batch", 8, 1, 900.0),
        ("13_3", "batch", 2, 1, 240.0),
        ("13_7", "batch", 2, 1, 240.0),
        ("14", "batch", 4, 1, 360.0),  # -p batch,debug: queued in the first
    ]
    assert all(r.start >= r.submit > 1.7e9 for r in running)


def test_captured_sinfo_gives_partitions_and_the_drained_node() -> None:
    partitions, out = parse_sinfo_json(SINFO)
    assert partitions == (SnapPartition("batch", ("gpu01", "gpu02", "gpu03", "gpu04")),
                          SnapPartition("debug", ("gpu03", "gpu04")))  # fmt: skip
    assert out == (OutOfService("gpu04", "idle+DRAIN"),)


def edited(text: str, key: str, index: int, **changes: Any) -> str:
    data = json.loads(text)
    data[key][index].update(changes)
    return json.dumps(data)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "squeue --json: not JSON"),
        ('{"jobs": {}}', "squeue --json: jobs: want a list of objects"),
        (edited(SQUEUE, "jobs", 0, job_id="10"), "jobs[0]: job_id: want int"),
        (edited(SQUEUE, "jobs", 0, submit_time=True), "job 10: submit_time: want int"),
        (edited(SQUEUE, "jobs", 0, partition="a;b"), "job 10: partition"),
        (edited(SQUEUE, "jobs", 0, nodes="gpu01,-x"), "job 10: nodes"),
        (edited(SQUEUE, "jobs", 0, time_limit=-3), "job 10: time_limit: not minutes"),
        (edited(SQUEUE, "jobs", 6, array_task_string="3-1"), "job 13: array_task_string: not a task range"),
        (edited(SQUEUE, "jobs", 6, array_task_string="x"), "job 13: array_task_string: not understood"),
        (edited(SQUEUE, "jobs", 6, array_task_string="1-99999999"), "job 13: array_task_string: not a task range"),
        (edited(SQUEUE, "jobs", 1, gres_detail=["gpu:h100:zz"]), "job 11: gres_detail: not a GRES list"),
    ],
    ids=["not-json", "jobs-not-a-list", "string-id", "bool-time", "partition-with-semicolon", "option-in-nodes",
         "negative-limit", "backwards-range", "garbage-range", "huge-array", "bad-gres"],
)  # fmt: skip
def test_unexpected_squeue_output_is_one_line_naming_job_and_field(text: str, message: str) -> None:
    with pytest.raises(SlurmCommandError, match=re.escape(message)) as caught:
        parse_squeue_json(text)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "tasks"),
    [("1-3,7", [1, 2, 3, 7]), ("0-10:5%2", [0, 5, 10]), ("4", [4])],
    ids=["range-and-one", "step-and-throttle", "one"],
)
def test_array_task_strings(text: str, tasks: list[int]) -> None:
    assert expand_tasks(text, "here") == tasks


def test_slurm_snapshot_on_mock_commands_keeps_only_nodes_with_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """With mock commands answering the captured output and a mock topology without gpu04 (as
    `live_topology` leaves out a node without GPUs), the snapshot drops gpu04 everywhere."""
    from gputwin.adapters.slurm import snapshot as module
    from gputwin.core.model import NodeSpec, SwitchSpec, TopologySpec

    topo = TopologySpec("live", (SwitchSpec("s1"),), tuple(NodeSpec(f"gpu0{i}", 8, "s1") for i in (1, 2, 3)))
    answers = {module.SQUEUE_JSON: SQUEUE, module.SINFO_JSON: SINFO}
    monkeypatch.setattr(module, "live_topology", lambda: topo)
    monkeypatch.setattr(module, "run_command", lambda argv, timeout: answers[tuple(argv)])
    snap = module.slurm_snapshot(clock=lambda: 1.8e9)
    assert snap.partitions == (SnapPartition("batch", ("gpu01", "gpu02", "gpu03")), SnapPartition("debug", ("gpu03",)))
    assert (snap.out_of_service, snap.taken_at, len(snap.running), len(snap.pending)) == ((), 1.8e9, 4, 4)


# --- the real cluster -------------------------------------------------------------------------------


def squeue_says(cluster: Cluster) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """squeue's own parsable view: running id -> (nodes, limit); pending ids in its priority order."""
    out = cluster.run("squeue", "-h", "-r", "-t", "PENDING,RUNNING,CONFIGURING,COMPLETING", "--sort=-p,i",
                      "-o", "%i|%T|%N|%l").stdout  # fmt: skip
    running, pending = {}, []
    for line in out.splitlines():
        job, state, nodes, limit = line.split("|")
        if state == "PENDING":
            pending.append(job)
        else:
            running[job] = (nodes, limit)
    return running, pending


def wait_for(condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the cluster did not get there in time")
        time.sleep(0.3)


def test_a_live_snapshot_matches_squeue_and_forecasts_within_the_limits(slurm_cluster: Cluster) -> None:
    """Fill every batch node with 8-GPU jobs that have time limits, queue more, drain one node: the
    snapshot holds exactly what squeue shows, and no forecast start is later than the limits allow."""
    cluster = slurm_cluster
    nodes = cluster.run("sinfo", "-h", "-N", "-p", "batch", "-o", "%N").stdout.split()
    ours = [cluster.submit("-p", "batch", "--gres=gpu:8", "--time=3", command="sleep 120") for _ in nodes]
    wait_for(lambda: len(squeue_says(cluster)[0]) >= len(nodes))
    queued = [cluster.submit("-p", "batch", f"--gres=gpu:{g}", "--time=2", command="sleep 30") for g in (8, 2)]
    ours += queued + [cluster.submit("-p", "batch", "--gres=gpu:1", "--array=1-3", "--time=1", command="sleep 5")]
    cluster.run("scontrol", "update", f"nodename={nodes[-1]}", "state=drain", "reason=gputwin-snapshot-test")
    try:
        snap = slurm_snapshot()
        running, pending = squeue_says(cluster)
    finally:
        cluster.run("scontrol", "update", f"nodename={nodes[-1]}", "state=resume", check=False)
        cluster.run("scancel", *ours, check=False)
    assert {r.job_id: (len(r.slots), r.time_limit) for r in snap.running} == {
        job: (len(nodes_of(n)), minutes(limit)) for job, (n, limit) in running.items()}
    assert [p.job_id for p in snap.pending] == pending
    assert pending[:2] == queued and len(pending) == 5
    assert nodes[-1] in {o.node for o in snap.out_of_service}
    result = forecast(default_cluster(snap), snap, samples=4)
    latest_end = max(r.start + 180.0 for r in snap.running)
    for job in result.jobs:
        assert job.start_p90 is not None and snap.taken_at <= job.start_p90 <= latest_end + 3 * 120.0


def minutes(limit: str) -> float | None:
    """squeue's %l (`3:00`, `1:00:00`, `1-00:00:00`, `UNLIMITED`) in seconds."""
    if limit == "UNLIMITED":
        return None
    days, _, clock = limit.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return float((int(days or 0) * 24 + parts[0]) * 3600 + parts[1] * 60 + parts[2])


def nodes_of(hostlist_text: str) -> list[str]:
    import hostlist

    return hostlist.expand_hostlist(hostlist_text)

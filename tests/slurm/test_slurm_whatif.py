"""`gputwin whatif --slurm` on the running SLURM test cluster (skipped without it, as every test
here): a full batch partition with a queue, forked with one added node, ranked for the current
policy and sjf over exactly the jobs squeue shows pending."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from click.testing import CliRunner

from gputwin.cli.main import cli
from slurm_testcluster import Cluster  # tests/slurm/ helpers


def pending_ids(cluster: Cluster) -> list[str]:
    return cluster.run("squeue", "-h", "-r", "-t", "PENDING", "-o", "%i").stdout.split()


def ids(cluster: Cluster, state: str) -> set[str]:
    """Job ids in these states, every partition (the test cluster's partitions share nodes)."""
    return set(cluster.run("squeue", "-h", "-r", "-t", state, "-o", "%i").stdout.split())


def poll(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)
    return True


def test_whatif_forks_the_live_queue_and_ranks_both_policies(slurm_cluster: Cluster) -> None:
    cluster = slurm_cluster
    nodes = cluster.run("sinfo", "-h", "-N", "-p", "batch", "-o", "%N").stdout.split()
    # An earlier module's jobs may still hold nodes: wait for them (this test fills every batch node).
    if not poll(lambda: not ids(cluster, "RUNNING,PENDING"), 120):
        cluster.run("scancel", "--state", "RUNNING,PENDING", check=False)
        assert poll(lambda: not ids(cluster, "RUNNING,PENDING"), 60), "batch never emptied"
    fill = [cluster.submit("-p", "batch", "--gres=gpu:8", "--time=3", command="sleep 120") for _ in nodes]
    queued = [cluster.submit("-p", "batch", f"--gres=gpu:{g}", "--time=2", command="sleep 30") for g in (8, 2, 1)]
    ours = fill + queued
    # Right after sbatch every job is pending: wait until the fill runs and exactly our three wait.
    settled = poll(lambda: ids(cluster, "RUNNING") >= set(fill) and ids(cluster, "PENDING") == set(queued), 120)
    try:
        assert settled, f"the batch queue never settled: {cluster.run('squeue', '-h', check=False).stdout}"
        result = CliRunner().invoke(cli, ["whatif", "--slurm", "--policy", "sjf", "--add-nodes", "batch:1x8",
                                          "--samples", "4", "--horizon", "1h", "--json"])  # fmt: skip
        pending = pending_ids(cluster)
    finally:
        cluster.run("scancel", *ours, check=False)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout.splitlines()[-1])
    assert doc["changes"] == "add batch:1x8" and doc["snapshot"]["source"].startswith("slurm")
    assert doc["snapshot"]["pending"] == len(pending) >= 3
    assert sorted(c["queue"] for c in doc["candidates"]) == ["priority", "sjf"]
    assert all(c["jobs"] == len(pending) for c in doc["candidates"])  # 8 more GPUs: all start within the hour

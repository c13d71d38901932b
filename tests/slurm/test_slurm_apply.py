"""Apply safely, on the real test cluster: policies go live, jobs follow them, failures roll back.

A module fixture saves the cluster's managed files and puts them back (plus a reconfigure) at the
end, so other SLURM tests sharing the session cluster still see its initial partitions.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from gputwin.adapters.slurm import SlurmInputError
from gputwin.adapters.slurm.apply import (
    SlurmApplyError,
    apply,
    live_partitions,
    live_switches,
)
from gputwin.adapters.slurm.render import PARTITIONS, LuaTables, render
from slurm_testcluster import Cluster, managed_snapshot  # tests/slurm/ helpers

from gputwin.api.loader import load_cluster
from gputwin.cli.main import cli
from gputwin.core.model import ClusterSpec, NodeSpec

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = ROOT / "manifests" / "samples" / "two-leaf.yaml"


@pytest.fixture(scope="module")
def two_leaf() -> ClusterSpec:
    return load_cluster(TWO_LEAF)


@pytest.fixture
def applied(conf_dir: Path, two_leaf: ClusterSpec) -> Path:
    apply(render(two_leaf), conf_dir)
    return conf_dir


def _with_policy(cluster: ClusterSpec, index: int, **changes: object) -> ClusterSpec:
    parts = list(cluster.partitions)
    policy = dataclasses.replace(parts[index].policy, **changes)  # type: ignore[arg-type]
    parts[index] = dataclasses.replace(parts[index], policy=policy)
    return dataclasses.replace(cluster, partitions=tuple(parts))


def _job_field(cluster: Cluster, job_id: str, key: str) -> str:
    out = cluster.run("scontrol", "show", "job", job_id).stdout
    match = re.search(rf"\b{key}=(\S*)", out)
    assert match is not None, out
    return match.group(1)


def test_dry_run_writes_nothing(conf_dir: Path, two_leaf: ClusterSpec) -> None:
    before = managed_snapshot(conf_dir)
    result = apply(render(two_leaf), conf_dir, dry_run=True)
    assert not result.applied
    assert managed_snapshot(conf_dir) == before
    if result.changed:
        assert "+++ b/" in result.diff


def test_two_partitions_live(applied: Path) -> None:
    partitions = live_partitions()
    assert partitions["train"] == {f"gpu0{i}" for i in range(1, 7)}
    assert partitions["infer"] == {"gpu07", "gpu08"}
    assert {"batch", "debug"}.isdisjoint(partitions)  # the old managed partitions are gone
    assert {"leaf0", "leaf1", "spine"} <= live_switches()
    again = apply(render(load_cluster(TWO_LEAF)), applied)
    assert again.changed == () and again.diff == ""


def test_jobs_routed_by_task_type(slurm_cluster: Cluster, applied: Path) -> None:
    infer = slurm_cluster.submit("--comment=task:infer", "--gres=gpu:1")
    dev = slurm_cluster.submit("--comment=task:dev", "--gres=gpu:1")
    train = slurm_cluster.submit("--comment=task:train", "--gres=gpu:2", "--time=5")
    routed = {job: _job_field(slurm_cluster, job, "Partition") for job in (infer, dev, train)}
    assert routed == {infer: "infer", dev: "infer", train: "train"}
    assert _job_field(slurm_cluster, train, "Switches") == "1@00:05:00"  # topology-aware: one leaf
    assert _job_field(slurm_cluster, train, "Priority") == str(10_000_000 - 300)  # sjf from --time
    states = slurm_cluster.wait_done([infer, dev, train], 3, timeout=60)
    assert set(states.values()) == {"COMPLETED"}
    # Refused submissions create no job; --output keeps any stray output out of the working folder.
    quiet = ("--output=/dev/null", "--chdir=/tmp", "--wrap", "true")
    refused = slurm_cluster.run("sbatch", "--comment=task:nope", *quiet, check=False)
    assert refused.returncode != 0 and "unknown task type nope" in refused.stderr
    too_big = slurm_cluster.run("sbatch", "--comment=task:infer", "--gres=gpu:9", *quiet, check=False)
    assert too_big.returncode != 0 and "allows at most 8 GPUs" in too_big.stderr  # maxGPUsPerJob in Lua


def test_history_sizing_and_qssf_live(slurm_cluster: Cluster, conf_dir: Path, two_leaf: ClusterSpec) -> None:
    params = {**two_leaf.partitions[1].policy.params, "qssf_prior": 900}
    cluster = _with_policy(two_leaf, 1, queue="qssf", sizing="history", params=params)
    tables = LuaTables(gpu_sizes={("infer", "infer", 2): 4}, estimates={("root", "quick"): 5.0})
    apply(render(cluster, tables=tables), conf_dir)
    # Held back by --begin so the fields can be read before it runs; cancelled by the fixture.
    job = slurm_cluster.submit("--comment=task:infer", "--gres=gpu:2", "--job-name=quick", "--begin=now+3600")
    assert _job_field(slurm_cluster, job, "TresPerNode") == "gres:gpu:4"
    assert _job_field(slurm_cluster, job, "Priority") == str(10_000_000 - 5 * 4)  # qssf: estimate x GPUs
    # No estimate for this name: the partition's qssf_prior stands in, as in the twin (x 4 GPUs).
    unknown = slurm_cluster.submit(
        "--comment=task:infer", "--gres=gpu:4", "--job-name=new", "--begin=now+3600"
    )
    assert _job_field(slurm_cluster, unknown, "Priority") == str(10_000_000 - 900 * 4)
    slurm_cluster.run("scancel", job, unknown)


def test_unknown_node_rejected_before_writing(conf_dir: Path, applied: Path, two_leaf: ClusterSpec) -> None:
    topology = two_leaf.topology
    nodes = (*topology.nodes, NodeSpec("gpu99", 8, "leaf1"))
    parts = (dataclasses.replace(two_leaf.partitions[0], nodes=("gpu01", "gpu99")), two_leaf.partitions[1])
    broken = dataclasses.replace(
        two_leaf, topology=dataclasses.replace(topology, nodes=nodes), partitions=parts
    )
    before = managed_snapshot(conf_dir)
    with pytest.raises(SlurmInputError, match="gpu99 unknown to slurmctld"):
        apply(render(broken), conf_dir)
    assert managed_snapshot(conf_dir) == before
    assert live_partitions()["train"] == {f"gpu0{i}" for i in range(1, 7)}


def test_reconfigure_failure_rolled_back(conf_dir: Path, applied: Path, two_leaf: ClusterSpec) -> None:
    before = managed_snapshot(conf_dir)

    def corrupt(folder: Path) -> None:  # what a renderer bug would write: slurm.conf's parser rejects it
        with open(folder / PARTITIONS, "ab") as handle:
            handle.write(b"PartitionName=evil Nodes=gpu01 NoSuchKey=1\n")

    started = time.monotonic()
    with pytest.raises(SlurmApplyError, match="rolled back") as failure:
        apply(render(_with_policy(two_leaf, 0, queue="srtf")), conf_dir, after_write=corrupt)
    assert "scontrol exited" in str(failure.value)
    assert time.monotonic() - started < 30
    assert managed_snapshot(conf_dir) == before  # byte-identical old files
    partitions = live_partitions()
    assert "evil" not in partitions and partitions["infer"] == {"gpu07", "gpu08"}
    out = CliRunner().invoke(cli, ["slurm", "apply", "--cluster", str(TWO_LEAF), "--dry-run"])
    assert out.exit_code == 0 and "0 file(s) would change" in out.output  # two-leaf is what is live


def test_cli_apply_error_is_one_line(tmp_path: Path, conf_dir: Path, applied: Path) -> None:
    text = TWO_LEAF.read_text().replace("gpu[05-08]", "gpu[95-98]").replace("gpu[01-06]", "gpu[01-04]")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("gpu[07-08]", "gpu[95-96]"))
    before = managed_snapshot(conf_dir)
    out = CliRunner().invoke(cli, ["slurm", "apply", "--cluster", str(bad), "--conf-dir", str(conf_dir)])
    assert out.exit_code == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: ") and "gpu[95-96]" in out.stderr
    assert managed_snapshot(conf_dir) == before


def test_cli_apply_rollback_exit_2(monkeypatch: pytest.MonkeyPatch, conf_dir: Path, applied: Path) -> None:
    def corrupt(folder: Path) -> None:
        with open(folder / PARTITIONS, "ab") as handle:
            handle.write(b"PartitionName=evil Nodes=gpu01 NoSuchKey=1\n")

    monkeypatch.setattr("gputwin.adapters.slurm.apply_all.apply", functools.partial(apply, after_write=corrupt))
    before = managed_snapshot(conf_dir)
    out = CliRunner().invoke(cli, ["slurm", "apply", "--cluster", str(TWO_LEAF), "--conf-dir", str(conf_dir)])
    assert out.exit_code == 2, out.output
    assert out.stderr.count("\n") == 1 and "rolled back" in out.stderr
    assert managed_snapshot(conf_dir) == before


def _wait_running(cluster: Cluster, jobs: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = cluster.run("squeue", "-h", "-t", "R", "-j", ",".join(jobs), "-o", "%i").stdout.split()
        if len(running) == len(jobs):
            return
        time.sleep(0.3)
    raise AssertionError(f"jobs {jobs} not all running within {timeout:g} s")


def test_preemption_of_lower_tier_live(slurm_cluster: Cluster, conf_dir: Path, two_leaf: ClusterSpec) -> None:
    """train (srtf, tier 0) and infer (fifo, tier 1) share gpu[05-06]: infer jobs requeue train jobs."""
    shared = dataclasses.replace(two_leaf.partitions[1], nodes=("gpu05", "gpu06", "gpu07", "gpu08"))
    cluster = _with_policy(dataclasses.replace(two_leaf, partitions=(two_leaf.partitions[0], shared)), 0,
                           queue="srtf")  # fmt: skip
    apply(render(cluster), conf_dir)
    train = [
        slurm_cluster.submit("--comment=task:train", "--gres=gpu:8", command="sleep 60") for _ in range(6)
    ]
    infer: list[str] = []
    try:
        _wait_running(slurm_cluster, train, timeout=30)  # train holds gpu[01-06] before infer arrives
        infer += [
            slurm_cluster.submit("--comment=task:infer", "--gres=gpu:8", command="sleep 60") for _ in range(3)
        ]
        deadline = time.monotonic() + 40
        preempted: list[str] = []
        while time.monotonic() < deadline and not preempted:
            out = slurm_cluster.run(
                "sacct", "-n", "-P", "-X", "-D", "-j", ",".join(train), "-o", "JobID,State"
            )
            preempted = [line for line in out.stdout.split() if line.endswith("|PREEMPTED")]
            time.sleep(0.5)
        assert preempted, "no train job was preempted within 40 s"
        running = slurm_cluster.run(
            "squeue", "-h", "-t", "R", "-j", ",".join(infer), "-o", "%i"
        ).stdout.split()
        assert len(running) == 3
    finally:
        slurm_cluster.run("scancel", *train, *infer, check=False)

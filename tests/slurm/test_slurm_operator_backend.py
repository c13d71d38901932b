"""The operator's `slurm` backend on the real test cluster: a change of the cluster objects is
compiled and applied to slurmctld, and each used SchedulingPolicy's `status.lastDeploy` says how it
went (Succeeded, Failed with the old config untouched, RolledBack after a failing reconfigure);
the GPUPartition statuses and /metrics gauges show SLURM's own occupancy, stale while it cannot be read.

The Controller runs over the in-memory store (the same reconcilers the kopf operator runs over
the API server); SLURM is real. The module restores the managed files it changed at the end.
"""

from __future__ import annotations

import copy
import itertools
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from gputwin.adapters.slurm.apply import live_config, live_partitions
from gputwin.adapters.slurm.render import PARTITIONS
from gputwin.operator.config import ConfigError
from gputwin.operator.backends import Occupancy, PartitionCounts, ReportsOccupancy, SimBackend, occupancy_of
from gputwin.operator.controller import Controller
from gputwin.operator.metrics import METRICS
from gputwin.operator.service import build_backend, build_deployer
from gputwin.adapters.slurm.backend import JOBS_BLOCKER, RETRY_SECONDS, SlurmBackend, SlurmDeployer
from gputwin.operator.store import MemoryStore
from gputwin.operator.trace_files import TraceAccess
from slurm_testcluster import Cluster, managed_snapshot  # tests/slurm/ helpers

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = ROOT / "manifests" / "samples" / "two-leaf.yaml"
T0 = 1767225600.0
Obj = dict[str, Any]


def cluster_objects() -> list[Obj]:
    return [d for d in yaml.safe_load_all(TWO_LEAF.read_text()) if d]


def controller(
    store: MemoryStore, conf_dir: Path, backend: SlurmBackend | None = None, traces: Path | None = None,
    **deployer: Any,
) -> Controller:
    access = TraceAccess(traces.resolve()) if traces is not None else None  # where replay files may be
    return Controller(store, backend or SlurmBackend(), deployer=SlurmDeployer(conf_dir, **deployer),
                      traces=access)  # fmt: skip


def last_deploy(store: MemoryStore, policy: str) -> Obj:
    obj = store.get("SchedulingPolicy", None, policy)
    assert obj is not None
    return dict(obj["status"]["lastDeploy"])


def edited(store: MemoryStore, kind: str, name: str, path: tuple[str, ...], value: Any) -> None:
    obj = copy.deepcopy(store.get(kind, None, name))
    assert obj is not None
    node = obj
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    obj["metadata"]["generation"] = int(obj["metadata"].get("generation", 1)) + 1
    store.put(obj)


def test_operator_builds_the_slurm_backend() -> None:
    assert isinstance(build_backend("slurm"), SlurmBackend)
    assert isinstance(build_backend("slurm"), ReportsOccupancy)
    assert occupancy_of(build_backend("sim"), T0) is None  # sim keeps the scheduler's ledger
    assert isinstance(build_deployer("slurm"), SlurmDeployer)
    assert build_deployer("sim") is None


def test_deploys_on_start_and_on_every_change(conf_dir: Path) -> None:
    store = MemoryStore(cluster_objects())
    ctl = controller(store, conf_dir)
    ctl.reconcile(T0)
    for policy in ("fifo-consolidate", "sjf-topology"):
        deploy = last_deploy(store, policy)
        assert (deploy["backend"], deploy["result"]) == ("slurm", "Succeeded"), deploy
    assert live_partitions()["infer"] == {"gpu07", "gpu08"}
    assert live_config()["PreemptType"] == "preempt/none"

    edited(store, "SchedulingPolicy", "fifo-consolidate", ("spec", "queue", "policy"), "srtf")
    ctl.reconcile(T0 + 10)
    deploy = last_deploy(store, "fifo-consolidate")
    assert deploy["result"] == "Succeeded" and "changed" in deploy["message"], deploy
    assert live_config()["PreemptType"] == "preempt/partition_prio"  # preemptive queue -> SLURM preemption


def test_gpujobs_are_held_with_the_reason(conf_dir: Path) -> None:
    job = {"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": "j", "namespace": "default"},
           "spec": {"taskType": "infer", "gpus": 1, "durationSeconds": 5}}  # fmt: skip
    store = MemoryStore([*cluster_objects(), job])
    controller(store, conf_dir).reconcile(T0)
    obj = store.get("GPUJob", "default", "j")
    assert obj is not None and obj["status"]["phase"] == "Pending"
    cond = obj["status"]["conditions"][0]
    assert (cond["reason"], cond["message"]) == ("BackendRunsNoJobs", JOBS_BLOCKER)


def test_unknown_node_fails_before_writing(conf_dir: Path) -> None:
    store = MemoryStore(cluster_objects())
    ctl = controller(store, conf_dir)
    ctl.reconcile(T0)
    before = managed_snapshot(conf_dir)
    # Valid for the topology, unknown to slurmctld: on 22.05 a reconfigure would kill the controller.
    topology = copy.deepcopy(store.get("SwitchTopology", None, "two-leaf"))
    assert topology is not None
    text = yaml.safe_dump(topology).replace("gpu[05-08]", "gpu[05-08,95]")
    store.put(yaml.safe_load(text))
    ctl.reconcile(T0 + 10)
    deploy = last_deploy(store, "fifo-consolidate")
    assert deploy["result"] == "Failed" and "gpu95" in deploy["message"], deploy
    assert managed_snapshot(conf_dir) == before


def test_failing_reconfigure_rolls_back(conf_dir: Path) -> None:
    store = MemoryStore(cluster_objects())
    controller(store, conf_dir).reconcile(T0)
    before = managed_snapshot(conf_dir)

    def corrupt(folder: Path) -> None:  # what a renderer bug would write: slurm.conf's parser rejects it
        with open(folder / PARTITIONS, "ab") as handle:
            handle.write(b"PartitionName=evil Nodes=gpu01 NoSuchKey=1\n")

    ctl = controller(store, conf_dir, after_write=corrupt)
    edited(store, "SchedulingPolicy", "sjf-topology", ("spec", "queue", "policy"), "fifo")
    ctl.reconcile(T0 + 10)
    deploy = last_deploy(store, "sjf-topology")
    assert deploy["result"] == "RolledBack" and "rolled back" in deploy["message"], deploy
    assert managed_snapshot(conf_dir) == before
    assert "evil" not in live_partitions()


# --- TraceReplay promote: the winner goes live on SLURM, or is rolled back --------------------------


def trace_favouring_srtf(folder: Path) -> Path:
    """Two long jobs fill the 16 inference GPUs, ten short ones queue behind: preempting wins."""
    rows = ["job_id,user,vc,jobname,gpu_num,state,submit_time,duration"]
    rows += [f"{i},u,infer,long{i},8,COMPLETED,0,10000" for i in (1, 2)]
    rows += [f"{i},u,infer,short{i},1,COMPLETED,{i},10" for i in range(3, 13)]
    path = folder / "trace.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def promote_replay(trace: Path) -> Obj:
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "TraceReplay",
            "metadata": {"name": "what-if", "namespace": "default"},
            "spec": {"trace": {"file": str(trace), "format": "helios"}, "topology": "two-leaf",
                     "candidates": [{"queue": "srtf", "placement": "consolidate"}],
                     "objective": "avg_jct", "promote": True}}  # fmt: skip


@pytest.mark.parametrize("fails", [False, True], ids=["applied", "rolled-back"])
def test_promoted_winner_is_deployed_to_slurm(conf_dir: Path, tmp_path: Path, fails: bool) -> None:
    store = MemoryStore(cluster_objects())
    controller(store, conf_dir).reconcile(T0)  # the declared policies are live: no preemption
    assert live_config()["PreemptType"] == "preempt/none"
    before = managed_snapshot(conf_dir)

    def corrupt(folder: Path) -> None:
        with open(folder / PARTITIONS, "ab") as handle:
            handle.write(b"PartitionName=evil Nodes=gpu01 NoSuchKey=1\n")

    ctl = controller(store, conf_dir, traces=tmp_path, after_write=corrupt if fails else None)
    store.put(promote_replay(trace_favouring_srtf(tmp_path)))
    ctl.reconcile(T0 + 10)
    replay = store.get("TraceReplay", "default", "what-if")
    assert replay is not None and replay["status"]["promoted"] is True, replay.get("status")
    assert replay["status"]["winner"].startswith("srtf/")
    deploy = last_deploy(store, "fifo-consolidate")
    if fails:
        assert deploy["result"] == "RolledBack", deploy
        assert managed_snapshot(conf_dir) == before and live_config()["PreemptType"] == "preempt/none"
    else:
        assert deploy["result"] == "Succeeded", deploy
        assert live_config()["PreemptType"] == "preempt/partition_prio"


# --- history from sacct fills job_submit.lua's tables at every deployment ---------------------------


def test_history_window_fills_the_lua_tables(slurm_cluster: Cluster, conf_dir: Path) -> None:
    from gputwin.api.loader import load_cluster

    cluster = load_cluster(TWO_LEAF)
    deployer = build_deployer("slurm", {"GPUTWIN_SLURM_HISTORY": "now-1hours"})
    assert isinstance(deployer, SlurmDeployer) and deployer.tables is not None
    assert SlurmDeployer(conf_dir).deploy(cluster).result == "Succeeded"  # infer/train live, empty tables
    job = slurm_cluster.submit("--comment=task:infer", "--job-name=optrace", "--gres=gpu:1")
    slurm_cluster.wait_done([job], 1)
    slurm_cluster.wait_in_history(job, "optrace")  # the same sacct query the deployer makes
    deployed = SlurmDeployer(conf_dir, tables=deployer.tables).deploy(cluster)
    assert deployed.result == "Succeeded", deployed
    lua = (conf_dir / "job_submit.lua").read_text()
    assert '["optrace"]' in lua  # the finished job's runtime is now an estimate


def test_a_bad_history_window_fails_at_start_up() -> None:
    with pytest.raises(ConfigError, match="GPUTWIN_SLURM_HISTORY"):
        build_deployer("slurm", {"GPUTWIN_SLURM_HISTORY": "last tuesday; rm -rf /"})


# --- SLURM's occupancy in the GPUPartition statuses and the /metrics gauges --------------------------

COUNTS = ("nodes", "totalGPUs", "freeGPUs", "running", "queued")


def partition_status(store: MemoryStore, name: str) -> Obj:
    obj = store.get("GPUPartition", None, name)
    assert obj is not None
    return dict(obj["status"])


def counts(store: MemoryStore, name: str) -> tuple[int, ...]:
    status = partition_status(store, name)
    return tuple(int(status[key]) for key in COUNTS)


def ready(store: MemoryStore, name: str) -> Obj:
    return dict(next(c for c in partition_status(store, name)["conditions"] if c["type"] == "Ready"))


def poll_passes(ctl: Controller, store: MemoryStore, want: tuple[int, ...], timeout: float = 60,
                partition: str = "infer") -> None:  # fmt: skip
    """Reconcile, as the operator's periodic pass does (a fresh `now` each), until the partition's
    counts are `want`."""
    deadline = time.monotonic() + timeout
    for now in itertools.count(T0, 5.0):
        ctl.reconcile(now)
        if counts(store, partition) == want:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{partition}'s {COUNTS} never were {want}: {counts(store, partition)}")
        time.sleep(0.2)


def gauge(name: str, partition: str) -> float | None:
    return METRICS.registry.get_sample_value(name, {"partition": partition})


def test_partition_statuses_show_slurms_occupancy(slurm_cluster: Cluster, conf_dir: Path) -> None:
    store = MemoryStore(cluster_objects())
    ctl = controller(store, conf_dir)
    poll_passes(ctl, store, (2, 16, 16, 0, 0))  # deployed, idle
    # The cluster is shared with the other SLURM tests: let their short jobs end, so that what
    # train shows below can only be this test's jobs (one of theirs, still running, once failed it).
    poll_passes(ctl, store, (6, 48, 48, 0, 0), partition="train")
    assert ready(store, "infer")["reason"] == "Valid"
    running = slurm_cluster.submit("--comment=task:infer", "--gres=gpu:8", command="sleep 120")
    held = slurm_cluster.submit("--comment=task:infer", "--gres=gpu:8", "--hold", command="true")
    try:
        poll_passes(ctl, store, (2, 16, 8, 1, 1))
        assert gauge("gputwin_gpus_used", "infer") == 8 and gauge("gputwin_gpus_free", "infer") == 8
        assert gauge("gputwin_queue_length", "infer") == 1
        assert counts(store, "train") == (6, 48, 48, 0, 0)  # other nodes: the job is not theirs
        slurm_cluster.run("scancel", running, held)
        poll_passes(ctl, store, (2, 16, 16, 0, 0))
        assert gauge("gputwin_gpus_used", "infer") == 0 and gauge("gputwin_queue_length", "infer") == 0
    finally:
        slurm_cluster.run("scancel", running, held, check=False)


def test_a_failed_read_keeps_the_counts_and_says_they_are_stale(
    slurm_cluster: Cluster, conf_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore(cluster_objects())
    # A slurmctld that refuses connections: the live config with the controller on a closed port.
    dead = tmp_path / "slurm.conf"
    dead.write_text(re.sub(r"(?m)^SlurmctldPort=\d+", "SlurmctldPort=1", (conf_dir / "slurm.conf").read_text()))
    ctl = controller(store, conf_dir, SlurmBackend(timeout=3))
    ctl.reconcile(T0)
    assert counts(store, "infer") == (2, 16, 16, 0, 0) and ready(store, "infer")["reason"] == "Valid"

    monkeypatch.setenv("SLURM_CONF", str(dead))
    ctl.reconcile(T0 + 10)  # the pass does not fail
    cond = ready(store, "infer")
    assert (cond["status"], cond["reason"]) == ("True", "OccupancyStale"), cond
    assert "as of 2026-01-01T00:00:00Z" in cond["message"] and "sinfo" in cond["message"], cond
    assert counts(store, "infer") == (2, 16, 16, 0, 0)  # the last good read's

    monkeypatch.setenv("SLURM_CONF", str(conf_dir / "slurm.conf"))
    ctl.reconcile(T0 + 10 + RETRY_SECONDS / 2)  # too soon to try again: still stale
    assert ready(store, "infer")["reason"] == "OccupancyStale"
    ctl.reconcile(T0 + 10 + RETRY_SECONDS)
    assert ready(store, "infer")["reason"] == "Valid"


class MockOccupancyBackend(SimBackend):
    """The sim backend reporting a fixed occupancy: the cases a live slurmctld cannot be made to show."""

    def __init__(self, occupancy: Occupancy) -> None:
        super().__init__()
        self.fixed = occupancy

    def occupancy(self, now: float) -> Occupancy:
        return self.fixed


TRAIN_BUSY = {"train": PartitionCounts(nodes=6, total_gpus=48, free_gpus=40, queued=2, running=1)}


@pytest.mark.parametrize(
    ("occupancy", "infer_reason", "infer_counts", "message"),
    [
        (Occupancy(TRAIN_BUSY, T0), "NotInBackend", (2, 16, 16, 0, 0), "the backend has no partition 'infer'"),
        (Occupancy({}, None, "sinfo: no answer within 15 s"), "OccupancyStale", (2, 16, 16, 0, 0),
         "occupancy is stale (never read): sinfo: no answer within 15 s"),
    ],
    ids=["partition-not-in-slurm", "never-read"],
)  # fmt: skip
def test_mock_occupancy_reasons(
    occupancy: Occupancy, infer_reason: str, infer_counts: tuple[int, ...], message: str
) -> None:
    store = MemoryStore(cluster_objects())
    Controller(store, MockOccupancyBackend(occupancy)).reconcile(T0)
    cond = ready(store, "infer")
    assert (cond["status"], cond["reason"]) == ("True", infer_reason) and message in cond["message"], cond
    assert counts(store, "infer") == infer_counts  # the declared capacity, from the idle ledger
    if occupancy.partitions:
        assert counts(store, "train") == (6, 48, 40, 1, 2) and ready(store, "train")["reason"] == "Valid"

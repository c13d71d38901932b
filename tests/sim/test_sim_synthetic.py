"""The synthetic cluster and job generator (`gputwin.sim.synthetic`) and a smoke run of the benchmark."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.core.scheduler import Scheduler
from gputwin.core.topology import Topology
from gputwin.sim.synthetic import GPU_MIX, MAX_SECONDS, synthetic_cluster, synthetic_jobs

ROOT = Path(__file__).resolve().parents[2]
MIX1 = ROOT / "../shared/traces/philly_mix1"


@pytest.fixture(scope="module")
def big_cluster() -> ClusterSpec:
    return synthetic_cluster()


@pytest.fixture(scope="module")
def jobs_20k(big_cluster: ClusterSpec) -> list[JobSpec]:
    return synthetic_jobs(20_000, big_cluster, seed=3)


# --- the cluster ----------------------------------------------------------------------------------


def test_cluster_is_an_even_three_tier_tree(big_cluster: ClusterSpec) -> None:
    topo = Topology(big_cluster.topology)  # raises on anything that is not one tree
    assert topo.root == "core"
    assert len(big_cluster.topology.nodes) == 2000
    assert {n.gpus for n in big_cluster.topology.nodes} == {8}
    per_leaf = Counter(n.switch for n in big_cluster.topology.nodes)
    assert len(per_leaf) == 16 and set(per_leaf.values()) == {125}
    spines = Counter(s.parent for s in big_cluster.topology.switches if s.name.startswith("leaf"))
    assert spines == {"spine0": 8, "spine1": 8}
    # Leaves under different spines meet at the core: two tiers up.
    assert topo.span_of_leaves([0, 15]).tiers == 2
    assert topo.span_of_leaves([0, 7]).tiers == 1
    assert big_cluster.topology.overhead.per_tier == 0.1
    assert big_cluster.topology.overhead.cross_node == 0.05


def test_partitions_are_contiguous_leaf_groups(big_cluster: ClusterSpec) -> None:
    leaf_of = {n.name: n.switch for n in big_cluster.topology.nodes}
    assert [p.name for p in big_cluster.partitions] == ["p0", "p1", "p2", "p3"]
    seen: list[str] = []
    for i, part in enumerate(big_cluster.partitions):
        assert part.task_types == (f"type{i}",)
        assert (part.policy.queue, part.policy.placement) == ("qssf", "topology-aware")
        leaves = sorted({leaf_of[n] for n in part.nodes}, key=lambda s: int(s[4:]))
        assert leaves == [f"leaf{k}" for k in range(4 * i, 4 * i + 4)]
        seen += part.nodes
    assert sorted(seen) == sorted(leaf_of)  # every node in exactly one partition


def test_uneven_splits_stay_within_one() -> None:
    cluster = synthetic_cluster(nodes=10, leaves=3, spines=2, partitions=2)
    per_leaf = Counter(n.switch for n in cluster.topology.nodes)
    assert max(per_leaf.values()) - min(per_leaf.values()) <= 1
    Topology(cluster.topology)


@pytest.mark.parametrize("kwargs", [{"partitions": 17}, {"spines": 17}, {"nodes": 0}, {"leaves": 3000}])
def test_impossible_layouts_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        synthetic_cluster(**kwargs)


# --- the jobs -------------------------------------------------------------------------------------


def test_same_seed_same_jobs(big_cluster: ClusterSpec) -> None:
    assert synthetic_jobs(3000, big_cluster, seed=11) == synthetic_jobs(3000, big_cluster, seed=11)
    assert synthetic_jobs(3000, big_cluster, seed=11) != synthetic_jobs(3000, big_cluster, seed=12)


def test_size_mix_is_as_designed(jobs_20k: list[JobSpec]) -> None:
    counts = Counter(j.gpus for j in jobs_20k)
    assert set(counts) == {g for g, _ in GPU_MIX}
    for gpus, share in GPU_MIX:
        # 20k draws: the binomial standard deviation is <= 0.35 percentage points.
        assert counts[gpus] / len(jobs_20k) == pytest.approx(share, abs=0.015 if share > 0.05 else 0.006)
    assert counts[1] > counts[2] and counts[8] > counts[16] > counts[32] > counts[64]


def test_sorted_whole_second_arrivals_and_sequence(jobs_20k: list[JobSpec]) -> None:
    submits = [j.submit for j in jobs_20k]
    assert submits == sorted(submits) and submits[0] == 0.0
    assert all(s == int(s) for s in submits)
    assert [j.seq for j in jobs_20k] == list(range(len(jobs_20k)))
    assert len({j.job_id for j in jobs_20k}) == len(jobs_20k)


def test_durations_lognormal_whole_seconds(jobs_20k: list[JobSpec]) -> None:
    durations = [j.duration for j in jobs_20k]
    assert all(d == int(d) and 1 <= d <= MAX_SECONDS for d in durations)
    assert 300 <= statistics.median(durations) <= 1200  # median ~10 minutes
    assert statistics.mean(durations) > 2 * statistics.median(durations)  # a long right tail
    assert max(durations) > 86400


def test_offered_load_matches_the_target(big_cluster: ClusterSpec) -> None:
    jobs = synthetic_jobs(50_000, big_cluster, seed=5, load=0.6)
    capacity = sum(n.gpus for n in big_cluster.topology.nodes)
    work = math.fsum(j.gpus * j.duration for j in jobs)
    # n Poisson gaps average the target span; 50k of them land within a few percent of it.
    assert work / (capacity * jobs[-1].submit) == pytest.approx(0.6, rel=0.05)


def test_users_resubmit_named_jobs(jobs_20k: list[JobSpec]) -> None:
    users = {j.user for j in jobs_20k}
    assert users <= {f"u{i}" for i in range(200)} and len(users) > 150
    templates = Counter((j.user, j.name) for j in jobs_20k)
    assert len(templates) < 2500  # names repeat, so QSSF's history has something to learn
    assert templates.most_common(1)[0][1] > 100
    # One name's run times cluster: their spread is well below the whole trace's.
    (user, name), _ = templates.most_common(1)[0]
    own = [math.log(j.duration) for j in jobs_20k if (j.user, j.name) == (user, name)]
    assert statistics.stdev(own) < 0.7 * statistics.stdev(math.log(j.duration) for j in jobs_20k)


def test_every_job_routes_to_a_partition_that_can_hold_it(
    big_cluster: ClusterSpec, jobs_20k: list[JobSpec]
) -> None:
    scheduler = Scheduler(big_cluster)
    routed = Counter(scheduler.route(j) for j in jobs_20k)
    assert None not in routed and set(routed) == {"p0", "p1", "p2", "p3"}
    assert min(routed.values()) > 0.2 * len(jobs_20k)  # spread evenly (equal partitions)
    gpus = {p.name: scheduler.partitions[p.name].ledger.total_gpus for p in big_cluster.partitions}
    assert all(j.gpus <= gpus[scheduler.route(j) or ""] for j in jobs_20k)


def test_small_partitions_cap_job_sizes() -> None:
    cluster = synthetic_cluster(nodes=6, gpus_per_node=4, leaves=3, spines=1, partitions=3)  # 8 GPUs each
    jobs = synthetic_jobs(2000, cluster, seed=1)
    assert max(j.gpus for j in jobs) == 8
    assert {j.task_type for j in jobs} == {"type0", "type1", "type2"}


def test_no_jobs() -> None:
    assert synthetic_jobs(0, synthetic_cluster(nodes=4, leaves=2, spines=1, partitions=1)) == []


# --- the benchmark script -------------------------------------------------------------------------


def test_benchmark_smoke_run_prints_json_last() -> None:
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "simulate.py"),
        "--jobs",
        "2000",
        "--policies",
        "fifo",
        "--json",
    ]
    if not (MIX1 / "jobs.csv").is_file():
        command.append("--skip-mix1")
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"mix1", "synthetic_1m"} <= set(report)
    assert set(report["synthetic_1m"]) >= {"jobs", "wall_s", "peak_rss_mb"}
    assert report["synthetic_1m"]["jobs"] == 2000
    assert report["synthetic_1m"]["wall_s"] > 0 and report["synthetic_1m"]["peak_rss_mb"] > 0
    if "--skip-mix1" not in command:
        assert set(report["mix1"]) == {"fifo"} and report["mix1"]["fifo"] > 0


@pytest.mark.skipif(not (MIX1 / "jobs.csv").is_file(), reason="shared traces not found")
def test_benchmark_grid_times_the_36_candidate_compare(tmp_path: Path) -> None:
    # The first 400 jobs of mix1 on its cluster: the same 36-candidate grid, in seconds.
    lines = (MIX1 / "jobs.csv").read_text().splitlines(keepends=True)[:401]
    (tmp_path / "jobs.csv").write_text("".join(lines))
    (tmp_path / "cluster.csv").write_text((MIX1 / "cluster.csv").read_text())
    command = [sys.executable, str(ROOT / "benchmarks" / "simulate.py"), "--skip-synthetic", "--skip-mix1",
               "--grid", "--trace-dir", str(tmp_path), "--json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    grid = json.loads(done.stdout.strip().splitlines()[-1])["grid"]
    assert (grid["candidates"], grid["skipped"], grid["workers"], grid["plots"]) == (30, 6, 2, True)
    assert grid["wall_s"] > 0 and grid["cpu_s"] > 0 and grid["sim_s"] > 0
    assert "grid: gputwin compare, 30 candidates run (6 skipped)" in done.stderr

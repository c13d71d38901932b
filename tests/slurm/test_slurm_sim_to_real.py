"""benchmarks/sim_to_real.py: its statistics (pure) and a tiny run on the real test cluster.

The tiny run checks the report's shape and that every figure is a finite number; the fidelity
targets themselves are the full benchmark's business (timing assertions do not belong in tests).
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from cluster_builders import build_cluster  # tests/cluster_builders.py
from slurm_testcluster import Cluster  # tests/slurm/ helpers

ROOT = Path(__file__).resolve().parents[2]
BENCHMARK = ROOT / "benchmarks" / "sim_to_real.py"
FIELDS = {"policy", "jobs", "avg_jct_gap", "avg_queue_gap", "rank_correlation", "kendall_tau_b",
          "avg_jct_real_s", "avg_jct_sim_s", "avg_queue_real_s", "avg_queue_sim_s", "launch_overhead_s",
          "preemptions_real", "preemptions_sim", "unmatched", "avg_jct_gap_no_latency",
          "avg_jct_gap_room_latency_only", "start_after_end_jobs", "start_after_end_p50_s"}  # fmt: skip


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(BENCHMARK.parent))  # it imports slurm_live as a sibling, as when run as a script
    try:
        spec = importlib.util.spec_from_file_location("sim_to_real", BENCHMARK)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up while being built
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARK.parent))
    return module


@pytest.mark.parametrize(
    ("x", "y", "rho", "tau"),
    [
        ([1, 2, 3, 4], [10, 20, 30, 40], 1.0, 1.0),
        ([1, 2, 3, 4], [40, 30, 20, 10], -1.0, -1.0),
        ([1, 2, 3, 4, 5], [2, 1, 4, 3, 5], 0.8, 0.6),
        # whole-second ties on the real side: tie-corrected rho = 0.9487, tau-b = 0.9129
        ([0, 0, 1, 2], [0.2, 0.1, 1.5, 2.5], 0.9487, 0.9129),
    ],
)
def test_rank_statistics(bench: ModuleType, x: list[float], y: list[float], rho: float, tau: float) -> None:
    assert bench.spearman(x, y) == pytest.approx(rho, abs=1e-4)
    assert bench.kendall_tau_b(x, y) == pytest.approx(tau, abs=1e-4)


def test_trace_is_seeded_and_mixed(bench: ModuleType) -> None:
    trace = bench.make_trace(100, 7, 60.0)
    assert trace == bench.make_trace(100, 7, 60.0) and trace != bench.make_trace(100, 8, 60.0)
    assert {job.gpus for job in trace} == {1, 2, 4, 8}
    assert all(3 <= job.seconds <= 20 and 0 <= job.arrival <= 60 for job in trace)
    assert [job.arrival for job in trace] == sorted(job.arrival for job in trace)


def test_the_start_latency_moves_every_start_of_a_chain(bench: ModuleType) -> None:
    # One 8-GPU node; three 8-GPU jobs of 10 s submitted together run one after another: with a
    # latency L each holds its GPUs L before its run, so the k-th starts k*L + (k-1)*10 after submit.
    cluster = build_cluster({"l0": [8]})
    ids = {f"j{i}": bench.TraceJob(i, 0.0, 8, 10) for i in range(3)}
    submitted = dict.fromkeys(ids, 100.0)
    plain, _ = bench.replay(cluster, ids, submitted, 0.0)
    late, _ = bench.replay(cluster, ids, submitted, 0.0, 0.5)
    assert [(plain[j].start, plain[j].end) for j in ids] == [(0.0, 10.0), (10.0, 20.0), (20.0, 30.0)]
    assert [(late[j].start, late[j].end) for j in ids] == [(0.5, 10.5), (11.0, 21.0), (21.5, 31.5)]


def test_the_submission_latency_delays_the_queue_not_the_submit(bench: ModuleType) -> None:
    # The same chain with jobs reaching the queue 0.3 s after their submit: the first starts 0.3 s
    # later, the others wait for room anyway; JCT still counts from the submit.
    cluster = build_cluster({"l0": [8]})
    ids = {f"j{i}": bench.TraceJob(i, 0.0, 8, 10) for i in range(3)}
    late, _ = bench.replay(cluster, ids, dict.fromkeys(ids, 100.0), 0.0, 0.0, 0.3)
    assert [late[j].submit for j in ids] == [0.0, 0.0, 0.0]
    times = [t for j in ids for t in (late[j].start, late[j].end)]
    assert times == pytest.approx([0.3, 10.3, 10.3, 20.3, 20.3, 30.3])


def test_start_after_end_counts_only_jobs_that_waited(bench: ModuleType) -> None:
    timing = bench.Timing
    runs = {"a": timing(0.0, 0.1, 5.0), "b": timing(1.0, 5.02, 9.0),  # b waited for a: 0.02 s
            "c": timing(2.0, 9.8, 12.0), "d": timing(10.0, 10.3, 11.0)}  # c waited 0.8 s; d did not wait
    stats = bench.start_after_end(runs)
    assert stats["start_after_end_jobs"] == 2 and stats["start_after_end_over_0_1_s"] == 1
    assert stats["start_after_end_p50_s"] == pytest.approx(0.41)
    assert stats["start_after_end_p90_s"] == pytest.approx(0.8)
    assert bench.start_after_end({"a": timing(0.0, 0.1, 5.0)})["start_after_end_p50_s"] is None


def test_tiny_run_on_the_live_cluster(slurm_cluster: Cluster) -> None:
    conf_dir = Path(slurm_cluster.env["SLURM_CONF"]).parent
    before = _files(conf_dir)
    command = [sys.executable, str(BENCHMARK), "--state", str(slurm_cluster.state), "--jobs", "10",
               "--span", "8", "--policies", "fifo,srtf", "--json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert [r["policy"] for r in report["results"]] == ["fifo", "srtf"]
    for result in report["results"]:
        assert FIELDS <= set(result)
        assert result["jobs"] == 10 and result["unmatched"] == 0
        assert result["time_source"] in ("slurmctld.log (ms)", "sacct (whole seconds)")
        numbers = [v for k, v in result.items() if k not in ("policy", "time_source") and v is not None]
        assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in numbers), result
        assert -1.0 <= result["rank_correlation"] <= 1.0
    assert "spearman" in done.stderr  # the table goes to stderr with --json
    assert math.isfinite(report["startup_cost_s"]) and report["startup_cost_s"] >= 0
    # The cluster's own files are back (the managed ones rewritten byte for byte).
    after = _files(conf_dir)
    assert {name: after.get(name) for name in before} == before


def _files(folder: Path) -> dict[str, bytes]:
    """The folder's files but apply's backups (which hold whatever was live before each apply)."""
    return {
        p.name: p.read_bytes()
        for p in folder.iterdir()
        if p.is_file() and not p.name.endswith(".gputwin-backup")
    }

"""The slurm sweep executor on the real test cluster: one job array, results equal to local ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from gputwin.adapters.slurm import SlurmInputError
from gputwin.adapters.sweeps import SweepError, read_plan, run_sweep, write_plan
from gputwin.adapters.sweeps.local import LocalExecutor
from gputwin.adapters.slurm.sweeps import SlurmExecutor
from slurm_testcluster import Cluster  # tests/slurm/ helpers

from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.main import cli
from gputwin.core.model import Candidate

CANDIDATES = (Candidate("fifo", "consolidate"), Candidate("sjf", "topology-aware"), Candidate("srtf", "first-fit"))


def sweep(folder: Path) -> Path:
    write_plan(folder, demo_trace_path(), "helios", demo_cluster_path(), candidates=CANDIDATES)
    return folder


def test_array_results_equal_local_ones(slurm_cluster: Cluster, tmp_path: Path) -> None:
    done: list[int] = []
    on_slurm = run_sweep(sweep(tmp_path / "slurm"), SlurmExecutor(parallel=2, timeout=300), done.append)
    here = run_sweep(sweep(tmp_path / "local"), LocalExecutor(1))
    assert sorted(done) == [0, 1, 2]
    for a, b in zip(on_slurm, here):
        assert (a.candidate, a.summary.avg_jct, a.jcts) == (b.candidate, b.summary.avg_jct, b.jcts)
    logs = sorted(p.name for p in (tmp_path / "slurm" / "logs").iterdir())
    assert logs == ["0.out", "1.out", "2.out"]  # one task per candidate, each with its own log


def test_failed_tasks_are_named(slurm_cluster: Cluster, tmp_path: Path) -> None:
    folder = sweep(tmp_path / "s")
    (folder / "inputs" / "trace" / demo_trace_path().name).write_text("not,a,trace\n")  # every task fails
    with pytest.raises(SweepError, match=r"3 task\(s\) left no result \(0, 1, 2\)"):
        run_sweep(folder, SlurmExecutor(timeout=300))
    assert "error" in (folder / "logs" / "0.out").read_text().lower()
    assert len(read_plan(folder).candidates) == 3


def test_compare_with_the_slurm_executor(slurm_cluster: Cluster, tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["compare", "--trace", str(demo_trace_path()), "--cluster", str(demo_cluster_path()),
                                   "--policies", "fifo,sjf", "--placements", "consolidate", "--executor", "slurm",
                                   "--out", str(tmp_path), "--no-plots", "--json"])  # fmt: skip
    assert out.exit_code == 0, out.stderr
    assert '"executor": "slurm"' in out.stdout


def test_hostile_partition_refused_before_sbatch() -> None:
    with pytest.raises(SlurmInputError, match="partition"):
        SlurmExecutor(partition="batch;rm -rf /")

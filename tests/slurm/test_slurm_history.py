"""History read from the live test cluster, by every transport (`sacct -P`, `sacct --json`, slurmrestd).

One module fixture submits a handful of short GPU jobs (plain, array, 2-node with a job step, one
that fails), polls sacct until all have ended, and every test reads that window. Tests look only
at the jobs they submitted, so a shared cluster (GPUTWIN_SLURM_STATE) with other history works too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from gputwin.adapters.slurm import NAME_BAR, sacct_history, write_history
from gputwin.adapters.traces import read_trace
from slurm_testcluster import Cluster, skip_or_fail  # tests/slurm/ helpers

from gputwin.cli.main import cli
from gputwin.core.model import JobSpec

TRANSPORTS = ("cli", "json", "rest")


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest, slurm_cluster: Cluster) -> str:
    """Each transport; slurmrestd only runs where its package is installed (install.sh installs it)."""
    if request.param == "rest" and "GPUTWIN_SLURMRESTD" not in slurm_cluster.env:
        skip_or_fail("slurmrestd is not running on this cluster (Debian package slurmrestd not installed)")
    return str(request.param)


@dataclass(frozen=True)
class Submitted:
    start: datetime
    plain: str  # batch, gpu:2
    debug: str  # debug, gpu:4
    array: str  # batch, 3 tasks x gpu:1
    wide: str  # debug, 2 nodes x gpu:8, with an srun step
    failing: str  # batch, gpu:1, exits 3
    piped: str  # batch, gpu:1, named `a|b` (sacct -P does not escape the bar)

    def ours(self) -> set[str]:
        singles = {self.plain, self.debug, self.wide, self.failing, self.piped}
        return singles | {f"{self.array}_{i}" for i in (1, 2, 3)}


@pytest.fixture(scope="module")
def jobs(slurm_cluster: Cluster) -> Iterator[Submitted]:
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
    submitted = Submitted(
        start=start,
        plain=slurm_cluster.submit("--partition=batch", "--gres=gpu:2", "--job-name=plain"),
        debug=slurm_cluster.submit("--partition=debug", "--gres=gpu:4", "--job-name=dbg"),
        array=slurm_cluster.submit("--partition=batch", "--gres=gpu:1", "--array=1-3", "--job-name=arr"),
        wide=slurm_cluster.submit("--partition=debug", "--gres=gpu:8", "--nodes=2", "--job-name=wide",
                                  command="srun --nodes=2 true; sleep 1"),
        failing=slurm_cluster.submit("--partition=batch", "--gres=gpu:1", "--job-name=bad", command="exit 3"),
        piped=slurm_cluster.submit("--partition=batch", "--gres=gpu:1", "--job-name=a|b"),
    )  # fmt: skip
    ids = [
        submitted.plain,
        submitted.debug,
        submitted.array,
        submitted.wide,
        submitted.failing,
        submitted.piped,
    ]
    states = slurm_cluster.wait_done(ids, expected_records=len(submitted.ours()))
    assert states[submitted.failing] == "FAILED", states
    yield submitted


def _by_id(result_jobs: tuple[JobSpec, ...], wanted: set[str]) -> dict[str, JobSpec]:
    return {job.job_id: job for job in result_jobs if job.job_id in wanted}


def test_history_has_each_job_with_gpus_partition_and_nodes(jobs: Submitted, transport: str) -> None:
    result = sacct_history(jobs.start, "now", transport=transport)
    got = _by_id(result.jobs, jobs.ours())
    assert set(got) == jobs.ours()
    expect = {jobs.plain: (2, "batch", 1), jobs.debug: (4, "debug", 1), jobs.wide: (16, "debug", 2),
              jobs.failing: (1, "batch", 1), jobs.piped: (1, "batch", 1)}  # fmt: skip
    expect |= {f"{jobs.array}_{i}": (1, "batch", 1) for i in (1, 2, 3)}
    assert {job_id: (j.gpus, j.task_type, j.num_nodes) for job_id, j in got.items()} == expect
    assert got[jobs.failing].state == "FAILED"
    assert got[jobs.plain].state == "COMPLETED"
    assert got[jobs.plain].name == "plain"
    assert got[jobs.piped].name == ("a|b" if transport in ("json", "rest") else f"a{NAME_BAR}b")
    assert all(j.duration >= 0 and j.submit >= 0 for j in got.values())


def test_steps_are_folded_into_their_jobs(jobs: Submitted, transport: str) -> None:
    result = sacct_history(jobs.start, "now", transport=transport)
    assert not any("." in job.job_id for job in result.jobs)
    if transport == "cli":
        # Without -X every job prints its batch step, and `wide` its srun step too.
        assert result.skipped.get("job steps", 0) >= len(jobs.ours()) + 1


def test_partition_filter(jobs: Submitted, transport: str) -> None:
    result = sacct_history(jobs.start, "now", partitions=["debug"], transport=transport)
    assert {job.task_type for job in result.jobs} == {"debug"}
    assert set(_by_id(result.jobs, jobs.ours())) == {jobs.debug, jobs.wide}


def test_state_filter(jobs: Submitted, transport: str) -> None:
    now = datetime.now(UTC)  # --state needs an end time; both bounds are datetimes here
    failed = sacct_history(jobs.start, now, states=["failed"], transport=transport)
    assert set(_by_id(failed.jobs, jobs.ours())) == {jobs.failing}
    done = sacct_history(jobs.start, now, states=["CD", "F"], transport=transport)
    assert set(_by_id(done.jobs, jobs.ours())) == jobs.ours()


def test_transports_agree(jobs: Submitted, transport: str) -> None:
    by_cli = _by_id(sacct_history(jobs.start, "now").jobs, jobs.ours())
    by_other = _by_id(sacct_history(jobs.start, "now", transport=transport).jobs, jobs.ours())
    assert {k: _fields(v) for k, v in by_cli.items()} == {k: _fields(v) for k, v in by_other.items()}


def _fields(job: JobSpec) -> tuple[object, ...]:
    name = job.name.replace("|", NAME_BAR)  # what the -P transport makes of a `|` in a name
    return (job.gpus, job.task_type, job.num_nodes, job.state, job.user, name, job.duration)


def test_empty_window_is_no_jobs(slurm_cluster: Cluster, transport: str) -> None:
    result = sacct_history("2001-01-01", "2001-01-02", transport=transport)
    assert result.jobs == () and result.skipped == {}


def test_history_written_as_a_trace_file_reads_back(jobs: Submitted, tmp_path: Path) -> None:
    result = sacct_history(jobs.start, "now", partitions=["batch", "debug"])
    out = tmp_path / "history.csv"
    write_history(result, out)
    back = read_trace(out, "auto")
    assert back.format == "helios"
    assert [(j.job_id, j.gpus, j.task_type) for j in back.jobs] == [
        (j.job_id, j.gpus, j.task_type) for j in result.jobs
    ]


def test_cli_history_writes_a_trace_and_prints_a_summary(jobs: Submitted, tmp_path: Path) -> None:
    out = tmp_path / "h.csv"
    args = ["slurm", "history", "--start", jobs.start.strftime("%Y-%m-%dT%H:%M:%S"), "--partition", "debug",
            "--json-transport", "--out", str(out)]  # fmt: skip
    run = CliRunner().invoke(cli, args)
    assert run.exit_code == 0, run.output
    summary = json.loads(run.output)
    assert summary["transport"] == "json" and summary["format"] == "sacct-json"
    assert {jobs.debug, jobs.wide} <= {j.job_id for j in read_trace(out, "helios").jobs}


def test_cli_reports_sacct_failure_in_one_line(slurm_cluster: Cluster) -> None:
    # A start after the end: sacct itself refuses (exit 1); the CLI says so in one line.
    run = CliRunner().invoke(cli, ["slurm", "history", "--start", "2020-01-02", "--end", "2020-01-01"])
    assert run.exit_code == 2
    lines = [line for line in run.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: sacct exited with status 1"), run.output
    assert "Traceback" not in run.output


def test_cli_rest_transport(jobs: Submitted, slurm_cluster: Cluster) -> None:
    if "GPUTWIN_SLURMRESTD" not in slurm_cluster.env:
        skip_or_fail("slurmrestd is not running on this cluster (Debian package slurmrestd not installed)")
    args = ["slurm", "history", "--start", jobs.start.strftime("%Y-%m-%dT%H:%M:%S"), "--rest-transport"]
    run = CliRunner().invoke(cli, args)
    assert run.exit_code == 0, run.output
    summary = json.loads(run.output)
    assert summary["transport"] == "rest" and summary["format"] == "sacct-json" and summary["jobs"] >= 8

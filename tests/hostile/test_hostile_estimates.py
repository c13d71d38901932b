"""Hostile estimates files through `gputwin simulate --estimates`: each is a one-line error naming its field.

Same contract as the hostile traces (test_hostile_traces.py): exit status 2, exactly one stderr line
`error: FILE[:LINE]: FIELD: reason`, no traceback, within the refusal budget; the inputs that would
block or exhaust memory without their bound run in a subprocess with a timeout and a memory cap.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from budget import REFUSAL_CPU_SECONDS
from test_hostile_traces import BIG, assert_one_line_error, invoke, run_cli

from gputwin.adapters.traces import estimates as estimates_module

TRACE = "job_id,user,vc,jobname,gpu_num,submit_time,duration\n1,u,a,j1,1,0,10\n2,u,a,j2,2,0,10\n"
CLUSTER = "vc,num_nodes\na,1\n"
HEADER = "jobname,priority\n"
GOOD = HEADER + "j1,5\nj2,6\n"

# (content, FIELD the error must name, LINE it must give or None)
CASES = [
    pytest.param(HEADER + f"j1,{BIG}\nj2,6\n", "priority", 2, id="5000-digit-priority"),
    pytest.param(HEADER + "j1,1e999\nj2,6\n", "priority", 2, id="infinite-priority"),
    pytest.param(HEADER + "j1,-1e300\nj2,6\n", "priority", 2, id="huge-negative-priority"),
    pytest.param(HEADER + "j1,0x10\nj2,6\n", "priority", 2, id="hex-priority"),
    pytest.param(HEADER + "j\0,5\nj2,6\n", "jobname", 2, id="nul-in-jobname"),
    pytest.param("jobname,prio\0rity\nj1,5\n", "column 2", 1, id="nul-in-header"),
    pytest.param(HEADER + "j1,5\nj2,6\nj1,7\n", "jobname", 4, id="duplicate-jobname"),
    pytest.param(HEADER + "j1,5\n", "jobname", None, id="a-trace-job-without-a-row"),
    pytest.param("jobname,estimate\nj1,5\nj2,6\n", "priority", 1, id="no-priority-column"),
    pytest.param("jobname,jobname,priority\nj1,j1,5\n", "jobname", 1, id="duplicate-column"),
    pytest.param(HEADER + 'j1,"5\nj2,6\n', "row", 3, id="unclosed-quote"),
    pytest.param(HEADER + "j1," + "6" * (2 << 20) + "\n", "line", 2, id="2MiB-line"),
    pytest.param(HEADER + "j1," + "6" * 200_000 + "\n", "row", 2, id="field-over-csv-limit"),
    pytest.param("", "file", None, id="empty"),
]  # fmt: skip


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    trace, cluster = tmp_path / "jobs.csv", tmp_path / "cluster.csv"
    trace.write_text(TRACE)
    cluster.write_text(CLUSTER)
    return trace, cluster


def simulate(inputs: tuple[Path, Path], estimates: str, run=invoke) -> tuple:
    trace, cluster = inputs
    return run("--trace", str(trace), "--cluster", str(cluster), "--policy", "qssf", "--placement", "consolidate",
               "--compat", "helios", "--estimates", estimates)  # fmt: skip


@pytest.mark.parametrize(("content", "field", "line"), CASES)
def test_hostile_estimates_are_one_line_error_naming_the_field(tmp_path, inputs, content, field, line) -> None:
    path = tmp_path / "estimates.csv"
    path.write_text(content, encoding="utf-8")
    status, stderr, seconds = simulate(inputs, str(path))
    assert_one_line_error(status, stderr, str(path) if line is None else f"{path}:{line}", field)
    assert len(stderr) < 1000
    assert seconds < REFUSAL_CPU_SECONDS


def test_the_good_file_runs(tmp_path, inputs) -> None:
    path = tmp_path / "estimates.csv"
    path.write_text(GOOD)
    status, stderr, _ = simulate(inputs, str(path))
    assert status == 0, stderr


def test_more_rows_than_the_bound_are_refused_at_the_first_one_over(tmp_path, inputs, monkeypatch) -> None:
    monkeypatch.setattr(estimates_module, "MAX_ESTIMATES", 2)
    path = tmp_path / "estimates.csv"
    path.write_text(GOOD + "j3,7\n")
    status, stderr, _ = simulate(inputs, str(path))
    assert_one_line_error(status, stderr, f"{path}:4", "row")
    assert "more than 2 estimates" in stderr


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_an_estimates_path_that_is_no_file_is_refused(tmp_path, inputs, kind) -> None:
    path = tmp_path / "e"
    if kind == "directory":
        path.mkdir()
    status, stderr, _ = simulate(inputs, str(path))
    assert_one_line_error(status, stderr, str(path), "file")


def test_a_fifo_is_refused_without_blocking(tmp_path, inputs) -> None:
    fifo = tmp_path / "estimates.fifo"
    os.mkfifo(fifo)  # no writer ever opens it
    status, stderr = simulate(inputs, str(fifo), run_cli)
    assert_one_line_error(status, stderr, str(fifo), "file")


def test_dev_zero_is_refused_in_bounded_memory(inputs) -> None:
    status, stderr = simulate(inputs, "/dev/zero", run_cli)
    assert_one_line_error(status, stderr, "/dev/zero", "file")


def test_one_endless_line_is_refused_in_bounded_memory(tmp_path, inputs) -> None:
    path = tmp_path / "endless.csv"
    with path.open("wb") as out:  # 3 GiB, sparse, no newline: more than the process may map
        out.truncate(3 << 30)
        out.seek(0)
        out.write(b"jobname,")
    status, stderr = simulate(inputs, str(path), run_cli)
    assert status == 2 and len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr[:2000]
    assert stderr.startswith(f"error: {path}:1: "), stderr[:500]

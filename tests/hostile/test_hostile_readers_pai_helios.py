"""Hostile PAI 2020 tables, Helios raw logs and `trace convert` targets: each is one located error line.

The pattern of test_hostile_traces.py: every case is a file a user with bad intent or bad luck could
pass (oversized numbers, NULs, endless lines, a job table beside the task table that is a FIFO or
a device, an `--out` that is a device); each must end with exit status 2 and exactly one stderr line
`error: FILE[:LINE]: FIELD: reason`, no traceback, fast. The ones that would hang or exhaust memory
if a bound were missing run in a subprocess with a timeout and an address-space limit.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from budget import REFUSAL_CPU_SECONDS, timed  # tests/budget.py
from click.testing import CliRunner
from gputwin.adapters.traces import pai, read_trace

from gputwin.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = str(ROOT / "manifests" / "samples" / "two-leaf.yaml")
BIG = "9" * 5000
RAW = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
T = "2020-06-09 18:41:01"


def task(**changes: str) -> str:
    fields = {"job": "j1", "role": "worker", "inst": "1.0", "status": "Terminated", "start": "100.0",
              "end": "160.0", "cpu": "600.0", "mem": "29.3", "gpu": "100.0", "kind": "V100"} | changes  # fmt: skip
    return ",".join(fields.values()) + "\n"


def raw(**changes: str) -> str:
    fields = {"job_id": "1", "user": "u", "vc": "vc1", "gpu_num": "2", "cpu_num": "4", "node_num": "1",
              "state": "COMPLETED", "submit": T, "start": T, "end": "2020-06-09 18:42:01", "duration": "60",
              "queue": "0"} | changes  # fmt: skip
    return RAW + ",".join(fields.values()) + "\n"


# (file name, content, --format, FIELD the error must name, LINE it must give or None)
# fmt: off
CASES = [
    pytest.param("t_task_table.csv", task(gpu=BIG), "auto", "plan_gpu", 1, id="pai-5000-digit-gpu"),
    pytest.param("t_task_table.csv", task(gpu="1e308"), "pai", "plan_gpu", 1, id="pai-gpu-1e308"),
    pytest.param("t_task_table.csv", task(gpu="nan"), "pai", "plan_gpu", 1, id="pai-gpu-nan"),
    pytest.param("t_task_table.csv", task(gpu="inf"), "pai", "plan_gpu", 1, id="pai-gpu-inf"),
    pytest.param("t_task_table.csv", task(inst="1e9"), "pai", "inst_num", 1, id="pai-billion-instances"),
    pytest.param("t_task_table.csv", task(inst="99999.0", gpu="800.0"), "pai", "plan_gpu", 1, id="pai-gpus-over-cap"),
    pytest.param("t_task_table.csv", task(end="1e300"), "pai", "end_time", 1, id="pai-end-1e300"),
    pytest.param("t_task_table.csv", task(start="0.0", end="9999999999.0"), "pai", "end_time", 1, id="pai-300-year-run"),
    pytest.param("t_task_table.csv", task(job="j\0"), "pai", "job_name", 1, id="pai-nul-in-job-name"),
    pytest.param("t_task_table.csv", task() + "," * 9 + "\n", "pai", "job_name", 2, id="pai-row-of-commas"),
    pytest.param("t_task_table.csv", task(role="w" * (2 << 20)), "pai", "line", 1, id="pai-2MiB-line"),
    pytest.param("t_task_table.csv", "j,i,u,Terminated,1.0,2.0\n" + task(), "pai", "file", 1, id="pai-job-table-as-trace"),
    pytest.param("cluster_log.csv", raw(gpu_num=BIG), "auto", "gpu_num", 2, id="raw-5000-digit-gpus"),
    pytest.param("cluster_log.csv", raw(state="X" * 100_000), "auto", "state", 2, id="raw-100k-char-state"),
    pytest.param("cluster_log.csv", raw(state="COMP\0LETED"), "auto", "state", 2, id="raw-nul-in-state"),
    pytest.param("cluster_log.csv", raw(duration="1e13"), "helios-raw", "duration", 2, id="raw-duration-1e13"),
    pytest.param("cluster_log.csv", raw(duration="", start="1970-01-01 00:00:00", end="9999-12-31 23:59:59"),
                 "helios-raw", "end_time", 2, id="raw-8000-year-run"),
    pytest.param("cluster_log.csv", raw(submit="2020-02-30 00:00:00"), "helios-raw", "submit_time", 2, id="raw-feb-30"),
    pytest.param("cluster_log.csv", raw(node_num="200000"), "helios-raw", "node_num", 2, id="raw-200k-nodes"),
    pytest.param("cluster_log.csv", RAW.replace("state,", ""), "helios-raw", "state", 1, id="raw-no-state-column"),
]
# fmt: on


def simulate(*args: str) -> tuple[int, str, float]:
    result, seconds = timed(lambda: CliRunner().invoke(cli, ["simulate", *args]))
    return result.exit_code, result.stderr, seconds


def assert_one_line_error(status: int, stderr: str, where: str, field: str) -> None:
    assert status == 2, stderr
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr[:2000]
    assert lines[0].startswith(f"error: {where}: {field}: "), lines[0][:500]


@pytest.mark.parametrize(("name", "content", "fmt", "field", "line"), CASES)
def test_hostile_table_is_one_line_error_naming_the_field(tmp_path, name, content, fmt, field, line) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    status, stderr, seconds = simulate("--trace", str(path), "--format", fmt, "--cluster", TWO_LEAF)
    assert_one_line_error(status, stderr, str(path) if line is None else f"{path}:{line}", field)
    assert len(stderr) < 1000  # the reason says what was wrong; it does not echo the input
    assert seconds < REFUSAL_CPU_SECONDS


def test_a_bad_job_table_beside_names_the_job_table(tmp_path) -> None:
    (tmp_path / "t_job_table.csv").write_text(f"j1,i,u\0ser,Terminated,{BIG},1.0\n")
    tasks = tmp_path / "t_task_table.csv"
    tasks.write_text(task())
    status, stderr, _ = simulate("--trace", str(tasks), "--cluster", TWO_LEAF)
    assert_one_line_error(status, stderr, f"{tmp_path / 't_job_table.csv'}:1", "user")


def test_a_job_table_over_the_cap_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(pai, "MAX_JOBS", 3)
    (tmp_path / "t_job_table.csv").write_text("".join(f"j{k},i,u,Terminated,1.0,2.0\n" for k in range(10)))
    (tmp_path / "t_task_table.csv").write_text(task())
    with pytest.raises(pai.TraceError, match=r"t_job_table.csv:4: file: more than 3 jobs"):
        read_trace(tmp_path / "t_task_table.csv")


# --- cases that would hang or exhaust memory: a subprocess with a timeout and an address-space cap

MEMORY_CAP = 2 << 30


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "from gputwin.cli.main import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=30,
                          check=False, preexec_fn=_limit_memory)  # fmt: skip


@pytest.mark.parametrize("fmt", ["pai", "helios-raw"])
def test_a_fifo_or_dev_zero_is_refused_without_blocking(tmp_path, fmt) -> None:
    fifo = tmp_path / "t_task_table.csv"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        proc = run_cli("simulate", "--trace", path, "--format", fmt, "--cluster", TWO_LEAF)
        assert_one_line_error(proc.returncode, proc.stderr, path, "file")


def test_a_fifo_job_table_beside_is_not_opened(tmp_path) -> None:
    os.mkfifo(tmp_path / "t_job_table.csv")  # no writer: opening it for the join would block forever
    (tmp_path / "t_task_table.csv").write_text(task())
    proc = run_cli("simulate", "--trace", str(tmp_path / "t_task_table.csv"), "--cluster", TWO_LEAF, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["skipped"] == {}  # read alone: no join, so no "no job record" either


@pytest.mark.parametrize("fmt", ["pai", "helios-raw"])
def test_one_endless_line_is_refused_in_bounded_memory(tmp_path, fmt) -> None:
    path = tmp_path / "endless.csv"
    with path.open("wb") as out:  # 3 GiB, sparse: more than the process may map, no newline
        out.truncate(3 << 30)
        out.seek(0)
        out.write(b"job_name," if fmt == "pai" else b"job_id,")
    proc = run_cli("simulate", "--trace", str(path), "--format", fmt, "--cluster", TWO_LEAF)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr[:2000]
    assert proc.stderr.startswith(f"error: {path}:1: "), proc.stderr[:500]


# --- trace convert's --out -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("out", "reason"),
    [("/dev/null", "not a regular file (a device, FIFO or socket)"), (".", "not a regular file (a directory)"),
     ("missing/x.swf", "no such file or directory")],
    ids=["device", "directory", "no-folder"],
)  # fmt: skip
def test_convert_refuses_an_out_it_cannot_replace_safely(tmp_path, out, reason) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(raw())
    target = out if out.startswith("/") else str(tmp_path / out)
    result = CliRunner().invoke(cli, ["trace", "convert", "--trace", str(trace), "--to", "swf", "--out", target])
    assert (result.exit_code, result.stderr.strip()) == (2, f"error: {target}: --out: {reason}")
    assert Path("/dev/null").is_char_device()  # not renamed over, even as root

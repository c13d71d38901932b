"""Hostile traces and VC tables through `gputwin simulate`: every one is a one-line error naming its field.

Each case is a file a user with bad intent or bad luck could pass as `--trace` (or as a VC table
`--cluster`): oversized numbers, NULs, endless lines, deep JSON, huge hostlists, FIFOs, devices.
Each must end with exit status 2 and exactly one stderr line `error: FILE[:LINE]: FIELD: reason`,
no traceback, fast. Most run in-process (click's CliRunner); the ones that would hang or exhaust
memory if the bound were missing run in a subprocess with a timeout and an address-space limit.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from budget import REFUSAL_CPU_SECONDS, timed  # tests/budget.py
from click.testing import CliRunner
from gputwin.adapters.traces import TraceError, read_trace

from gputwin.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = str(ROOT / "manifests" / "samples" / "two-leaf.yaml")

HELIOS = "job_id,user,vc,gpu_num,submit_time,duration\n"
GOOD_HELIOS = HELIOS + "j1,alice,train,4,0,60\n"
ALIBABA = "name,num_gpu,gpu_milli,creation_time,scheduled_time,deletion_time\n"
SACCT = "JobID|User|Partition|State|Submit|Start|End|AllocTRES|NodeList\n"
T0 = "2026-01-01T00:00:00"
T1 = "2026-01-01T01:00:00"
SACCT_ROW = f"1|alice|train|COMPLETED|{T0}|{T0}|{T1}|cpu=1,gres/gpu=4,node=1|gpu01\n"
SACCT_ELAPSED = "JobID|Start|Elapsed|AllocTRES\n"
TEN_RANGES = ",".join(f"n{k}[00001-99999]" for k in range(10))
BIG = "9" * 5000


def sacct_row(**changes: str) -> str:
    """SACCT's header and one row with some columns replaced."""
    names = SACCT.strip().split("|")
    values = dict(zip(names, SACCT_ROW.strip().split("|"), strict=True)) | changes
    return SACCT + "|".join(values[n] for n in names) + "\n"


def sacct_json(job: str) -> str:
    return '{"jobs": [' + job + "]}"


JOB = (
    '{"job_id": 1, "user": "%s", "partition": "train", "time": {"submission": 1, "start": 2, "end": %s},'
    ' "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": %s}]}}'
)

# (file name, content, --format, FIELD the error must name, LINE it must give or None)
TRACE_CASES = [
    pytest.param("t.csv", HELIOS + f"j1,alice,train,{BIG},0,60\n", "auto", "gpu_num", 2, id="helios-5000-digit-gpus"),
    pytest.param("t.csv", HELIOS + f"j1,alice,train,4,0,{'1' * 400}\n", "auto", "duration", 2, id="helios-400-digit-duration"),
    pytest.param("t.csv", HELIOS + "j1,alice,train,4,0,1e10\n", "auto", "duration", 2, id="helios-duration-1e10"),
    pytest.param("t.csv", HELIOS + "j1,alice,train,4,0,10000000000000\n", "auto", "duration", 2, id="helios-duration-1e13"),
    pytest.param("t.csv", HELIOS + "j1,alice,train,4,1e300,60\n", "auto", "submit_time", 2, id="helios-submit-1e300"),
    pytest.param("t.csv", HELIOS + "j1,alice,train,4,1e999,60\n", "auto", "submit_time", 2, id="helios-submit-inf"),
    pytest.param("t.csv", HELIOS + "j1,alice,train,1000000,0,60\n", "auto", "gpu_num", 2, id="helios-million-gpus"),
    pytest.param("t.csv", HELIOS + "j1,al\0ice,train,4,0,60\n", "auto", "user", 2, id="helios-nul-in-user"),
    pytest.param("t.csv", HELIOS + "j\0,alice,train,4,0,60\n", "auto", "job_id", 2, id="helios-nul-in-job-id"),
    pytest.param("t.csv", "job_id,us\0er,vc,gpu_num,submit_time,duration\nj1,a,train,4,0,60\n", "helios", "column 2", 1, id="helios-nul-in-header"),
    pytest.param("t.csv", HELIOS.strip() + ",node_num\nj1,alice,train,4,0,60,200000\n", "auto", "node_num", 2, id="helios-200k-nodes"),
    pytest.param("t.csv", HELIOS + "j1,alice,train,4,0," + "6" * (2 << 20) + "\n", "helios", "line", 2, id="helios-2MiB-line"),
    # 262,144 lines of `","` (4 characters each, after `"` on line 2): a record of small quoted fields
    # reaches MAX_LINE_CHARS on line 262,146 though no line and no field is long.
    pytest.param("t.csv", HELIOS + '"\n",' * 300_000 + '"\n"\n', "helios", "line", 262_146, id="helios-record-over-many-lines"),
    pytest.param("t.csv", HELIOS + "j1,alice,train,4,0," + "6" * 200_000 + "\n", "helios", "row", 2, id="helios-field-over-csv-limit"),
    pytest.param("t.txt", sacct_row(AllocTRES=f"gres/gpu={BIG}"), "auto", "AllocTRES", 2, id="sacct-5000-digit-gpus"),
    pytest.param("t.txt", sacct_row(AllocTRES="gres/gpu:a=60000,gres/gpu:b=60000"), "auto", "AllocTRES", 2, id="sacct-typed-gpus-sum-too-large"),
    pytest.param("t.txt", sacct_row(End="9999-12-31T23:59:59"), "auto", "End", 2, id="sacct-8000-year-run"),
    pytest.param("t.txt", sacct_row(User="al\0ice"), "auto", "User", 2, id="sacct-nul-in-user"),
    pytest.param("t.txt", sacct_row(AllocTRES="cpu=1,gres/gpu=4", NodeList=TEN_RANGES), "auto", "NodeList", 2, id="sacct-ten-ranges-of-99999-nodes"),
    pytest.param("t.txt", sacct_row(AllocTRES="cpu=1,gres/gpu=4", NodeList="n[0-99999999999999999999999]"), "auto", "NodeList", 2, id="sacct-hostlist-of-huge-range"),
    pytest.param("t.txt", sacct_row(Start="2" * 400), "auto", "Start", 2, id="sacct-400-digit-start"),
    pytest.param("t.txt", SACCT_ELAPSED + f"1|{T0}|{'4' * 400}:00:00|gres/gpu=1\n", "auto", "Elapsed", 2, id="sacct-400-digit-elapsed"),
    pytest.param("t.txt", SACCT_ELAPSED + f"1|{T0}|4000-00:00:00|gres/gpu=1\n", "auto", "Elapsed", 2, id="sacct-elapsed-over-ten-years"),
    pytest.param("t.txt", SACCT + "1|" + "a" * (2 << 20) + "\n", "sacct", "line", 2, id="sacct-2MiB-line"),
    pytest.param("t.json", "[" * 100_000 + "]" * 100_000, "sacct-json", "json", None, id="json-100k-deep"),
    pytest.param("t.json", sacct_json(JOB % ("alice", BIG, 4)), "sacct-json", "json", None, id="json-5000-digit-int"),
    pytest.param("t.json", sacct_json(JOB % ("alice", "1" + "0" * 300, 4)), "sacct-json", "jobs[0].time.end", None, id="json-end-1e300"),
    pytest.param("t.json", sacct_json(JOB % ("alice", 400_000_000, 4)), "sacct-json", "jobs[0].time.end", None, id="json-run-over-ten-years"),
    pytest.param("t.json", sacct_json(JOB % ("al\\u0000ice", 3, 4)), "sacct-json", "jobs[0].user", None, id="json-nul-in-user"),
    pytest.param("t.json", sacct_json(JOB % ("alice", 3, 10**6)), "sacct-json", "jobs[0].tres.allocated[0].count", None, id="json-million-gpus"),
    pytest.param("t.json", sacct_json('[' * 500 + ']' * 500), "sacct-json", "jobs[0]", None, id="json-deep-job-not-printed"),
    pytest.param("t.csv", ALIBABA + f"p1,{BIG},1000,0,1,2\n", "auto", "num_gpu", 2, id="alibaba-5000-digit-gpus"),
    pytest.param("t.csv", ALIBABA + "p1,1,1000,0,1,1e300\n", "auto", "deletion_time", 2, id="alibaba-deletion-1e300"),
    pytest.param("t.csv", ALIBABA + "p1,1,1000,0,1,400000000\n", "auto", "deletion_time", 2, id="alibaba-run-over-ten-years"),
]  # fmt: skip


def invoke(*args: str) -> tuple[int, str, float]:
    """Exit code, stderr and the CPU seconds `simulate` took (tests/budget.py)."""
    result, seconds = timed(lambda: CliRunner().invoke(cli, ["simulate", *args]))
    return result.exit_code, result.stderr, seconds


def assert_one_line_error(status: int, stderr: str, where: str, field: str) -> None:
    assert status == 2, stderr
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr[:2000]
    assert lines[0].startswith(f"error: {where}: {field}: "), lines[0][:500]


@pytest.mark.parametrize(("name", "content", "fmt", "field", "line"), TRACE_CASES)
def test_hostile_trace_is_one_line_error_naming_the_field(tmp_path, name, content, fmt, field, line) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    status, stderr, seconds = invoke("--trace", str(path), "--format", fmt, "--cluster", TWO_LEAF)
    where = str(path) if line is None else f"{path}:{line}"
    assert_one_line_error(status, stderr, where, field)
    assert len(stderr) < 1000  # the reason says what was wrong; it does not echo the input
    assert seconds < REFUSAL_CPU_SECONDS


@pytest.mark.parametrize("fmt", ["auto", "helios"])
def test_a_trace_path_with_a_nul_is_a_trace_error(fmt) -> None:
    # argv cannot carry a NUL, but a TraceReplay's spec.trace.file can: read_trace must refuse it itself.
    with pytest.raises(TraceError) as caught:
        read_trace("jobs\0.csv", fmt)
    assert (caught.value.field, caught.value.reason) == ("file", "the path contains a NUL character")


VC_CASES = [
    pytest.param("vc,num_nodes\ntrain,1000000000\n", "num_nodes", 2, id="vc-billion-nodes"),
    pytest.param("vc,num_nodes\ntrain,60000\ninfer,60000\n", "num_nodes", 3, id="vc-nodes-over-table-cap"),
    pytest.param(f"vc,num_nodes\ntrain,{BIG}\n", "num_nodes", 2, id="vc-5000-digit-nodes"),
    pytest.param("vc,num_nodes\ntr\0ain,4\n", "vc", 2, id="vc-nul-in-name"),
    pytest.param("vc,num_nodes\ntrain," + "4" * (2 << 20) + "\n", "line", 2, id="vc-2MiB-line"),
]


@pytest.mark.parametrize(("content", "field", "line"), VC_CASES)
def test_hostile_vc_table_is_one_line_error_naming_the_field(tmp_path, content, field, line) -> None:
    table, trace = tmp_path / "cluster.csv", tmp_path / "jobs.csv"
    table.write_text(content, encoding="utf-8")
    trace.write_text(GOOD_HELIOS, encoding="utf-8")
    status, stderr, seconds = invoke("--trace", str(trace), "--cluster", str(table))
    assert_one_line_error(status, stderr, f"{table}:{line}", field)
    assert seconds < REFUSAL_CPU_SECONDS


def test_a_cluster_hostlist_of_ten_99999_node_ranges_is_refused_before_expanding(tmp_path) -> None:
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text(Path(TWO_LEAF).read_text().replace("nodes: gpu[01-04]", f"nodes: {TEN_RANGES}", 1))
    trace = tmp_path / "jobs.csv"
    trace.write_text(GOOD_HELIOS)
    status, stderr, seconds = invoke("--trace", str(trace), "--cluster", str(manifest))
    assert status == 2 and "Traceback" not in stderr
    assert "spec.nodeGroups: nodeGroups[0].nodes names more than 100,000 nodes" in stderr, stderr[:2000]
    assert seconds < REFUSAL_CPU_SECONDS


def test_a_topology_of_ten_node_groups_of_99999_nodes_is_refused_before_expanding(tmp_path) -> None:
    groups = "".join(
        f"    - switch: leaf0\n      nodes: n{k}[00001-99999]\n      gpusPerNode: 8\n" for k in range(10)
    )
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text(Path(TWO_LEAF).read_text().replace("  nodeGroups:\n", "  nodeGroups:\n" + groups, 1))
    trace = tmp_path / "jobs.csv"
    trace.write_text(GOOD_HELIOS)
    status, stderr, seconds = invoke("--trace", str(trace), "--cluster", str(manifest))
    assert_one_line_error(status, stderr, f"{manifest}:doc1", "spec.nodeGroups")
    assert "nodeGroups[0..1] name more than 100,000 nodes in all" in stderr
    assert seconds < REFUSAL_CPU_SECONDS


# --- cases that would hang or exhaust memory: a subprocess with a timeout and an address-space cap

MEMORY_CAP = 2 << 30  # bytes of address space: a good run of these inputs fits well inside


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_cli(*args: str) -> tuple[int, str]:
    code = "from gputwin.cli.main import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "simulate", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        preexec_fn=_limit_memory,
    )
    return proc.returncode, proc.stderr


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "trace.fifo"
    os.mkfifo(path)  # no writer ever opens it: reading it would block forever
    return path


def test_the_memory_cap_leaves_room_for_a_good_run(tmp_path) -> None:
    trace = tmp_path / "jobs.csv"
    trace.write_text(GOOD_HELIOS)
    status, stderr = run_cli("--trace", str(trace), "--cluster", TWO_LEAF)
    assert status == 0, stderr


@pytest.mark.parametrize("fmt", ["auto", "helios", "sacct", "sacct-json", "alibaba"])
def test_a_fifo_trace_is_refused_without_blocking(fifo, fmt) -> None:
    status, stderr = run_cli("--trace", str(fifo), "--format", fmt, "--cluster", TWO_LEAF)
    assert_one_line_error(status, stderr, str(fifo), "file")
    assert "not a regular file (a FIFO)" in stderr


@pytest.mark.parametrize("fmt", ["auto", "helios", "sacct", "sacct-json"])
def test_dev_zero_as_a_trace_is_refused_in_bounded_memory(fmt) -> None:
    status, stderr = run_cli("--trace", "/dev/zero", "--format", fmt, "--cluster", TWO_LEAF)
    assert_one_line_error(status, stderr, "/dev/zero", "file")


def test_a_fifo_vc_table_is_refused_without_blocking(fifo) -> None:
    # The CLI's loader refuses a non-file cluster path before reading it; the VC table reader
    # itself must not block either (other callers hand it paths), so it is called directly.
    code = (
        "import sys; from pathlib import Path; from gputwin.api.helios import load_vc_table\n"
        "try:\n    load_vc_table(Path(sys.argv[1]), gpus_per_node=8, nodes_per_switch=16)\n"
        "except ValueError as exc:\n    sys.exit(f'error: {exc}')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=30, check=False
    )
    assert_one_line_error(proc.returncode * 2, proc.stderr, str(fifo), "file")
    assert "not a regular file (a FIFO)" in proc.stderr


@pytest.mark.parametrize("fmt", ["helios", "sacct"])
def test_a_regular_file_of_one_endless_line_is_refused_in_bounded_memory(tmp_path, fmt) -> None:
    path = tmp_path / "endless.txt"
    with path.open("wb") as out:  # 3 GiB, sparse: more than the process may map, no newline
        out.truncate(3 << 30)
        out.seek(0)
        out.write(b"job_id," if fmt == "helios" else b"JobID|")
    status, stderr = run_cli("--trace", str(path), "--format", fmt, "--cluster", TWO_LEAF)
    assert status == 2, stderr
    assert "Traceback" not in stderr and len(stderr.splitlines()) == 1, stderr[:2000]
    assert stderr.startswith(f"error: {path}:1: "), stderr[:500]

"""The Alibaba PAI 2020 and Helios raw `cluster_log.csv` readers: mapping, skips, errors, sniffing, goldens.

Real excerpts (provenance in data/README.md): `pai-2020-readme_{task,job}_table.csv` (the example rows
alibaba/clusterdata's cluster-trace-gpu-v2020 README publishes) and `helios-venus-readme-example.csv`
(the three rows HeliosData's README publishes). Everything else here is hand-made and named so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from gputwin.adapters.traces import TraceError, read_trace, sniff_format
from gputwin.adapters.traces.pai import iter_tasks, job_table_path

from gputwin.api.loader import load_cluster
from gputwin.cli.main import cli
from gputwin.core.model import JobSpec
from gputwin.sim.run import Overrides, run

DATA = Path(__file__).parent / "data"
PAI = DATA / "pai-2020-readme_task_table.csv"
HELIOS_RAW = DATA / "helios-venus-readme-example.csv"
RAW_HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
T = "2020-06-09 18:41:01"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def brief(job: JobSpec) -> tuple[object, ...]:
    return (job.job_id, job.submit, job.duration, job.gpus, job.task_type, job.user, job.state)


def task(name: str = "j1", role: str = "worker", inst: str = "1.0", status: str = "Terminated",
         start: str = "100.0", end: str = "160.0", gpu: str = "100.0", kind: str = "V100") -> str:  # fmt: skip
    return f"{name},{role},{inst},{status},{start},{end},600.0,29.3,{gpu},{kind}\n"


# --- PAI 2020 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "expected", "notes"),
    [
        (task(), ("j1/worker", 100.0, 60.0, 1, "V100", "", "COMPLETED"), {}),
        # 2 instances of half a GPU each: each instance rounds up to one whole GPU.
        (task(inst="2.0", gpu="50.0", kind="T4"), ("j1/worker", 100.0, 60.0, 2, "T4", "", "COMPLETED"),
         {"fractional GPU rounded up": 1}),
        # 1 instance of a quarter GPU: a share of one GPU (250 milli: the test after this one).
        (task(gpu="25.0", kind="T4"), ("j1/worker", 100.0, 60.0, 1, "T4", "", "COMPLETED"),
         {"fractional GPU kept as a share": 1}),
        (task(gpu="800.0", status="Failed", kind=""), ("j1/worker", 100.0, 60.0, 8, "default", "", "FAILED"), {}),
        (task(gpu="", role="ps"), None, {"zero GPUs": 1}),
        (task(gpu="0.0"), None, {"zero GPUs": 1}),
        (task(inst="0.0"), None, {"zero instances": 1}),
        (task(start="", status="Waiting"), None, {"never started": 1}),
        (task(end="", status="Running"), None, {"still running": 1}),
    ],
    ids=["whole", "two-halves", "one-quarter-share", "eight-failed-no-type", "cpu-ps", "zero-gpu", "zero-inst", "waiting", "running"],
)  # fmt: skip
def test_pai_task_mapping(tmp_path: Path, row: str, expected: object, notes: dict[str, int]) -> None:
    kept = task(name="k", start="0.0", end="1.0")
    result = read_trace(write(tmp_path, "t_task_table.csv", kept + row), "pai")
    assert dict(result.skipped) == notes
    assert [brief(job) for job in result.jobs[1:]] == ([] if expected is None else [expected])


@pytest.mark.parametrize(("gpu", "milli"), [("25.0", 250), ("0.01", 1), ("99.99", 1000), ("100.0", 1000)],
                         ids=["quarter", "tiny-is-1-milli", "rounds-to-whole", "whole"])  # fmt: skip
def test_pai_one_instance_share_keeps_its_milli(tmp_path: Path, gpu: str, milli: int) -> None:
    result = read_trace(write(tmp_path, "t_task_table.csv", task(gpu=gpu)), "pai")
    assert [(job.gpus, job.gpu_milli) for job in result.jobs] == [(1, milli)]


def test_pai_job_table_beside_gives_user_and_submission(tmp_path: Path) -> None:
    jobs = "j1,inst1,alice,Terminated,40.0,170.0\n"
    write(tmp_path, "x_job_table.csv", jobs)
    tasks = write(tmp_path, "x_task_table.csv", task() + task(name="j2"))
    result = read_trace(tasks, "pai")
    # j1 was submitted at 40 and started at 100: the 60 s wait is kept; j2 has no job record.
    assert [brief(job) for job in result.jobs] == [
        ("j1/worker", 0.0, 60.0, 1, "V100", "alice", "COMPLETED"),
        ("j2/worker", 60.0, 60.0, 1, "V100", "", "COMPLETED"),
    ]
    assert result.skipped == {"no job record": 1}


def test_pai_with_published_header_and_job_table_name() -> None:
    assert job_table_path(Path("/d/pai_task_table.csv")) == Path("/d/pai_job_table.csv")
    assert job_table_path(Path("/d/tasks.csv")) is None


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        (task(inst="1.5"), 1, "inst_num"),
        (task(gpu="-50.0"), 1, "plan_gpu"),
        (task(gpu="9" * 50), 1, "plan_gpu"),
        (task(start="200.0", end="100.0"), 1, "end_time"),
        (task(start="x"), 1, "start_time"),
        (task(name=""), 1, "job_name"),
        (task(inst="200000.0", gpu="100.0"), 1, "inst_num"),
        (task(inst="90000.0", gpu="300.0"), 1, "plan_gpu"),
        (task() + "a,b,c\n", 2, "row"),
    ],
    ids=["half-instance", "negative-gpu", "huge-gpu", "end-before-start", "bad-start", "no-job-name",
         "too-many-instances", "too-many-gpus", "short-row"],
)  # fmt: skip
def test_pai_errors_are_located(tmp_path: Path, text: str, line: int, field: str) -> None:
    path = write(tmp_path, "t_task_table.csv", text)
    with pytest.raises(TraceError) as info:
        read_trace(path, "pai")
    assert str(info.value).startswith(f"{path}:{line}: {field}: ")
    assert read_trace(path, "pai", skip_invalid=True).skipped.get(f"invalid: {field}") == 1


def test_pai_job_table_errors_name_the_job_table(tmp_path: Path) -> None:
    jobs = write(tmp_path, "x_job_table.csv", "j1,i,alice,Terminated,soon,170.0\n")
    tasks = write(tmp_path, "x_task_table.csv", task())
    with pytest.raises(TraceError, match=f"^{jobs}:1: start_time: "):
        read_trace(tasks, "pai")
    assert read_trace(tasks, "pai", skip_invalid=True).skipped == {
        "invalid: job table start_time": 1,
        "no job record": 1,
    }


def test_pai_job_table_as_trace_is_refused_with_the_fix() -> None:
    with pytest.raises(TraceError, match="pass the pai_task_table.csv beside it"):
        read_trace(DATA / "pai-2020-readme_job_table.csv")


def test_pai_real_excerpt_golden() -> None:
    result = read_trace(PAI)
    assert (result.format, len(result.jobs), result.origin) == ("pai", 1, 1739162.0)
    # plan_gpu 50.0 of one instance is a share of 500 milli; the README's job row is another job than its task row.
    assert result.skipped == {"fractional GPU kept as a share": 1, "no job record": 1}
    assert result.jobs[0].gpu_milli == 500
    assert brief(result.jobs[0]) == ("4f057009a5d481acec67b088/tensorflow", 0.0, 38.0, 1, "MISC", "", "COMPLETED")


def test_pai_fraction_is_kept_in_the_task_rows() -> None:
    (row,) = iter_tasks(PAI)
    assert (row.plan_gpu, row.gpu_milli, row.inst_num, row.gpu_type) == (50.0, 500, 1, "MISC")


# --- Helios raw cluster_log.csv ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "expected"),
    [("COMPLETED", "COMPLETED"), ("CANCELLED", "CANCELLED"), ("FAILED", "FAILED"), ("TIMEOUT", "FAILED"),
     ("NODE_FAIL", "FAILED"), ("CANCELLED by 1042", "CANCELLED"), ("SUSPENDED", "suspended")],
    ids=["completed", "cancelled", "failed", "timeout", "node-fail", "cancelled-by", "suspended"],
)  # fmt: skip
def test_helios_raw_states_as_the_paper(tmp_path: Path, state: str, expected: str) -> None:
    row = f"1,u,vc1,2,4,1,{state},{T},{T},2020-06-09 18:42:01,60,0\n"
    result = read_trace(write(tmp_path, "cluster_log.csv", RAW_HEADER + row))
    got = result.jobs[0].state if result.jobs else next(iter(result.skipped))
    assert (result.format, got) == ("helios-raw", expected)


@pytest.mark.parametrize(
    ("row", "outcome"),
    [
        (f"1,u,vc1,0,4,1,COMPLETED,{T},{T},{T},0,0\n", "zero GPUs"),
        (f"1,u,vc1,2,4,1,CANCELLED,{T},,,,5\n", "never started"),
        (f"1,u,vc1,2,4,1,COMPLETED,{T},{T},2020-06-09 18:42:01,,0\n", 60.0),
    ],
    ids=["cpu-job", "cancelled-waiting", "duration-from-times"],
)
def test_helios_raw_runs_and_skips(tmp_path: Path, row: str, outcome: object) -> None:
    result = read_trace(write(tmp_path, "cluster_log.csv", RAW_HEADER + row), "helios-raw")
    assert (result.jobs[0].duration if result.jobs else next(iter(result.skipped))) == outcome


def test_helios_raw_philly_log_uses_jobname_and_philly_states(tmp_path: Path) -> None:
    text = "user,vc,jobname,gpu_num,state,submit_time,start_time,end_time,duration\n" \
           f"u1,6214e9,app_7,8,Killed,{T},{T},{T},0\n"  # fmt: skip
    job = read_trace(write(tmp_path, "philly.csv", text)).jobs[0]
    assert (job.job_id, job.task_type, job.name, job.state, job.gpus) == ("app_7", "6214e9", "app_7", "CANCELLED", 8)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        (f"1,u,vc1,2,4,1,RUNNING,{T},{T},{T},0,0\n", "state"),
        (f"1,u,vc1,2,4,1,COMPLETED,{T},2020-06-09 18:42:01,{T},,0\n", "end_time"),
        (f"1,u,vc1,2,4,1,COMPLETED,yesterday,{T},{T},0,0\n", "submit_time"),
        (f"1,u,vc1,2,4,x,COMPLETED,{T},{T},{T},0,0\n", "node_num"),
    ],
    ids=["unknown-state", "end-before-start", "bad-submit", "bad-nodes"],
)
def test_helios_raw_errors_are_located(tmp_path: Path, row: str, field: str) -> None:
    path = write(tmp_path, "cluster_log.csv", RAW_HEADER + row)
    with pytest.raises(TraceError) as info:
        read_trace(path, "helios-raw")
    assert str(info.value).startswith(f"{path}:2: {field}: ")
    assert read_trace(path, skip_invalid=True).skipped == {f"invalid: {field}": 1}


def test_helios_raw_real_excerpt_golden() -> None:
    result = read_trace(HELIOS_RAW)
    assert (result.format, len(result.jobs), result.origin, dict(result.skipped)) == (
        "helios-raw", 3, 1591728061.0, {})  # 2020-06-09 18:41:01 UTC  # fmt: skip
    assert [brief(job) for job in result.jobs] == [
        ("1425511", 0.0, 36848.0, 1, "vcJkd", "uXBbc", "COMPLETED"),
        ("1425512", 26.0, 249.0, 4, "vchbv", "uVMrF", "FAILED"),
        ("1425513", 27.0, 675233.0, 1, "vcpDC", "uzqls", "CANCELLED"),
    ]


def test_processed_helios_csv_still_sniffs_as_helios(tmp_path: Path) -> None:
    path = write(tmp_path, "jobs.csv", "job_id,user,vc,jobname,gpu_num,state,submit_time,duration\n1,u,v,n,1,COMPLETED,0,5\n")
    assert sniff_format(path) == "helios"
    # The raw log read as --format helios keeps working as before (extra columns ignored).
    assert len(read_trace(HELIOS_RAW, "helios").jobs) == 3


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        (task(), "pai"),
        ("j,i,u,Terminated,1.0,2.0\n", "pai"),
        ("job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type\n"
         + task(), "pai"),
        (RAW_HEADER, "helios-raw"),
    ],
    ids=["pai-task-headerless", "pai-job-headerless", "pai-task-header", "helios-raw"],
)  # fmt: skip
def test_sniff_pai_and_helios_raw(tmp_path: Path, text: str, fmt: str) -> None:
    assert sniff_format(write(tmp_path, "t.csv", text)) == fmt


# --- golden simulations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trace", "vcs", "summary"),
    [
        (PAI, "MISC,1\n", (1, 38.0, 0.0)),
        # vcJkd/vcpDC/vchbv one 8-GPU node each: no job waits; JCT = the mean of the run times.
        (HELIOS_RAW, "vcJkd,1\nvchbv,1\nvcpDC,1\n", (3, 237443.33, 0.0)),
    ],
    ids=["pai-readme", "helios-venus-readme"],
)
def test_golden_simulation(tmp_path: Path, trace: Path, vcs: str, summary: tuple[object, ...]) -> None:
    cluster = load_cluster(write(tmp_path, "vc.csv", "vc,num_nodes\n" + vcs), gpus_per_node=8)
    result = read_trace(trace)
    got, _ = run(cluster, result.jobs, overrides=Overrides(queue="fifo", placement="consolidate"))
    assert (got["jobs"], round(got["avg_jct"], 2), round(got["avg_queue"], 2)) == summary


def test_cli_simulate_pai_json(tmp_path: Path) -> None:
    vcs = write(tmp_path, "vc.csv", "vc,num_nodes\nMISC,1\n")
    done = CliRunner().invoke(cli, ["simulate", "--trace", str(PAI), "--cluster", str(vcs), "--json"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert (summary["trace"]["format"], summary["jobs"], summary["avg_jct"], summary["skipped"]) == (
        "pai", 1, 38.0, {"fractional GPU kept as a share": 1, "no job record": 1})  # fmt: skip

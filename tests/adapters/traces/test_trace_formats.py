"""Each reader on small hand-made fixtures: skip reasons, ids, GPU sources, ordering, clocks."""

from __future__ import annotations

import calendar
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from gputwin.adapters.traces import FORMATS, TraceError, read_trace, sniff_format, write_helios_csv
from gputwin.adapters.traces.errors import FieldError
from gputwin.adapters.traces.fields import parse_elapsed, parse_utc

from gputwin.core.model import JobSpec

DATA = Path(__file__).resolve().parent / "data"
HELIOS_HEADER = "job_id,user,vc,gpu_num,submit_time,duration\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def brief(jobs: tuple[JobSpec, ...]) -> list[tuple[str, float, float, int, str, str]]:
    return [(j.job_id, j.submit, j.duration, j.gpus, j.task_type, j.state) for j in jobs]


# --- sacct -P ---------------------------------------------------------------------------------


def test_sacct_steps_arrays_het_requeue_and_skips() -> None:
    result = read_trace(DATA / "sacct-P-mixed-handmade.txt")
    assert result.origin == calendar.timegm((2026, 1, 1, 0, 0, 10))
    assert brief(result.jobs) == [
        ("10", 0.0, 3600.0, 8, "gpu", "COMPLETED"),
        ("12_3", 0.0, 90.0, 2, "debug", "CANCELLED"),  # typed-only TRES summed; "CANCELLED by 0"
        ("15", 0.0, 28.0, 2, "gpu", "PREEMPTED"),  # a preempted run keeps what it recorded
        ("13+0", 30.0, 300.0, 16, "gpu", "FAILED"),
        ("11", 630.0, 1800.0, 4, "gpu", "COMPLETED"),  # the last of its two records
    ]
    assert [j.seq for j in result.jobs] == [0, 1, 4, 2, 3]
    assert dict(result.skipped) == {
        "job steps": 3,
        "never started": 1,
        "requeued duplicates": 1,
        "still running": 1,
        "zero GPUs": 1,
    }
    assert result.jobs[3].num_nodes == 2 and result.jobs[0].user == "alice"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "JobID|Submit|Start|End|AllocGRES|\n"
            "1|2026-01-01T00:00:00|2026-01-01T00:00:05|2026-01-01T00:00:09|gpu:h100:4(IDX:0,2-3)|\n",
            ("1", 0.0, 4.0, 4, "default", "COMPLETED"),
            id="sacct -p trailing pipe, typed GRES",
        ),
        pytest.param(
            "JobID|Start|Elapsed|ReqGRES|Partition|State\n7|2026-01-01T00:00:00|1-00:00:01|gpu:2|p|TIMEOUT\n",
            ("7", 0.0, 86401.0, 2, "p", "TIMEOUT"),
            id="no End: Elapsed; no Submit: Start",
        ),
        pytest.param(
            "JobID|Submit|Start|End|AllocTRES|ReqTRES\n"
            "8|2026-01-01T00:00:00|2026-01-01T00:00:00|2026-01-01T00:01:00||gres/gpu=3\n",
            ("8", 0.0, 60.0, 3, "default", "COMPLETED"),
            id="empty AllocTRES falls back to ReqTRES",
        ),
    ],
)
def test_sacct_column_variants(tmp_path: Path, text: str, expected: tuple[object, ...]) -> None:
    result = read_trace(write(tmp_path, "s.txt", text))
    assert brief(result.jobs) == [expected]


def test_sacct_without_submit_column_says_so(tmp_path: Path) -> None:
    path = write(
        tmp_path, "s.txt", "JobID|Start|End|AllocTRES\n1|2026-01-01T00:00:00|2026-01-01T00:00:01|gres/gpu=1\n"
    )
    assert read_trace(path).skipped == {"no Submit column: submit = Start": 1}


# --- sacct --json -----------------------------------------------------------------------------


def test_sacct_json_24_11_layout() -> None:
    result = read_trace(DATA / "sacct-24.11-handmade.json")
    assert result.origin == calendar.timegm((2026, 1, 1, 0, 0, 0))
    assert brief(result.jobs) == [
        ("101", 0.0, 3600.0, 8, "train", "COMPLETED"),
        ("103+1", 0.0, 300.0, 4, "train", "FAILED"),
        ("100_2", 30.0, 60.0, 3, "infer", "CANCELLED"),  # no_val times, typed-only gres summed
        ("107", 70.0, 200.0, 2, "train", "COMPLETED"),  # the last of its two records
    ]
    assert dict(result.skipped) == {
        "never started": 1,
        "requeued duplicates": 1,
        "still running": 1,
        "zero GPUs": 1,
    }


# --- helios -----------------------------------------------------------------------------------


def test_helios_equal_submit_times_keep_file_order(tmp_path: Path) -> None:
    path = write(
        tmp_path, "h.csv", HELIOS_HEADER + "a,u,v,1,5,1\nb,u,v,1,0,1\nc,u,v,1,5,1\nd,u,v,1,0,1\ne,u,v,0,0,1\n"
    )
    result = read_trace(path)
    assert [(j.job_id, j.seq) for j in result.jobs] == [("b", 1), ("d", 3), ("a", 0), ("c", 2)]
    assert result.skipped == {"zero GPUs": 1}


def test_helios_dates_are_rebased_and_types_stay_strings(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "h.csv",
        "job_id,user,vc,gpu_num,submit_time,duration,state\n"
        "1,u,6214e9,2,2020-04-01 00:00:10,30.5,\n"
        "2,u,007,1,2020-04-01 00:00:00,60,FAILED\n",
    )
    result = read_trace(path)
    assert result.origin == calendar.timegm((2020, 4, 1, 0, 0, 0))
    assert brief(result.jobs) == [
        ("2", 0.0, 60.0, 1, "007", "FAILED"),
        ("1", 10.0, 30.5, 2, "6214e9", "COMPLETED"),
    ]


def test_write_helios_csv_round_trips(tmp_path: Path) -> None:
    jobs = (
        JobSpec("a", 0.0, 10.0, 1, "6214e9", "u1", "x,y", "COMPLETED", seq=0),
        JobSpec("b", 0.1, 1 / 3, 8, "vc", "", "", "FAILED", seq=1),
        JobSpec("c", 7.0, 0.0, 2, "vc", "u2", 'say "hi"', "CANCELLED", seq=2),
    )
    out = io.StringIO()
    write_helios_csv(jobs, out)
    assert out.getvalue().splitlines()[:2] == [
        "job_id,user,vc,jobname,gpu_num,state,submit_time,duration",
        'a,u1,6214e9,"x,y",1,COMPLETED,0,10',
    ]
    result = read_trace(write(tmp_path, "out.csv", out.getvalue()))
    assert (result.jobs, result.format, result.origin) == (jobs, "helios", 0.0)


def test_write_helios_csv_round_trips_a_sacct_trace(tmp_path: Path) -> None:
    source = read_trace(DATA / "sacct-P-mixed-handmade.txt").jobs
    out = tmp_path / "out.csv"
    with out.open("w", newline="") as stream:
        write_helios_csv(source, stream)
    again = read_trace(out).jobs
    assert brief(again) == brief(source)
    assert [(j.user, j.name) for j in again] == [(j.user, j.name) for j in source]


def test_write_helios_keeps_gpu_shares(tmp_path: Path) -> None:
    jobs = (
        JobSpec("a", 0.0, 10.0, 1, "vc", "u1", "", "COMPLETED", seq=0, gpu_milli=250),
        JobSpec("b", 1.0, 20.0, 4, "vc", "u1", "", "COMPLETED", seq=1),
    )
    out = io.StringIO()
    write_helios_csv(jobs, out, milli=True)
    assert out.getvalue().splitlines()[:2] == [
        "job_id,user,vc,jobname,gpu_num,state,submit_time,duration,gpu_milli",
        "a,u1,vc,,1,COMPLETED,0,10,250",
    ]
    assert read_trace(write(tmp_path, "out.csv", out.getvalue())).jobs == jobs


@pytest.mark.parametrize(
    ("gpus", "milli", "reason"),
    [
        pytest.param(1, "0", "gpu_milli: 0: a job asks for 1-999", id="zero"),
        pytest.param(1, "1001", "gpu_milli: too large", id="more-than-a-gpu"),
        pytest.param(2, "500", "gpu_milli: a share of one GPU (500/1000) with gpu_num 2", id="share-of-two-gpus"),
        pytest.param(1, "half", "gpu_milli: not an integer", id="not-a-number"),
    ],
)
def test_a_bad_gpu_milli_is_refused_by_line_and_field(tmp_path: Path, gpus: int, milli: str, reason: str) -> None:
    path = write(tmp_path, "t.csv", f"job_id,user,vc,gpu_num,submit_time,duration,gpu_milli\na,u,vc,{gpus},0,10,{milli}\n")
    with pytest.raises(TraceError) as error:
        read_trace(path)
    assert f"{path}:2: {reason}" in str(error.value)


# --- alibaba ----------------------------------------------------------------------------------


def test_alibaba_decisions(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "openb_pod_list_x.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time\n"
        "p0,1,1,0,0,,LS,Succeeded,0,10,0\n"  # CPU only
        "p1,1,1,1,500,,BE,Succeeded,5,20,8\n"  # a GPU share: kept as gpu_milli 500
        "p2,1,1,2,1000,V100M32,LS,Running,6,100,6\n"  # cut off at the snapshot
        "p3,1,1,1,1000,,LS,Pending,7,100,\n"  # never scheduled
        "p4,1,1,4,1000,,LS,Failed,9,9,9\n",
    )  # no run time
    result = read_trace(path)
    assert brief(result.jobs) == [
        ("p1", 5.0, 12.0, 1, "default", "COMPLETED"),
        ("p2", 6.0, 94.0, 2, "V100M32", "RUNNING"),
    ]
    assert result.jobs[0].user == "BE"
    assert [job.model for job in result.jobs] == ["", "V100M32"]  # gpu_spec is the model it asks for
    assert [job.gpu_milli for job in result.jobs] == [500, 1000]  # the share kept, multi-GPU pods whole
    assert dict(result.skipped) == {
        "zero GPUs": 1,
        "fractional GPU kept as a share": 1,
        "cut off at snapshot": 1,
        "never scheduled": 1,
        "no run time": 1,
    }


@pytest.mark.parametrize(
    ("header", "values", "name", "cpus", "memory"),
    [
        pytest.param("cpu_milli,memory_mib,", "8000,30000,", "cpu8000-mem30000", 8.0, 30000.0, id="request-shape"),
        pytest.param("cpu_milli,memory_mib,", "500,0,", "cpu500-mem0", 0.5, 0.0, id="milli-cpus"),
        pytest.param("cpu_milli,memory_mib,", "8k,-1,", "cpu-mem", None, None, id="not-counts-left-out"),
        pytest.param("cpu_milli,memory_mib,", "1" * 12 + ",0,", "cpu-mem0", None, 0.0, id="too-long-left-out"),
        pytest.param("", "", "cpu-mem", None, None, id="no-columns"),
    ],
)
def test_alibaba_name_is_the_request_shape(tmp_path: Path, header: str, values: str, name: str,
                                           cpus: float | None, memory: float | None) -> None:  # fmt: skip
    # The same counts are the job's cpus (cpu_milli / 1000) and memory_mib: the estimator's features.
    path = write(tmp_path, "openb_pod_list_x.csv",
                 f"name,{header}num_gpu,gpu_milli,creation_time,deletion_time,scheduled_time\n"
                 f"pod-a,{values}1,1000,0,10,0\n")  # fmt: skip
    assert [(job.name, job.cpus, job.memory_mib) for job in read_trace(path, "alibaba").jobs] == [(name, cpus, memory)]


# --- sniffing, summary, clocks ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ('\n  {"jobs": []}', "sacct-json"),
        ("[]", "sacct-json"),
        ("JobID|State|Start\n", "sacct"),
        ("\ufeff" + HELIOS_HEADER, "helios"),
        ("name,num_gpu,gpu_milli,creation_time,scheduled_time,deletion_time\n", "alibaba"),
    ],
)
def test_sniff_format(tmp_path: Path, text: str, fmt: str) -> None:
    assert sniff_format(write(tmp_path, "t", text)) == fmt


def test_sniff_format_unknown_names_what_it_saw(tmp_path: Path) -> None:
    path = write(tmp_path, "t.csv", "a,b,c\n1,2,3\n")
    with pytest.raises(TraceError) as info:
        sniff_format(path)
    assert str(info.value).startswith(f"{path}:1: format: cannot tell the format from 'a,b,c'")
    assert all(fmt in str(info.value) for fmt in FORMATS)


def test_summary_is_json() -> None:
    summary = read_trace(DATA / "sacct-P-mixed-handmade.txt").summary()
    assert json.loads(json.dumps(summary)) == {
        "format": "sacct",
        "jobs": 5,
        "skipped": {
            "job steps": 3,
            "never started": 1,
            "requeued duplicates": 1,
            "still running": 1,
            "zero GPUs": 1,
        },
    }


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    assert time.timezone == 5 * 3600, "the TZ change did not take"
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("name", ["sacct-P-mixed-handmade.txt", "sacct-24.11-handmade.json"])
def test_results_do_not_depend_on_tz(name: str, request: pytest.FixtureRequest) -> None:
    here = read_trace(DATA / name)
    request.getfixturevalue("new_york")
    there = read_trace(DATA / name)
    assert (there.origin, there.jobs) == (here.origin, here.jobs)
    assert there.origin == calendar.timegm((2026, 1, 1, 0, 0, 10 if name.endswith(".txt") else 0))


def test_dated_helios_does_not_depend_on_tz(tmp_path: Path, new_york: None) -> None:
    path = write(tmp_path, "h.csv", HELIOS_HEADER + "1,u,v,1,1970-01-02 00:00:00,5\n")
    assert read_trace(path).origin == 86_400.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("00:00:02", 2.0), ("1-02:03:04", 93_784.0), ("05:06", 306.0), ("00:01:02.5", 62.5)],
)
def test_parse_elapsed(text: str, seconds: float) -> None:
    assert parse_elapsed(text, "Elapsed") == seconds


@pytest.mark.parametrize("text", ["2024-02-30T00:00:00", "2024-01-01", "2024-01-01T24:00:00"])
def test_parse_utc_rejects(text: str) -> None:
    with pytest.raises(FieldError, match="not a time"):
        parse_utc(text, "Start")

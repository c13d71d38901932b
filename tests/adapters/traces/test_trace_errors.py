"""Bad input: every reader names file, line (or JSON path) and field; skip_invalid counts instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gputwin.adapters.traces import TraceError, iter_jobs, read_trace

HELIOS = "job_id,user,vc,gpu_num,submit_time,duration\n"
SACCT = "JobID|Submit|Start|End|AllocTRES\n"
SACCT_OK = "1|2026-01-01T00:00:00|2026-01-01T00:00:01|2026-01-01T00:00:02|gres/gpu=1\n"
ALIBABA = "name,num_gpu,gpu_milli,creation_time,scheduled_time,deletion_time\n"

# (file name, content, fmt, expected message after "PATH")
CASES = [
    # helios
    ("jobs.csv", HELIOS + "1,u,a,1,0,10\n2,u,a,x,0,10\n", "auto", ":3: gpu_num: not an integer: 'x'"),
    ("jobs.csv", HELIOS + "1,u,a,1,0,-5\n", "auto", ":2: duration: negative: '-5'"),
    ("jobs.csv", HELIOS + "1,u,a,1,2020-13-01 00:00:00,5\n", "auto", ":2: submit_time: not a time"),
    ("jobs.csv", HELIOS + "1,u,a,1,yesterday,5\n", "auto", ":2: submit_time: not a time"),
    ("jobs.csv", HELIOS + "1,u,a,1,0,nan\n", "auto", ":2: duration: not a number: 'nan'"),
    ("jobs.csv", HELIOS + "1,u,,1,0,5\n", "auto", ":2: vc: empty"),
    ("jobs.csv", HELIOS + "1,u,a,1,0\n", "auto", ":2: row: expected 6 fields, got 5"),
    (
        "jobs.csv",
        HELIOS + "1,u,a,1,0,5\n2,u,a,1,2020-01-01 00:00:00,5\n",
        "auto",
        ":3: submit_time: mixes wall-clock dates and plain seconds",
    ),
    ("jobs.csv", HELIOS + '1,"u"x,a,1,0,5\n', "auto", ":2: row: ',' expected after '\"'"),
    (
        "jobs.csv",
        "job_id,user,gpu_num,submit_time,duration\n1,u,1,0,5\n",
        "helios",
        ":1: vc: missing required column",
    ),
    ("jobs.csv", HELIOS, "auto", ":1: file: no records after the header"),
    ("jobs.csv", HELIOS + "\n\n", "auto", ":1: file: no records after the header"),
    ("jobs.csv", "", "auto", ": file: empty file"),
    ("jobs.csv", "\n\n", "helios", ": file: empty file (no header line)"),
    # sacct -P
    (
        "s.txt",
        "JobID|Start|End|NodeList\n1|x|y|n\n",
        "auto",
        ":1: AllocTRES or ReqTRES or AllocGRES or ReqGRES: missing required column",
    ),
    ("s.txt", "JobName|Start|End|AllocTRES\nx|y|z|w\n", "sacct", ":1: JobID: missing required column"),
    ("s.txt", "JobID|Submit|Start|AllocTRES\n1|a|b|c\n", "sacct", ":1: Elapsed: missing required column"),
    (
        "s.txt",
        SACCT + SACCT_OK + "2|2026-01-01T00:00:00|2026-01-01 xx|2026-01-01T00:00:02|gres/gpu=1\n",
        "auto",
        ":3: Start: not a time",
    ),
    (
        "s.txt",
        SACCT + "2|2026-01-01T00:00:00|2026-01-01T00:00:09|2026-01-01T00:00:02|gres/gpu=1\n",
        "auto",
        ":2: End: negative duration",
    ),
    (
        "s.txt",
        SACCT + "2|2026-01-01T00:00:00|2026-01-01T00:00:01|2026-01-01T00:00:02|gres/gpu=x\n",
        "auto",
        ":2: AllocTRES: gres/gpu: not an integer: 'x'",
    ),
    (
        "s.txt",
        SACCT + "2|2026-01-01T00:00:00|2026-01-01T00:00:01|2026-01-01T00:00:02|gpu\n",
        "auto",
        ":2: AllocTRES: not a TRES list",
    ),
    (
        "s.txt",
        SACCT + "2|Unknown|2026-01-01T00:00:01|2026-01-01T00:00:02|gres/gpu=1\n",
        "auto",
        ":2: Submit: no submit time",
    ),
    (
        "s.txt",
        "JobID|Start|Elapsed|AllocGRES\n3|2026-01-01T00:00:01|soon|gpu:1\n",
        "auto",
        ":2: Elapsed: not a duration",
    ),
    (
        "s.txt",
        "JobID|Start|Elapsed|AllocGRES\n3|2026-01-01T00:00:01|00:01|gpu:a:b:1\n",
        "auto",
        ":2: AllocGRES: not a GRES item",
    ),
    (
        "s.txt",
        SACCT + SACCT_OK + "|2026-01-01T00:00:00|2026-01-01T00:00:01|2026-01-01T00:00:02|gres/gpu=1\n",
        "auto",
        ":3: JobID: empty",
    ),
    # alibaba
    ("pods.csv", ALIBABA + "p,x,0,0,0,1\n", "auto", ":2: num_gpu: not an integer: 'x'"),
    ("pods.csv", ALIBABA + "p,1,1500,0,0,1\n", "auto", ":2: gpu_milli: more than one GPU"),
    ("pods.csv", ALIBABA + "p,1,1000,soon,0,1\n", "auto", ":2: creation_time: not a number: 'soon'"),
    ("pods.csv", ALIBABA + ",1,1000,0,0,1\n", "auto", ":2: name: empty"),
    (
        "pods.csv",
        "name,num_gpu,gpu_milli,creation_time,scheduled_time\np,1,1000,0,0\n",
        "alibaba",
        ":1: deletion_time: missing required column",
    ),
    # any format
    ("missing.csv", None, "auto", ": file: no such file"),
    ("jobs.csv", HELIOS, "parquet", ": format: unknown format 'parquet'"),
]


@pytest.mark.parametrize(
    ("name", "text", "fmt", "expected"),
    CASES,
    ids=[f"{i}-{case[3].split(':')[1].strip() or case[3]}" for i, case in enumerate(CASES)],
)
def test_error_names_file_line_and_field(
    tmp_path: Path, name: str, text: str | None, fmt: str, expected: str
) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceError) as info:
        read_trace(path, fmt)
    assert str(info.value).startswith(f"{path}{expected}"), str(info.value)
    assert info.value.path == str(path) and info.value.field in expected


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_bytes(HELIOS.encode() + b"1,\xff\xfe,a,1,0,5\n")
    with pytest.raises(TraceError, match="file: not UTF-8 text"):
        read_trace(path, "helios")


JSON_JOB = {
    "job_id": 1,
    "partition": "p",
    "user": "u",
    "state": {"current": "COMPLETED"},
    "time": {"submission": 100, "start": 110, "end": 120},
    "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]},
}


def patched(**changes: object) -> dict[str, object]:
    """JSON_JOB with dotted-path changes applied, e.g. patched(**{"time.start": "x"})."""
    job = json.loads(json.dumps(JSON_JOB))
    for dotted, value in changes.items():
        *parents, leaf = dotted.split(".")
        target = job
        for key in parents:
            target = target[key]
        target[leaf] = value
    return job


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ('{"jobs": [\n  {"job_id": 1,}\n]}', ":2: json: Expecting property name"),
        ('{"meta": {}}', ": jobs: missing"),
        ('{"jobs": []}', ": jobs: no jobs in the file"),
        (
            json.dumps({"jobs": [JSON_JOB, patched(**{"time.start": "x"})]}),
            ": jobs[1].time.start: not an integer: 'x'",
        ),
        (json.dumps({"jobs": [patched(**{"time.end": 100})]}), ": jobs[0].time.end: negative duration"),
        (
            json.dumps(
                {"jobs": [patched(**{"tres.allocated": [{"type": "gres", "name": "gpu", "count": "8"}]})]}
            ),
            ": jobs[0].tres.allocated[0].count: not an integer: '8'",
        ),
        (json.dumps({"jobs": [patched(**{"state.current": 5})]}), ": jobs[0].state.current: not a state"),
        (json.dumps({"jobs": [patched(job_id=None)]}), ": jobs[0].job_id: missing"),
        (json.dumps({"jobs": [JSON_JOB, 7]}), ": jobs[1]: not an object"),
        (json.dumps({"jobs": [patched(**{"time.submission": None})]}), ": jobs[0].time.submission: missing"),
    ],
)
def test_json_error_names_the_json_path(tmp_path: Path, document: str, expected: str) -> None:
    path = tmp_path / "sacct.json"
    path.write_text(document, encoding="utf-8")
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert str(info.value).startswith(f"{path}{expected}"), str(info.value)


@pytest.mark.parametrize(
    ("name", "text", "kept", "skipped"),
    [
        (
            "jobs.csv",
            HELIOS + "1,u,a,1,0,5\n2,u,a,x,0,5\n3,u,a,1,0\n4,u,a,1,0,-1\n5,u,a,2,1,5\n",
            ["1", "5"],
            {"invalid: gpu_num": 1, "invalid: row": 1, "invalid: duration": 1},
        ),
        (
            "s.txt",
            SACCT + SACCT_OK + "2|x|2026-01-01T00:00:01|2026-01-01T00:00:02|gres/gpu=1\n"
            "3|2026-01-01T00:00:00|2026-01-01T00:00:01|2026-01-01T00:00:02|gres/gpu=y\n",
            ["1"],
            {"invalid: Submit": 1, "invalid: AllocTRES": 1},
        ),
        (
            "pods.csv",
            ALIBABA + "p,1,1000,0,0,1\nq,1,1000,-1,0,1\nr,0,0,0,0,1\n",
            ["p"],
            {"invalid: creation_time": 1, "zero GPUs": 1},
        ),
        (
            "sacct.json",
            json.dumps(
                {
                    "jobs": [
                        patched(job_id=2, **{"time.start": "x"}),
                        JSON_JOB,
                        patched(job_id=3, **{"tres.allocated": 3}),
                    ]
                }
            ),
            ["1"],
            {"invalid: time.start": 1, "invalid: tres.allocated": 1},
        ),
    ],
)
def test_skip_invalid_counts_bad_records(
    tmp_path: Path, name: str, text: str, kept: list[str], skipped: dict[str, int]
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = read_trace(path, skip_invalid=True)
    assert [job.job_id for job in result.jobs] == kept
    assert dict(result.skipped) == skipped
    assert [job.seq for job in sorted(result.jobs, key=lambda j: j.seq)] == list(range(len(kept)))


def test_header_errors_are_not_skipped(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,user,gpu_num,submit_time,duration\n1,u,1,0,5\n", encoding="utf-8")
    with pytest.raises(TraceError, match=":1: vc: missing required column"):
        list(iter_jobs(path, "helios", skip_invalid=True))

"""The SWF and Philly `cluster_job_log` readers: mapping, skips, located errors, sniffing, golden runs.

Real excerpts (provenance in data/README.md): `accasim-workload.swf` (25 PWA jobs, no header),
`theta-2022-first100.swf` (ALCF Theta 2022) and `philly-readme-example.json` (the record the
Philly README publishes). Everything else here is hand-made and named so.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from gputwin.adapters.traces import TraceError, iter_jobs, read_trace, sniff_format
from gputwin.adapters.traces import philly as philly_module

from gputwin.api.loader import load_cluster
from gputwin.cli.main import cli
from gputwin.core.model import JobSpec
from gputwin.sim.run import Overrides, run

DATA = Path(__file__).parent / "data"
ACCASIM = DATA / "accasim-workload.swf"
THETA = DATA / "theta-2022-first100.swf"
PHILLY = DATA / "philly-readme-example.json"
# An SWF job line with every field -1 but the ones a test sets (1-based field numbers).
BLANK = ["-1"] * 18


def swf_line(**fields: str) -> str:
    row = list(BLANK)
    for name, value in fields.items():
        row[int(name[1:]) - 1] = value
    return " ".join(row)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def brief(job: JobSpec) -> tuple[object, ...]:
    return (job.job_id, job.submit, job.duration, job.gpus, job.task_type, job.user, job.state)


# --- SWF mapping -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "procs_per_gpu", "expected"),
    [
        # Real lines of accasim-workload.swf, checked by hand: requested (field 8) over 4 per GPU.
        (" 5414  3801279 129908  26614   36  26614 25600   36  29400    -1  1   1   1  -1 -1  1 -1 -1", 4,
         ("5414", 0.0, 26614.0, 9, "default", "1", "COMPLETED")),
        (" 5664  3887436   4320     18   24  18.00 37888   24  43200    -1  1   4   1  -1 -1  1 -1 -1", 8,
         ("5664", 0.0, 18.0, 3, "default", "4", "COMPLETED")),
        (" 5682  3890290      2     61    1     -1 921600    1  54000    -1  1   5   1  -1 -1  1 -1 -1", 4,
         ("5682", 0.0, 61.0, 1, "default", "5", "COMPLETED")),
        # Hand-made: allocated (field 5) when requested is -1; queue number; failed / cancelled.
        (swf_line(f1="7", f2="10", f4="100", f5="16", f11="0", f12="3", f15="2"), 8,
         ("7", 0.0, 100.0, 2, "queue2", "3", "FAILED")),
        (swf_line(f1="8", f2="10", f4="5", f5="3", f8="9", f11="5", f15="1"), 1,
         ("8", 0.0, 5.0, 9, "batch", "", "CANCELLED")),
    ],
    ids=["accasim-5414", "accasim-5664-decimal-cpu-time", "accasim-5682-one-proc", "handmade-allocated",
         "handmade-named-queue"],
)  # fmt: skip
def test_swf_mapping(tmp_path: Path, line: str, procs_per_gpu: int, expected: tuple[object, ...]) -> None:
    path = write(tmp_path, "t.swf", "; Queue: 1 batch\n" + line + "\n")
    result = read_trace(path, procs_per_gpu=procs_per_gpu)
    assert [brief(job) for job in result.jobs] == [expected]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (swf_line(f1="1", f2="0", f5="4"), "unknown run time"),
        (swf_line(f1="1", f2="0", f4="10"), "no processor count"),
        (swf_line(f1="1", f2="0", f4="10", f8="0"), "zero GPUs"),
    ],
    ids=["run-time-minus-1", "no-processors", "zero-processors"],
)
def test_swf_skips_are_counted(tmp_path: Path, line: str, reason: str) -> None:
    kept = swf_line(f1="2", f2="5", f4="1", f8="1")
    result = read_trace(write(tmp_path, "t.swf", f"{line}\n{kept}\n"))
    assert (len(result.jobs), dict(result.skipped)) == (1, {reason: 1})


@pytest.mark.parametrize(
    ("text", "where", "field"),
    [
        ("1 2 3\n", 1, "row"),
        ("; c\n" + swf_line(f1="1", f2="0", f4="-5", f8="1") + "\n", 2, "run_time"),
        (swf_line(f1="1", f2="x", f4="5", f8="1") + "\n", 1, "submit_time"),
        (swf_line(f1="1", f2="0", f4="5", f8="1.5") + "\n", 1, "requested_processors"),
        (swf_line(f1="1", f2="0", f4="5", f8="9" * 5000) + "\n", 1, "field 8"),
        (swf_line(f1="1", f2="0", f4="5", f8="1", f15="q") + "\n", 1, "queue_number"),
        ("1 " * 600_000 + "\n", 1, "line"),
    ],
    ids=[
        "field-count",
        "negative-run-time",
        "bad-submit",
        "fractional-procs",
        "huge-number",
        "bad-queue",
        "line-over-1MiB",
    ],
)
def test_swf_errors_are_located(tmp_path: Path, text: str, where: int, field: str) -> None:
    path = write(tmp_path, "t.swf", text)
    with pytest.raises(TraceError) as info:
        read_trace(path, "swf")
    assert (info.value.line, info.value.field) == (where, field)
    assert str(info.value).startswith(f"{path}:{where}: {field}: ")
    if field != "line":  # every other bad field is skippable, and counted
        assert read_trace(path, "swf", skip_invalid=True).skipped == {f"invalid: {field}": 1}


def test_swf_skip_invalid_counts_and_keeps_the_rest(tmp_path: Path) -> None:
    good = swf_line(f1="2", f2="5", f4="1", f8="1")
    path = write(tmp_path, "t.swf", f"1 2 3\n{good}\n")
    result = read_trace(path, "swf", skip_invalid=True)
    assert (len(result.jobs), dict(result.skipped)) == (1, {"invalid: row": 1})


@pytest.mark.parametrize(
    ("text", "field"),
    [("", "file"), ("; only a header\n\n", "file")],
    ids=["empty", "header-only"],
)
def test_swf_without_jobs(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(TraceError) as info:
        read_trace(write(tmp_path, "t.swf", text), "swf")
    assert info.value.field == field


def test_swf_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo.swf"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="not a regular file"):
        read_trace(fifo, "swf")


def test_swf_real_excerpts_pinned() -> None:
    accasim = read_trace(ACCASIM)
    assert (accasim.format, len(accasim.jobs), accasim.origin, dict(accasim.skipped)) == (
        "swf",
        25,
        561553.0,
        {},
    )
    assert brief(accasim.jobs[0]) == ("184", 0.0, 61.0, 16, "default", "6", "COMPLETED")
    theta = read_trace(THETA, procs_per_gpu=64)
    assert (len(theta.jobs), theta.origin) == (100, 1641021254.0)
    assert Counter(job.gpus for job in theta.jobs) == {
        2: 45,
        4: 43,
        8: 5,
        10: 5,
        3: 2,
    }  # as awk counts ceil($8 / 64)
    assert brief(theta.jobs[-1]) == ("100", 125395.0, 3525.0, 2, "default", "", "FAILED")


# --- Philly cluster_job_log ---------------------------------------------------------------------


def philly_job(**changes: object) -> dict[str, object]:
    job: dict[str, object] = {
        "status": "Pass", "vc": "vc1", "jobid": "app_1", "user": "u1",
        "submitted_time": "2017-10-07 01:00:00",
        "attempts": [{"start_time": "2017-10-07 01:00:30", "end_time": "2017-10-07 01:10:30",
                      "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}],
    }  # fmt: skip
    job.update(changes)
    return job


RETRIED = [
    {"start_time": "2017-10-07 01:00:30", "end_time": "2017-10-07 01:01:00",
     "detail": [{"ip": "m1", "gpus": ["gpu0"]}, {"ip": "m2", "gpus": ["gpu0", "gpu1", "gpu2"]}]},
    {"start_time": "2017-10-07 02:00:00", "end_time": "2017-10-07 02:30:30", "detail": []},
]  # fmt: skip


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (philly_job(), ("app_1", 0.0, 600.0, 2, "vc1", "u1", "COMPLETED")),
        # Retried: GPUs of the first attempt (4 on 2 machines); run = last end - first start.
        (philly_job(attempts=RETRIED, status="Killed"), ("app_1", 0.0, 5400.0, 4, "vc1", "u1", "CANCELLED")),
        (philly_job(status="Failed", user=None), ("app_1", 0.0, 600.0, 2, "vc1", "", "FAILED")),
        (philly_job(attempts=[]), "no attempts"),
        (philly_job(attempts=[{"start_time": "None", "end_time": None, "detail": [{"gpus": ["gpu0"]}]}]),
         "never started"),
        (philly_job(attempts=[{"start_time": "2017-10-07 01:00:30", "end_time": None,
                               "detail": [{"gpus": ["gpu0"]}]}]), "still running"),
        (philly_job(attempts=[{"start_time": "2017-10-07 01:00:30", "end_time": "2017-10-07 01:00:31",
                               "detail": [{"ip": "m1", "gpus": []}]}]), "zero GPUs"),
    ],
    ids=["handmade-one-attempt", "handmade-retried", "handmade-failed-no-user", "no-attempts",
         "never-started", "still-running", "zero-gpus"],
)  # fmt: skip
def test_philly_mapping(tmp_path: Path, job: dict[str, object], expected: object) -> None:
    kept = philly_job(jobid="keep")
    result = read_trace(write(tmp_path, "log", json.dumps([job, kept])))
    if isinstance(expected, str):
        assert ([j.job_id for j in result.jobs], dict(result.skipped)) == (["keep"], {expected: 1})
    else:
        assert brief(result.jobs[0]) == expected


def test_philly_real_record_by_hand() -> None:
    # README: submitted 01:11:39, first start 2017-10-07 01:12:09, last end 2017-10-09 06:53:12.
    result = read_trace(PHILLY)
    assert (result.format, result.origin) == ("philly-json", 1507338699.0)  # 2017-10-07 01:11:39 UTC
    (job,) = result.jobs
    assert brief(job) == ("application_1506638472019_14199", 0.0, 2 * 86400 + 5 * 3600 + 41 * 60 + 3, 8,
                          "ee9e8c", "ce2f4c", "COMPLETED")  # fmt: skip
    assert job.num_nodes == 1


@pytest.mark.parametrize(
    ("text", "where", "field"),
    [
        ('[\n{"jobid": "a"}\n]', 2, "[0].attempts"),
        ("[\n" + json.dumps(philly_job()) + ",\n" + json.dumps(philly_job(submitted_time="soon")) + "]", 3,
         "[1].submitted_time"),
        ("[\n" + json.dumps(philly_job(attempts=[{"start_time": "2017-10-07 01:00:30", "end_time": 5,
                                                  "detail": [{"gpus": ["g"]}]}])) + "]", 2,
         "[0].attempts[0].end_time"),
        ("[\n" + json.dumps(philly_job(attempts=[{"start_time": "2017-10-07 01:00:30",
                                                  "end_time": "2017-10-07 01:00:00",
                                                  "detail": [{"gpus": ["g"]}]}])) + "]", 2,
         "[0].attempts[0].end_time"),
        ('[\n{"jobid": 1, "attempts": []}]', 2, "[0].jobid"),
        ("[\n 3]", 2, "[0]"),
        ("[\n" + json.dumps(philly_job()) + "\n\n" + json.dumps(philly_job()) + "]", 4, "json"),
        ('[{"a": tru', 1, "json"),
        ("[]", 1, "jobs"),
        ("[" + json.dumps(philly_job()) + "] x", 1, "json"),
    ],
    ids=["no-attempts-key", "bad-submit", "end-not-string", "end-before-start", "jobid-not-string",
         "not-an-object", "missing-comma", "truncated", "empty-list", "extra-data"],
)  # fmt: skip
def test_philly_errors_are_located(tmp_path: Path, text: str, where: int, field: str) -> None:
    path = write(tmp_path, "log", text)
    with pytest.raises(TraceError) as info:
        read_trace(path, "philly-json")
    assert (info.value.line, info.value.field) == (where, field)
    assert str(info.value).startswith(f"{path}:{where}: {field}: ")


def test_philly_skip_invalid_counts(tmp_path: Path) -> None:
    text = json.dumps([philly_job(submitted_time="soon"), 3, philly_job()])
    result = read_trace(write(tmp_path, "log", text), "philly-json", skip_invalid=True)
    assert (len(result.jobs), dict(result.skipped)) == (
        1,
        {"invalid: submitted_time": 1, "invalid: record": 1},
    )


def test_philly_streams_across_chunks_with_bounded_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(philly_module, "_CHUNK", 7)  # every record and number straddles chunks
    jobs = [philly_job(jobid=f"j{i}", submitted_time=f"2017-10-07 01:00:{i:02d}") for i in range(40)]
    path = write(tmp_path, "log", json.dumps(jobs, indent=1))
    assert [job.job_id for job in iter_jobs(path, "philly-json")] == [f"j{i}" for i in range(40)]
    monkeypatch.setattr(philly_module, "MAX_RECORD", 100)
    with pytest.raises(TraceError, match="a record over 100 characters"):
        list(iter_jobs(path, "philly-json"))


# --- sniffing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ("; Version: 2.2\n1 0 0 1 1 -1 -1 1 1 -1 1 1 1 -1 1 -1 -1 -1\n", "swf"),
        (swf_line(f1="1", f2="0", f4="1", f8="1") + "\n", "swf"),
        (json.dumps([philly_job()]), "philly-json"),
        ('[{"job_id": 1}]', "sacct-json"),
        ('{"jobs": [{"attempts": []}]}', "sacct-json"),
        ("[", "sacct-json"),
        ("1 2 3\n", None),
    ],
    ids=["swf-header", "swf-no-header", "philly", "bare-list-is-sacct-json", "sacct-json-object",
         "broken-json-stays-sacct-json", "three-numbers-unknown"],
)  # fmt: skip
def test_sniff_new_formats(tmp_path: Path, text: str, fmt: str | None) -> None:
    path = write(tmp_path, "t", text)
    if fmt is None:
        with pytest.raises(TraceError, match="SWF a ; header"):
            sniff_format(path)
    else:
        assert sniff_format(path) == fmt


def test_sniff_real_excerpts() -> None:
    assert [sniff_format(p) for p in (ACCASIM, THETA, PHILLY)] == ["swf", "swf", "philly-json"]


# --- golden runs and the CLI --------------------------------------------------------------------

GOLDEN = [
    # trace, procs_per_gpu, VC table (partition,nodes of 8 GPUs), jobs, avg_jct (s)
    (ACCASIM, 4, "default,2\n", 25, 55547.96),
    (THETA, 64, "default,2\n", 100, 53737.38),
    (PHILLY, 1, "ee9e8c,1\n", 1, 193263.0),
]


@pytest.mark.parametrize(
    ("trace", "procs", "vcs", "jobs", "avg_jct"), GOLDEN, ids=["accasim", "theta", "philly"]
)
def test_golden_simulation(
    tmp_path: Path, trace: Path, procs: int, vcs: str, jobs: int, avg_jct: float
) -> None:
    cluster = load_cluster(write(tmp_path, "vc.csv", "vc,num_nodes\n" + vcs), gpus_per_node=8)
    result = read_trace(trace, procs_per_gpu=procs)
    summary, _ = run(cluster, result.jobs, overrides=Overrides(queue="fifo", placement="consolidate"))
    assert (summary["jobs"], round(summary["avg_jct"], 2)) == (jobs, avg_jct)


def test_cli_simulate_swf_with_procs_per_gpu(tmp_path: Path) -> None:
    vcs = write(tmp_path, "vc.csv", "vc,num_nodes\ndefault,2\n")
    args = ["simulate", "--trace", str(ACCASIM), "--cluster", str(vcs), "--policy", "fifo",
            "--placement", "consolidate", "--json"]  # fmt: skip
    done = CliRunner().invoke(cli, [*args, "--procs-per-gpu", "4"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.output)
    assert (summary["jobs"], round(summary["avg_jct"], 2), summary["trace"]["format"]) == (
        25,
        55547.96,
        "swf",
    )
    # Without it (one processor, one GPU) the 20- to 36-processor jobs ask more than 16 GPUs.
    plain = json.loads(CliRunner().invoke(cli, args).output)
    assert (plain["jobs"], sum(plain["rejected"].values())) == (10, 15)


def test_cli_error_is_one_located_line(tmp_path: Path) -> None:
    vcs = write(tmp_path, "vc.csv", "vc,num_nodes\ndefault,2\n")
    bad = write(tmp_path, "bad.swf", "; x\n" + swf_line(f1="1", f2="0", f4="-7", f8="1") + "\n")
    done = CliRunner().invoke(cli, ["simulate", "--trace", str(bad), "--cluster", str(vcs)])
    assert done.exit_code == 2
    lines = done.output.strip().splitlines()
    assert lines == [f"error: {bad}:2: run_time: negative: '-7'"]

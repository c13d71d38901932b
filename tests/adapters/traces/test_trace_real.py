"""The trace readers on the real shared traces in ../shared/traces: counts and first rows pinned."""

from __future__ import annotations

import calendar
import csv
import time
from collections import Counter
from pathlib import Path

import pytest
from gputwin.adapters.traces import TraceError, iter_jobs, read_trace

from gputwin.core.model import JobSpec

REPO = Path(__file__).resolve().parents[3]
TRACES = REPO.parent / "shared" / "traces"

pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared traces not found at {TRACES}")

PHILLY = TRACES / "philly_mix1" / "jobs.csv"
ALIBABA = TRACES / "alibaba_openb" / "openb_pod_list_default.csv"
SACCT = TRACES / "sacct_samples"
PHILLY_VCS = {
    "0e4a51",
    "103959",
    "11cb48",
    "2869ce",
    "6214e9",
    "6c71a0",
    "7f04ca",
    "b436b2",
    "e13805",
    "ed69ec",
    "ee9e8c",
}


def utc(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S")))


@pytest.fixture(scope="module")
def philly() -> tuple[JobSpec, ...]:
    result = read_trace(PHILLY)
    assert (result.format, result.origin, dict(result.skipped)) == ("helios", 0.0, {})
    return result.jobs


def test_philly_count_partitions_and_gpus(philly: tuple[JobSpec, ...]) -> None:
    assert len(philly) == 30_756
    assert {job.task_type for job in philly} == PHILLY_VCS
    assert Counter(job.task_type for job in philly)["6214e9"] == 2_767
    assert sum(job.gpus for job in philly) == 42_947
    assert {job.state for job in philly} == {"COMPLETED"}


def test_philly_keeps_file_order_for_equal_submit_times(philly: tuple[JobSpec, ...]) -> None:
    with PHILLY.open(newline="") as stream:
        ids = [row["job_id"] for row in csv.DictReader(stream)]
    assert [job.job_id for job in philly] == ids  # the file is sorted by submit_time already
    assert [job.seq for job in philly] == list(range(len(ids)))


def test_philly_first_rows_are_kept_as_written(philly: tuple[JobSpec, ...]) -> None:
    assert philly[:3] == (
        JobSpec("5620", 0.0, 196.0, 1, "6c71a0", "vc_6c71a0", "job5620", "COMPLETED", seq=0),
        JobSpec("6209", 0.0, 173.0, 1, "7f04ca", "vc_7f04ca", "job6209", "COMPLETED", seq=1),
        JobSpec("11672", 0.0, 89.0, 1, "6214e9", "vc_6214e9", "job11672", "COMPLETED", seq=2),
    )
    assert philly[-1].submit == 20_150.0  # integer-second trace: not re-based, not rescaled


def test_alibaba_counts() -> None:
    result = read_trace(ALIBABA)
    assert result.format == "alibaba" and result.origin == 0.0
    assert len(result.jobs) == 6_203
    assert dict(result.skipped) == {
        "zero GPUs": 1_088,
        "never scheduled": 861,
        "fractional GPU kept as a share": 2_573,  # kept, as a share of one GPU each (gpu_milli)
        "cut off at snapshot": 4_149,  # kept, with the duration up to the snapshot end
    }
    assert result.jobs[0] == JobSpec(
        "openb-pod-0000", 0.0, 12_537_496.0, 1, "default", "LS", state="RUNNING", num_nodes=1, seq=0,
        name="cpu12000-mem16384",  # the pod's request shape (its CSV row: cpu_milli 12000, memory_mib 16384)
        cpus=12.0, memory_mib=16_384.0,
    )
    assert len({job.name for job in result.jobs}) < len(result.jobs) / 10  # shapes repeat; pod names never
    assert min(job.gpus for job in result.jobs) == 1 and max(job.gpus for job in result.jobs) == 8
    shares = [job.gpu_milli for job in result.jobs if job.gpu_milli < 1000]
    assert (len(shares), min(shares), max(shares), sum(shares)) == (2_573, 50, 810, 1_486_930)


def test_sacct_p_sample() -> None:
    result = read_trace(SACCT / "sacct-P-22.05.txt")
    assert (result.format, len(result.jobs), dict(result.skipped)) == ("sacct", 3, {})
    assert result.origin == utc("2026-11-29T08:53:26")
    assert [(j.job_id, j.gpus, j.task_type, j.user, j.duration, j.num_nodes) for j in result.jobs] == [
        ("1", 4, "batch", "root", 2.0, 1),
        ("2", 16, "high", "root", 2.0, 2),
        ("3", 2, "debug", "ml", 2.0, 1),  # no User column: the Account stands in
    ]
    assert {job.submit for job in result.jobs} == {0.0}


def test_sacct_p_preempted_sample_has_no_gpu_column() -> None:
    # This real dump was taken without AllocTRES: its GPU counts are unknowable, so it is refused.
    path = SACCT / "sacct-P-preempted-22.05.txt"
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert str(info.value).startswith(f"{path}:1: AllocTRES or ReqTRES or AllocGRES or ReqGRES: missing")


def test_sacct_json_sample() -> None:
    result = read_trace(SACCT / "sacct-22.05.json")
    assert (result.format, result.origin, dict(result.skipped)) == ("sacct-json", 1_795_941_231.0, {})
    assert result.jobs == (
        JobSpec("2", 0.0, 2.0, 16, "high", "root", "wrap", "COMPLETED", num_nodes=2, seq=0),
    )


def test_iter_jobs_streams_on_the_file_clock() -> None:
    skipped: Counter[str] = Counter()
    stream = iter_jobs(ALIBABA, skipped=skipped)
    first = next(stream)
    assert first.job_id == "openb-pod-0000" and first.seq == 0
    assert skipped["cut off at snapshot"] == 1  # only the first record has been read
    stream.close()
    sacct = list(iter_jobs(SACCT / "sacct-P-22.05.txt"))
    assert sacct[0].submit == utc("2026-11-29T08:53:26")  # epoch: re-basing is read_trace's job

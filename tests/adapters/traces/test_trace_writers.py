"""`write_swf` / `write_helios` and `gputwin trace convert`: every reader's fixture round-trips.

Table-driven over the readers' fixtures (real excerpts and hand-made files, provenance in
data/README.md and ../shared/traces/README.md): convert, read back, and the jobs are the same in
everything the target format carries. Hypothesis checks the SWF round trip on arbitrary jobs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from gputwin.adapters.traces import TraceError, read_trace
from gputwin.adapters.traces.writers import write_atomically, write_helios, write_swf
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.cli.main import cli
from gputwin.core.model import JobSpec

ROOT = Path(__file__).resolve().parents[3]
DATA = Path(__file__).parent / "data"
SHARED = ROOT.parent / "shared" / "traces"
FIXTURES = [
    pytest.param(DATA / "accasim-workload.swf", id="swf-accasim"),
    pytest.param(DATA / "theta-2022-first100.swf", id="swf-theta"),
    pytest.param(DATA / "philly-readme-example.json", id="philly-json"),
    pytest.param(DATA / "pai-2020-readme_task_table.csv", id="pai"),
    pytest.param(DATA / "helios-venus-readme-example.csv", id="helios-raw"),
    pytest.param(DATA / "sacct-P-mixed-handmade.txt", id="sacct-handmade"),
    pytest.param(DATA / "sacct-24.11-handmade.json", id="sacct-json-handmade"),
    pytest.param(ROOT / "manifests" / "samples" / "demo-trace.csv", id="helios-demo"),
    pytest.param(SHARED / "alibaba_openb" / "openb_pod_list_default.csv", id="alibaba-openb",
                 marks=pytest.mark.skipif(not SHARED.exists(), reason="../shared/traces not mounted")),
]  # fmt: skip
SWF_STATES = {"COMPLETED": "COMPLETED", "FAILED": "FAILED", "CANCELLED": "CANCELLED"}


def helios_view(job: JobSpec) -> tuple[object, ...]:
    return (job.job_id, job.submit, job.duration, job.gpus, job.task_type, job.user, job.name,
            job.state, job.num_nodes)  # fmt: skip


def swf_view(jobs: tuple[JobSpec, ...]) -> list[tuple[object, ...]]:
    """What SWF carries: times from the first job, GPUs, partition, state as SWF's status codes."""
    first = min((job.submit for job in jobs), default=0.0)
    return [(job.submit - first, job.duration, job.gpus, job.task_type, SWF_STATES.get(job.state, "COMPLETED"))
            for job in jobs]  # fmt: skip


def same_users(before: tuple[JobSpec, ...], after: tuple[JobSpec, ...]) -> bool:
    """Users renumbered one to one (the empty user stays empty)."""
    pairs = {(a.user, b.user) for a, b in zip(before, after, strict=True)}
    return len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs}) and all(
        (a == "") == (b == "") for a, b in pairs
    )


def convert(tmp_path: Path, trace: Path, target: str) -> tuple[Path, str]:
    out = tmp_path / f"out.{target}"
    done = CliRunner().invoke(cli, ["trace", "convert", "--trace", str(trace), "--to", target, "--out", str(out)])
    assert done.exit_code == 0, done.output
    return out, done.output


@pytest.mark.parametrize("trace", FIXTURES)
def test_convert_to_helios_round_trips(tmp_path: Path, trace: Path) -> None:
    before = read_trace(trace)
    out, _ = convert(tmp_path, trace, "helios")
    after = read_trace(out)
    assert after.format == "helios" and after.skipped == {}
    assert [helios_view(job) for job in after.jobs] == [helios_view(job) for job in before.jobs]


@pytest.mark.parametrize("trace", FIXTURES)
def test_convert_to_swf_round_trips(tmp_path: Path, trace: Path) -> None:
    before = read_trace(trace)
    out, _ = convert(tmp_path, trace, "swf")
    after = read_trace(out)
    assert after.format == "swf" and after.skipped == {}
    assert swf_view(after.jobs) == swf_view(before.jobs)
    assert same_users(before.jobs, after.jobs)
    if all(job.job_id.isdigit() for job in before.jobs):
        assert [job.job_id for job in after.jobs] == [str(int(job.job_id)) for job in before.jobs]


def test_swf_header_is_valid_and_names_queues(tmp_path: Path) -> None:
    jobs = (JobSpec("a", 5.0, 10.0, 2, "train", "alice"), JobSpec("b", 7.5, 1.0, 1, "infer", "bob", state="FAILED"))
    out = tmp_path / "t.swf"
    with out.open("w") as stream:
        write_swf(jobs, stream, origin=1000.0)
    lines = out.read_text().splitlines()
    assert lines[:8] == ["; Version: 2.2", "; Computer: gputwin trace convert", "; MaxJobs: 2", "; MaxRecords: 2",
                         "; UnixStartTime: 1005", "; MaxQueues: 2", "; Queue: 1 train", "; Queue: 2 infer"]  # fmt: skip
    assert lines[-1].split() == ["2", "2.5", "-1", "1", "1", "-1", "-1", "1", "-1", "-1", "0", "2", "-1", "-1",
                                 "2", "-1", "-1", "-1"]  # fmt: skip


def test_a_partition_name_with_a_line_break_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="task_type"), (tmp_path / "t.swf").open("w") as stream:
        write_swf((JobSpec("a", 0.0, 1.0, 1, "bad\nqueue"),), stream)


def test_a_failed_convert_leaves_out_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "out.swf"
    out.write_text("before\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,user,vc,gpu_num,submit_time,duration\nj,u,v,x,0,1\n")
    done = CliRunner().invoke(cli, ["trace", "convert", "--trace", str(bad), "--to", "swf", "--out", str(out)])
    assert (done.exit_code, done.output.strip()) == (2, f"error: {bad}:2: gpu_num: not an integer: 'x'")
    assert (out.read_text(), sorted(os.listdir(tmp_path))) == ("before\n", ["bad.csv", "out.swf"])


def test_an_error_while_writing_removes_the_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    with pytest.raises(RuntimeError), write_atomically(out) as stream:
        stream.write("half")
        raise RuntimeError("disk full")
    assert os.listdir(tmp_path) == []


def test_convert_reports_counts_on_stderr(tmp_path: Path) -> None:
    out, output = convert(tmp_path, DATA / "pai-2020-readme_task_table.csv", "helios")
    assert "1 jobs from" in output and "fractional GPU kept as a share: 1" in output
    assert oct(out.stat().st_mode & 0o777) != oct(0o600)  # the umask's mode, not mkstemp's


# Names as traces hold them: letters, digits, punctuation and symbols (no blanks or line breaks).
names = st.text(st.characters(categories=("L", "N", "P", "S"), max_codepoint=0x2FF), min_size=1, max_size=8)
jobs_strategy = st.lists(
    st.builds(JobSpec, job_id=names, submit=st.integers(0, 10**9).map(float),
              duration=st.floats(0, 10**6, allow_nan=False) | st.integers(0, 10**6).map(float),
              gpus=st.integers(1, 64), task_type=names, user=st.just("") | names,
              state=st.sampled_from(["COMPLETED", "FAILED", "CANCELLED", "RUNNING"])),
    min_size=1, max_size=20,
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(jobs=jobs_strategy)
def test_swf_and_helios_round_trip_arbitrary_jobs(tmp_path_factory: pytest.TempPathFactory, jobs: list[JobSpec]) -> None:
    folder = tmp_path_factory.mktemp("rt")
    ordered = tuple(sorted(jobs, key=lambda job: job.submit))
    with (folder / "t.swf").open("w") as stream:
        write_swf(ordered, stream)
    back = read_trace(folder / "t.swf", "swf")
    assert swf_view(back.jobs) == swf_view(ordered) and same_users(ordered, back.jobs)
    with (folder / "t.csv").open("w", newline="") as stream:
        write_helios(ordered, stream)
    again = read_trace(folder / "t.csv", "helios")
    assert [helios_view(job) for job in again.jobs] == [helios_view(job) for job in ordered]

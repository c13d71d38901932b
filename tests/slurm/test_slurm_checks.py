"""Hostile or malformed values are refused before any SLURM command runs (no cluster needed).

`subprocess.run` is replaced by a tripwire in these tests: a refused value must never reach it.
"""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from click.testing import CliRunner
from gputwin.adapters.slurm import (
    SlurmCommandError,
    SlurmInputError,
    check_time,
    mend_job_names,
    parse_sacct_output,
    sacct_command,
    sacct_history,
)
from gputwin.adapters.slurm.commands import stderr_summary

from gputwin.cli.main import cli

HOSTILE_NAMES = [
    "a;rm -rf /",
    "x\nPartitionName=evil",
    "a=b",
    "batch\n",  # a `$` anchor would let the trailing newline through
    "-p",  # would read as an option
    "a,b",  # a list separator inside one name
    "$(reboot)",
    "a b",
    "",
    "x" * 65,
    "..",
    "gpu\x00",
]


@pytest.fixture(autouse=True)
def tripwire(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def fake_run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        raise AssertionError(f"a command ran: {argv}")

    monkeypatch.setattr("gputwin.adapters.slurm.commands.subprocess.run", fake_run)
    return calls


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_partition_names_are_refused_before_any_command(name: str, tripwire: list[list[str]]) -> None:
    with pytest.raises(SlurmInputError, match=r"^partition: refused "):
        sacct_history("2024-01-01", "now", partitions=["batch", name])
    assert tripwire == []


@pytest.mark.parametrize("state", ["COMPLETED;ls", "RUNNING\n", "BOGUS", "cd,f", "R=1", ""])
def test_bad_states_are_refused(state: str, tripwire: list[list[str]]) -> None:
    with pytest.raises(SlurmInputError, match=r"^state: refused "):
        sacct_history("2024-01-01", "now", states=[state])
    assert tripwire == []


@pytest.mark.parametrize(
    "bound", ["2024-13-01", "2024-01-01 00:00", "yesterday", "now-1;ls", "2024-01-01T00:00\n", 17]
)
def test_bad_times_are_refused(bound: object, tripwire: list[list[str]]) -> None:
    with pytest.raises(SlurmInputError, match=r"^start: refused "):
        sacct_history(bound, "now")  # type: ignore[arg-type]
    assert tripwire == []


def test_other_refusals(tripwire: list[list[str]]) -> None:
    with pytest.raises(SlurmInputError, match="transport"):
        sacct_history("2024-01-01", "now", transport="pyslurm")
    with pytest.raises(SlurmInputError, match="a list of names"):
        sacct_history("2024-01-01", "now", partitions="batch")
    with pytest.raises(SlurmInputError, match="empty list"):
        sacct_history("2024-01-01", "now", partitions=[])
    assert tripwire == []


def test_messages_stay_on_one_line() -> None:
    with pytest.raises(SlurmInputError) as caught:
        sacct_history("2024-01-01", "now", partitions=["x\nPartitionName=evil"])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["a;rm -rf /", "x\nPartitionName=evil", "a=b"])
def test_cli_refuses_hostile_names_with_exit_2(name: str, tripwire: list[list[str]]) -> None:
    run = CliRunner().invoke(cli, ["slurm", "history", "--start", "now-1hours", "--partition", name])
    assert run.exit_code == 2
    assert run.output.startswith("error: partition: refused ") and run.output.count("\n") == 1, run.output
    assert tripwire == []


def test_the_command_is_an_argument_list_with_checked_values() -> None:
    argv = sacct_command(datetime(2024, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=2))), "now-2days",
                         partitions=["batch", "debug", "batch"], states=["cd", "FAILED"])  # fmt: skip
    assert argv[:3] == ["sacct", "--allusers", "--duplicates"]
    assert "--starttime=2024-05-01T10:00:00" in argv  # converted to UTC
    assert "--endtime=now-2days" in argv
    assert "--partition=batch,debug" in argv and "--state=CD,FAILED" in argv
    assert "-X" not in argv and "--allocations" not in argv  # steps must come out, to be folded
    assert any(arg.startswith("--format=JobID,") for arg in argv)
    assert "--json" in sacct_command("2024-01-01", "now", transport="json")


def test_naive_datetimes_are_utc() -> None:
    assert check_time(datetime(2024, 1, 2, 3, 4, 5, 678), "start") == "2024-01-02T03:04:05"


def test_empty_outputs_are_no_jobs() -> None:
    assert parse_sacct_output("JobID|Start|End|AllocTRES\n", "cli").jobs == ()
    assert parse_sacct_output('{"meta": {}, "errors": [], "jobs": []}', "json").jobs == ()
    nothing = '{"errors": [{"description": "Nothing found", "error_number": 9003}], "jobs": []}'
    assert parse_sacct_output(nothing, "json").jobs == ()
    with pytest.raises(SlurmCommandError, match="reported: boom"):
        parse_sacct_output('{"errors": [{"description": "boom"}], "jobs": []}', "json")


def test_stderr_summary_picks_the_fatal_line() -> None:
    text = "sacct: error: a\nsacct: fatal: Could not establish a configuration source\n"
    assert stderr_summary(text).startswith("sacct: fatal: Could not establish")
    assert "\n" not in stderr_summary(text)


def test_a_bar_in_a_job_name_is_mended_not_fatal() -> None:
    header = "JobID|Start|End|AllocTRES|JobName\n"
    row = "7|2024-01-01T00:00:00|2024-01-01T00:01:00|gres/gpu=2|a|b|c\n"
    assert (
        mend_job_names(header + row)
        == header + "7|2024-01-01T00:00:00|2024-01-01T00:01:00|gres/gpu=2|a\u00a6b\u00a6c\n"
    )
    (job,) = parse_sacct_output(header + row, "cli").jobs
    assert (job.job_id, job.gpus, job.name) == ("7", 2, "a\u00a6b\u00a6c")
    other = "JobName|JobID\nx|y|1\n"  # JobName not last: left alone (the reader reports the row)
    assert mend_job_names(other) == other

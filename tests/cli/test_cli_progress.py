"""Progress on a terminal (issue 18 item 5): the jobs-read count while a trace loads and the replay's
bar, on stderr; nothing when stderr is not a terminal or under --json.

A pseudo-terminal (pty) stands in for the user's terminal; GPUTWIN_PROGRESS_AFTER=0 makes the
display start at once, so the bundled demo trace (gputwin/data/demo-trace.csv, 3,375 jobs) is
enough, instead of a trace that loads for more than the default 2 s.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from collections.abc import Callable

import pytest

from gputwin.adapters.traces import read_trace
from gputwin.api.resources import demo_cluster_path, demo_trace_path

SIMULATE = [sys.executable, "-m", "gputwin.cli.main", "simulate", "--trace", str(demo_trace_path()),
            "--cluster", str(demo_cluster_path()), "--policy", "fifo"]  # fmt: skip


def in_pty(argv: list[str], after: str = "0") -> tuple[int, str, str]:
    """Run argv with stderr on a pty (stdout a pipe, as `… | jq` would have it); what each got."""
    master, slave = pty.openpty()
    env = {**os.environ, "GPUTWIN_PROGRESS_AFTER": after, "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    return proc.wait(timeout=120), out, b"".join(chunks).decode("utf-8", "replace")


def test_a_terminal_shows_the_trace_being_read_and_the_replay() -> None:
    code, out, err = in_pty(SIMULATE)
    assert code == 0, err
    assert "reading demo-trace.csv: 3,375 jobs" in err
    assert "simulating" in err and "/3,375 jobs" in err
    assert "gputwin simulate" in out  # the table still goes to stdout


def test_json_on_a_terminal_shows_no_progress() -> None:
    code, out, err = in_pty([*SIMULATE, "--json"])
    assert code == 0, err
    assert "reading" not in err and "simulating" not in err
    assert out.startswith("{")


def test_a_short_run_shows_nothing_under_the_default_delay() -> None:
    code, _, err = in_pty(SIMULATE, after="30")  # the run ends long before 30 s
    assert code == 0 and "reading" not in err and "simulating" not in err, err


def test_no_terminal_no_progress() -> None:
    done = subprocess.run(SIMULATE, capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "GPUTWIN_PROGRESS_AFTER": "0"})  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr


@pytest.mark.parametrize("every", [None, 1000], ids=["default-every", "every-1000"])
def test_read_trace_reports_jobs_read_as_it_streams(every: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    import gputwin.adapters.traces.reader as reader

    if every is not None:
        monkeypatch.setattr(reader, "PROGRESS_EVERY", every)
    seen: list[int] = []
    report: Callable[[int], None] = seen.append
    jobs = read_trace(demo_trace_path(), progress=report).jobs
    step = every or reader.PROGRESS_EVERY
    assert seen == [*range(step, len(jobs) + 1, step), len(jobs)]


DEMO = [sys.executable, "-m", "gputwin.cli.main", "demo"]


@pytest.mark.parametrize(("after", "shown"), [("0", True), ("600", False)], ids=["at-once", "not-yet"])
def test_a_sweep_shows_its_bar_only_once_it_has_run_a_while(after: str, shown: bool) -> None:
    """compare, tune and demo count candidates the same way, after the same delay as a replay's bar."""
    code, out, err = in_pty(DEMO, after=after)
    assert code == 0, err
    assert ("comparing" in err and "candidates" in err) is shown, err[-500:]
    assert "fifo" in out  # the table goes to stdout either way

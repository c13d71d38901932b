"""`gputwin get -w` (gputwin.cli.watch): the first listing, a line per change, Ctrl-C and --request-timeout.

The watch runs in a second process (`python -m gputwin.cli.main get … -w`), as a user's terminal
would; this process applies and runs the sample manifests (manifests/samples/) and waits for the
lines it expects by polling the watch's output with a deadline, never by sleeping a fixed time.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.cli.kubectl import UserError
from gputwin.cli.main import cli
from gputwin.cli.watch import changes, parse_timeout

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "manifests" / "samples"
CLUSTER, JOBS = str(SAMPLES / "two-leaf.yaml"), str(SAMPLES / "gpujobs.yaml")
DEADLINE = 60.0  # seconds a line may take to appear on a loaded 2-core machine (it takes ~0.25 s)


def gputwin(state: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [*args, "--state", str(state)])
    return result.exit_code, result.stdout, result.stderr


def _ctrl_c_as_a_terminal() -> None:
    """SIGINT back to its default in the child: a shell that runs CI in the background starts its
    commands with SIGINT ignored, and Python then installs no KeyboardInterrupt handler, so the
    watch would never see Ctrl-C (a user's terminal leaves it at the default)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Watch:
    """`gputwin get … -w` in a child process; its stdout lines collected by a thread."""

    def __init__(self, state: Path, *args: str) -> None:
        argv = [sys.executable, "-m", "gputwin.cli.main", "get", *args, "--state", str(state)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "COLUMNS": "200"}, preexec_fn=_ctrl_c_as_a_terminal)  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert self.proc.stdout is not None
        threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True).start()

    def _pump(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, count: int) -> list[str]:
        """Block until `count` lines in all have come (failing after DEADLINE); all lines so far."""
        end = time.monotonic() + DEADLINE
        while len(self.seen) < count:
            try:
                self.seen.append(self.lines.get(timeout=max(0.0, end - time.monotonic())))
            except queue.Empty:
                pytest.fail(f"watch printed {self.seen} within {DEADLINE} s, wanted {count} lines")
        return self.seen

    def interrupt(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        try:
            code = self.proc.wait(timeout=DEADLINE)  # stdout is the pump thread's to read
        except subprocess.TimeoutExpired:
            self.proc.kill()  # leave no watch behind
            raise
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()


@pytest.fixture
def state(tmp_path: Path) -> Path:
    folder = tmp_path / "state"
    assert gputwin(folder, "apply", "-f", CLUSTER)[0] == 0
    return folder


def test_watch_prints_the_table_then_a_line_per_change_and_ctrl_c_exits_0(state: Path) -> None:
    assert gputwin(state, "apply", "-f", JOBS)[0] == 0
    watch = Watch(state, "gpujobs", "-w", "--output-watch-events")
    first = watch.wait_for(4)  # header and the three sample jobs
    assert first[0].split()[:3] == ["EVENT", "NAME", "PHASE"]
    assert sorted(line.split()[:3][1] for line in first[1:]) == ["bert-serving", "llm-finetune", "resnet50-4gpu"]
    assert {line.split()[0] for line in first[1:]} == {"ADDED"}
    assert gputwin(state, "run")[0] == 0  # every job ends: each one's file changes once
    later = watch.wait_for(7)[4:]
    assert sorted((w[0], w[1], w[2]) for w in map(str.split, later)) == [
        ("MODIFIED", "bert-serving", "Succeeded"), ("MODIFIED", "llm-finetune", "Succeeded"),
        ("MODIFIED", "resnet50-4gpu", "Succeeded"),
    ]  # fmt: skip
    assert gputwin(state, "delete", "gpujob", "bert-serving")[0] == 0
    assert watch.wait_for(8)[7].split()[:2] == ["DELETED", "bert-serving"]
    code, err = watch.interrupt()
    assert code == 0 and "Traceback" not in err and "Aborted" not in err, err


PROBE = """apiVersion: gputwin.io/v1alpha1
kind: GPUJob
metadata: {{name: probe, namespace: default, labels: {{n: "{n}"}}}}
spec: {{taskType: train, gpus: 1, user: test, durationSeconds: 60}}
"""


def wait_until_watching(watch: Watch, state: Path, tmp_path: Path) -> None:
    """--watch-only prints nothing until something changes: change a probe job until a line comes."""
    end, n = time.monotonic() + DEADLINE, 0
    while watch.lines.empty():
        assert time.monotonic() < end, f"--watch-only printed nothing within {DEADLINE} s of changes"
        n += 1
        (tmp_path / "probe.yaml").write_text(PROBE.format(n=n))
        assert gputwin(state, "apply", "-f", str(tmp_path / "probe.yaml"))[0] == 0
        time.sleep(0.1)  # pacing the probes, not an assertion: the loop waits for the watch's line


def test_watch_only_skips_the_listing_and_names_output_follows_applies(state: Path, tmp_path: Path) -> None:
    assert gputwin(state, "apply", "-f", JOBS)[0] == 0  # there before the watch: not printed
    watch = Watch(state, "gpujob", "--watch-only", "-o", "name")
    wait_until_watching(watch, state, tmp_path)
    assert gputwin(state, "delete", "gpujob", "bert-serving")[0] == 0
    lines = watch.wait_for(2)
    while "gpujob.gputwin.io/bert-serving" not in watch.seen:  # a last probe's line may come first
        lines = watch.wait_for(len(watch.seen) + 1)
    assert set(lines) == {"gpujob.gputwin.io/probe", "gpujob.gputwin.io/bert-serving"}
    code, err = watch.interrupt()
    assert code == 0 and err == "", err


def test_watch_of_a_selector_shows_only_matching_objects(state: Path) -> None:
    watch = Watch(state, "gpujobs", "-w", "-l", "team=nlp", "-o", "name")
    assert gputwin(state, "apply", "-f", JOBS)[0] == 0
    assert watch.wait_for(1) == ["gpujob.gputwin.io/llm-finetune"]
    assert gputwin(state, "run")[0] == 0
    assert watch.wait_for(2)[1] == "gpujob.gputwin.io/llm-finetune"  # its own change, no other job's
    code, err = watch.interrupt()
    assert code == 0 and "Traceback" not in err, err


def test_request_timeout_ends_the_watch_with_exit_0(state: Path) -> None:
    watch = Watch(state, "gpupartitions", "-w", "--request-timeout", "1s")
    assert watch.proc.wait(timeout=DEADLINE) == 0  # stdout is the pump thread's to read
    assert watch.proc.stderr is not None and "Traceback" not in watch.proc.stderr.read()
    lines = watch.wait_for(3)
    assert lines[0].split()[0] == "NAME" and sorted(line.split()[0] for line in lines[1:]) == ["infer", "train"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["gpujobs,gpupartitions", "-w"], "error: you may only specify a single resource type"),
        (["gputwin", "-w"], "error: you may only specify a single resource type"),
        (["gpujobs", "-w", "--request-timeout", "soon"], "error: --request-timeout: invalid duration 'soon'"),
    ],
    ids=["two-kinds", "category", "bad-timeout"],
)
def test_watch_refusals_are_one_line_and_exit_1(state: Path, args: list[str], message: str) -> None:
    code, out, err = gputwin(state, "get", *args)
    assert (code, out) == (1, "") and err.startswith(message) and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", None), ("30", 30.0), ("1.5", 1.5), ("30s", 30.0), ("5m", 300.0), ("1h30m", 5400.0), ("250ms", 0.25)],
    ids=["never", "seconds", "fraction", "s", "m", "h-m", "ms"],
)
def test_request_timeout_reads_kubectl_durations(text: str, seconds: float | None) -> None:
    assert parse_timeout(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "5 m", "-1s", "1d", "s"], ids=["empty", "word", "space", "negative",
                                                                        "days", "unit-only"])  # fmt: skip
def test_request_timeout_refuses_what_kubectl_refuses(text: str) -> None:
    with pytest.raises(UserError, match="--request-timeout"):
        parse_timeout(text)


A, A2, B = {"v": 1}, {"v": 2}, {"v": 3}


@pytest.mark.parametrize(
    ("before", "after", "events"),
    [
        ({}, {"a": A}, [("ADDED", A)]),
        ({"a": A}, {"a": A}, []),  # a file rewritten with the same content prints nothing
        ({"a": A}, {"a": A2}, [("MODIFIED", A2)]),
        ({"a": A, "b": B}, {"a": A}, [("DELETED", B)]),
        ({"a": A}, {"b": B}, [("ADDED", B), ("DELETED", A)]),
    ],
    ids=["added", "unchanged", "modified", "deleted", "replaced"],
)
def test_changes_are_per_object_content(before: dict, after: dict, events: list) -> None:
    assert changes(before, after) == events

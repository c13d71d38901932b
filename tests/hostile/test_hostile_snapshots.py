"""Hostile snapshot files through `gputwin forecast --snapshot`: each is a one-line error naming its field.

Same contract as the hostile traces (test_hostile_traces.py): exit status 2, exactly one stderr line
`error: FILE[:LINE]: FIELD: reason`, no traceback, within the refusal budget; inputs that would
block or exhaust memory without their bound run in a subprocess with a timeout and a memory cap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from budget import REFUSAL_CPU_SECONDS, timed
from click.testing import CliRunner
from test_hostile_traces import BIG, _limit_memory, assert_one_line_error

from gputwin.cli.main import cli
from gputwin.twin import snapfile

GOOD = {
    "kind": "gputwin-snapshot", "version": 1, "taken_at": 100, "source": "test", "topology": "t",
    "switches": [{"name": "s"}], "nodes": [{"name": "n1", "gpus": 8, "switch": "s"}],
    "partitions": [{"name": "p", "nodes": ["n1"]}],
    "running": [{"job_id": "r", "partition": "p", "submit": 0, "start": 10, "slots": [["n1", 4]]}],
    "pending": [{"job_id": "q", "partition": "p", "submit": 50, "gpus": 8}],
}  # fmt: skip


def good(**changes: object) -> str:
    return json.dumps(GOOD | changes)


def pending(**fields: object) -> str:
    return good(pending=[{"job_id": "q", "partition": "p", "submit": 50, "gpus": 8} | fields])


# (content, FIELD the error must name, LINE it must give or None)
CASES = [
    pytest.param('{\n"kind": "gputwin-snapshot",\n', "document", 3, id="truncated-json"),
    pytest.param("", "document", 1, id="empty"),
    pytest.param("[1, 2]", "kind", None, id="a-list"),
    pytest.param(good(kind="GPUJob"), "kind", None, id="other-kind"),
    pytest.param(good(version=2), "version", None, id="newer-version"),
    pytest.param(json.dumps({k: v for k, v in GOOD.items() if k != "version"}), "version", None, id="no-version"),
    pytest.param(good(extra=1), "extra", None, id="unknown-field"),
    pytest.param(good(taken_at="100"), "taken_at", None, id="string-for-a-number"),
    pytest.param(good(taken_at=True), "taken_at", None, id="bool-for-a-number"),
    pytest.param(good().replace('"taken_at": 100', '"taken_at": 1e999'), "taken_at", None, id="infinite-time"),
    pytest.param(good().replace('"taken_at": 100', '"taken_at": NaN'), "document", None, id="nan-literal"),
    pytest.param(good().replace('"taken_at": 100', f'"taken_at": {BIG}'), "document", None, id="5000-digit-number"),
    pytest.param(pending(gpus=-1), "pending[0].gpus", None, id="negative-gpus"),
    pytest.param(pending(gpus=1 << 40), "pending[0].gpus", None, id="huge-gpus"),
    pytest.param(pending(job_id=""), "pending[0].job_id", None, id="empty-job-id"),
    pytest.param(pending(job_id="x" * 10_000), "pending[0].job_id", None, id="10k-job-id"),
    pytest.param(pending(time_limit=-5), "pending[0].time_limit", None, id="negative-limit"),
    pytest.param(good(running=[{**GOOD["running"][0], "slots": [["n1", 9]]}]), "running[0].slots", None,  # type: ignore[index]
                 id="more-gpus-than-the-node"),
    pytest.param(good(running=[{**GOOD["running"][0], "slots": [["n1"]]}]), "running[0].slots[0][1]", None,  # type: ignore[index]
                 id="slot-without-gpus"),
    pytest.param("[" * 100_000 + "]" * 100_000, "document", None, id="nested-100k-deep"),
    pytest.param(b"\xff\xfe{}".decode("latin-1"), "document", None, id="not-utf8"),
]  # fmt: skip


def invoke(*args: str) -> tuple[int, str, float]:
    result, seconds = timed(lambda: CliRunner().invoke(cli, ["forecast", *args]))
    return result.exit_code, result.stderr, seconds


@pytest.mark.parametrize(("content", "field", "line"), CASES)
def test_hostile_snapshot_is_one_line_error_naming_the_field(tmp_path: Path, content: str, field: str,
                                                             line: int | None) -> None:  # fmt: skip
    path = tmp_path / "snap.json"
    path.write_bytes(content.encode("latin-1" if field == "document" and "\xff" in content else "utf-8"))
    status, stderr, seconds = invoke("--snapshot", str(path))
    assert_one_line_error(status, stderr, str(path) if line is None else f"{path}:{line}", field)
    assert len(stderr) < 1000
    assert seconds < REFUSAL_CPU_SECONDS


def test_the_good_file_forecasts(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_text(good())
    status, stderr, _ = invoke("--snapshot", str(path), "--samples", "2", "--json")
    assert status == 0, stderr


def test_a_file_over_the_bound_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapfile, "MAX_BYTES", 100)
    path = tmp_path / "snap.json"
    path.write_text(good())
    status, stderr, _ = invoke("--snapshot", str(path))
    assert_one_line_error(status, stderr, str(path), "document")
    assert "larger than" in stderr


def run_cli(*args: str) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-c", "from gputwin.cli.main import main; main()", "forecast", *args],
                          capture_output=True, text=True, timeout=30, check=False,
                          preexec_fn=_limit_memory)  # fmt: skip
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "sparse-3GiB", "missing"])
def test_what_is_no_snapshot_file_is_refused_without_blocking(tmp_path: Path, kind: str) -> None:
    path = {"dev-zero": Path("/dev/zero")}.get(kind, tmp_path / "snap")
    if kind == "fifo":
        os.mkfifo(path)  # no writer ever opens it
    elif kind == "directory":
        path.mkdir()
    elif kind == "sparse-3GiB":
        with path.open("wb") as out:
            out.truncate(3 << 30)
    status, stderr = run_cli("--snapshot", str(path))
    assert status == 2 and len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr[:2000]
    assert stderr.startswith(f"error: {path}"), stderr[:500]

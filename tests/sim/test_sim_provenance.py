"""A report's provenance: the inputs' sha256 (streamed), the build, the UTC date, the command line."""

from __future__ import annotations

import hashlib
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from gputwin import __version__
from gputwin.sim import provenance as module
from gputwin.sim.provenance import provenance, sha256_file


@pytest.mark.parametrize("size", [0, 1, module.BLOCK - 1, module.BLOCK, 3 * module.BLOCK + 7],
                         ids=["empty", "one-byte", "block-minus-one", "one-block", "blocks-and-a-bit"])  # fmt: skip
def test_the_streamed_sha256_is_the_whole_files(tmp_path: Path, size: int) -> None:
    data = bytes(i % 251 for i in range(size))
    path = tmp_path / "trace.csv"
    path.write_bytes(data)
    assert sha256_file(path) == (hashlib.sha256(data).hexdigest(), size)


def test_the_header_names_inputs_build_utc_date_and_the_command_quoted(tmp_path: Path) -> None:
    trace, cluster = tmp_path / "t.csv", tmp_path / "c.yaml"
    trace.write_text("a\n")
    cluster.write_text("b\n")
    now = datetime(2026, 3, 1, 14, 30, 5, 123456, tzinfo=timezone(timedelta(hours=2)))
    got = provenance(trace, cluster, "pure Python core", now, ["gputwin", "compare", "--out", "my dir"])
    lines = dict(got.lines())
    assert got.date == "2026-03-01T12:30:05Z"
    assert lines["gputwin"] == f"{__version__} (pure Python core)"
    assert lines["command"] == "gputwin compare --out 'my dir'"
    assert hashlib.sha256(b"a\n").hexdigest() in lines["trace"] and str(trace) in lines["trace"]
    assert got.to_json()["cluster"] == {"path": str(cluster), "sha256": hashlib.sha256(b"b\n").hexdigest(), "bytes": 2}


@pytest.mark.parametrize("kind", ["fifo", "gone"], ids=["named-pipe-not-re-read", "deleted-since"])
def test_an_input_that_cannot_be_hashed_is_said_so_and_not_waited_for(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "trace.csv"
    if kind == "fifo":
        os.mkfifo(path)  # opening it to read would block forever: it must not be opened
    got = module.input_file(path)
    assert got.sha256.startswith("unavailable: ") and got.bytes == 0

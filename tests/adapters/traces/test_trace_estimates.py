"""The estimates reader (`gputwin.adapters.traces.estimates`): what a `jobname,priority` file
becomes, and the one located error each kind of bad file gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputwin.adapters.traces import TraceError
from gputwin.adapters.traces.estimates import read_estimates
from gputwin.core.model import JobSpec

JOBS = [JobSpec("1", 0, 10, 2, "vc", name="a"), JobSpec("2", 0, 10, 1, "vc", name="b")]


@pytest.mark.parametrize(
    ("content", "table", "unused"),
    [
        pytest.param("jobname,priority\na,5\nb,-7\n", {"a": 5.0, "b": -7.0}, 0, id="negative-kept"),
        pytest.param("priority,jobname\n1.5,a\n0,b\n", {"a": 1.5, "b": 0.0}, 0, id="columns-any-order-floats"),
        pytest.param("jobname,priority,x\na,5,?\nb,6,?\nc,7,?\n", {"a": 5.0, "b": 6.0, "c": 7.0}, 1,
                     id="extra-column-and-unused-row"),
        pytest.param("\ufeffjobname,priority\r\na,1e3\r\n\r\nb,+2\r\n", {"a": 1000.0, "b": 2.0}, 0,
                     id="bom-crlf-blank-line-exponent"),
        pytest.param("jobname,priority\n a ,5\nb, 6 \n", {"a": 5.0, "b": 6.0}, 0, id="spaces-stripped"),
    ],
)  # fmt: skip
def test_an_estimates_file_is_read_by_job_name(tmp_path: Path, content: str, table: dict[str, float],
                                               unused: int) -> None:  # fmt: skip
    path = tmp_path / "e.csv"
    path.write_text(content, encoding="utf-8")
    got = read_estimates(path, JOBS)
    assert (dict(got.estimator.by_name), got.unused) == (table, unused)
    assert got.describe() == {"path": str(path), "rows": len(table), "unused": unused}


@pytest.mark.parametrize(
    ("content", "line", "field", "reason"),
    [
        pytest.param("jobname,priority\na,5\nb,6\na,7\n", 4, "jobname", "'a' again (first on line 2)", id="duplicate"),
        pytest.param("jobname,priority\na,5\n", None, "jobname",
                     "no row for 1 of the trace's 2 jobs, first job '2' (jobname 'b')", id="missing-job"),
        pytest.param("jobname\na\nb\n", 1, "priority", "missing required column (header has: jobname)",
                     id="no-priority-column"),
        pytest.param("jobname,priority\na,soon\nb,1\n", 2, "priority", "not a number: 'soon'", id="not-a-number"),
        pytest.param("jobname,priority\na,nan\nb,1\n", 2, "priority", "not a number: 'nan'", id="nan"),
        pytest.param("jobname,priority\na,1e13\nb,1\n", 2, "priority", "out of range: '1e13' (at most 1e+12 s either way)",
                     id="too-large"),
        pytest.param("jobname,priority\na,-1e999\nb,1\n", 2, "priority", "out of range: '-1e999' (at most 1e+12 s either way)",
                     id="minus-infinity"),
        pytest.param("jobname,priority\n,5\nb,1\n", 2, "jobname", "empty", id="empty-name"),
        pytest.param("jobname,priority\na\nb,1\n", 2, "row", "expected 2 fields, got 1", id="short-row"),
        pytest.param("", None, "file", "empty file (no header line)", id="empty-file"),
        pytest.param("jobname,priority\n", 1, "file", "no records after the header", id="header-only"),
    ],
)  # fmt: skip
def test_a_bad_estimates_file_is_one_located_error(tmp_path: Path, content: str, line: int | None, field: str,
                                                   reason: str) -> None:  # fmt: skip
    path = tmp_path / "e.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TraceError) as caught:
        read_estimates(path, JOBS)
    assert (caught.value.path, caught.value.line, caught.value.field, caught.value.reason) == (
        str(path), line, field, reason)  # fmt: skip

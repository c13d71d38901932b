"""The Helios reader's fast path against the field-by-field one it stands in for: same jobs, skips, errors.

`helios._converter` builds the common row (plain digits, plain seconds) in one step and hands every
other row to `_checked_converter`; each generated file here is read both ways (the checked path
forced by putting it in `_converter`'s place), with and without `skip_invalid`.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputwin.adapters.traces import TraceError, iter_jobs
from gputwin.adapters.traces import helios

# Numbers as traces write them, and as they should not: signs, spaces, floats, exponents, non-ASCII
# digits (str.isdigit accepts them, int() reads them, the field parsers refuse them), too long, too
# large, zero, a wall-clock date (which the first row decides for the whole file).
NUMBERS = ["0", "1", "8", "007", "196", "20150", "100000", "100001", "+5", "-1", " 5", "5 ", "5.0", "1e3", ".5",
           "", " ", "\u0663", "\u00b2", "1_000", "9" * 40, "9" * 41, "315576000", "315576001", "253402300799",
           "253402300800", "2020-01-01 00:00:00", "nan", "inf"]  # fmt: skip
NAMES = ["5620", "job5620", "", " ", " 6214e9 ", "\u00e9t\u00e9"]
OPTIONAL = ["", " ", "1", "2", "0", "500", "1000", "x"]


@st.composite
def files(draw: st.DrawFn) -> str:
    extra = draw(st.sampled_from([(), ("node_num",), ("gpu_milli",), ("node_num", "gpu_milli")]))
    header = list(helios.HEADER) + list(extra)
    if draw(st.booleans()):
        header.remove(draw(st.sampled_from(["jobname", "state"])))
    plain = st.sampled_from(NUMBERS[:7])
    rows = []
    for _ in range(draw(st.integers(1, 8))):
        values = {"job_id": draw(st.sampled_from(NAMES[:2])), "user": draw(st.sampled_from(NAMES)),
                  "vc": draw(st.sampled_from(NAMES[:2])), "jobname": draw(st.sampled_from(NAMES)),
                  "gpu_num": draw(plain), "state": draw(st.sampled_from(["", "COMPLETED", " FAILED "])),
                  "submit_time": draw(plain), "duration": draw(plain), "node_num": "", "gpu_milli": ""}  # fmt: skip
        if draw(st.booleans()):  # a plain row (the fast path's), or one with a field from anywhere
            hostile = draw(st.sampled_from(["job_id", "vc", "gpu_num", "submit_time", "duration", *extra]))
            pool = NAMES if hostile in ("job_id", "vc") else OPTIONAL if hostile in extra else NUMBERS
            values[hostile] = draw(st.sampled_from(pool))
        rows.append([values[name] for name in header])
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *rows])
    return out.getvalue()


def _read(path: Path, skip_invalid: bool) -> tuple[object, list[tuple[str, int]]]:
    skipped: Counter[str] = Counter()
    try:
        jobs: object = list(iter_jobs(path, "helios", skip_invalid=skip_invalid, skipped=skipped))
    except TraceError as exc:
        jobs = str(exc)
    return jobs, sorted(skipped.items())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=files(), skip_invalid=st.booleans())
def test_fast_path_reads_like_the_checked_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, skip_invalid: bool
) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text(text, encoding="utf-8", newline="")
    fast = _read(path, skip_invalid)
    with monkeypatch.context() as patch:
        patch.setattr(helios, "_converter", helios._checked_converter)
        checked = _read(path, skip_invalid)
    assert fast == checked


def test_the_fast_path_takes_the_plain_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe that the comparison above compares something: plain rows after the first skip the checks."""
    path = tmp_path / "jobs.csv"
    path.write_text("job_id,user,vc,gpu_num,submit_time,duration\n1,u,a,1,0,5\n2,u,a,2,3,7\n3,u,a,+1,4,8\n")
    calls: list[int] = []
    checked = helios._checked_converter

    def counting(ctx: object, table: object) -> object:
        convert = checked(ctx, table)  # type: ignore[arg-type]
        return lambda row, seq: calls.append(seq) or convert(row, seq)

    monkeypatch.setattr(helios, "_checked_converter", counting)
    jobs = list(iter_jobs(path, "helios"))
    assert [(j.job_id, j.gpus, j.submit, j.duration) for j in jobs] == [("1", 1, 0.0, 5.0), ("2", 2, 3.0, 7.0),
                                                                        ("3", 1, 4.0, 8.0)]  # fmt: skip
    assert calls == [0, 2]  # the first row (the file's clock is not known yet) and the signed one

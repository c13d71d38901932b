"""The fast `sacct -P` reader against the csv-based one it replaces: same jobs, skips and errors.

`read_sacct` splits lines itself and hands files the csv module would reject (a NUL byte) to the
csv-based path; each case here is read both ways (the csv path forced by disabling `_scan`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from gputwin.adapters.traces import TraceError, iter_jobs, read_trace
from gputwin.adapters.traces import sacct as sacct_reader

HEADER = "JobID|JobName|User|Partition|State|Submit|Start|End|AllocTRES|NNodes|NodeList"
JOB = "7|train|alice|gpu|COMPLETED|2026-01-01T00:00:10|2026-01-01T00:00:20|2026-01-01T01:00:20|gres/gpu=8,node=1|1|g1"
STEP = (
    "7.batch|batch||gpu|COMPLETED|2026-01-01T00:00:20|2026-01-01T00:00:20|2026-01-01T01:00:20|gres/gpu=8|1|g1"
)
OTHER = (
    "8_1|sweep|bob|dbg|CANCELLED by 0|2026-01-01T00:00:10|2026-01-01T00:00:59|2026-01-01T00:01:30||2|g[2-3]"
)
GRES = "9|x|carol|gpu|FAILED|2026-01-01 00:00:11|2026-01-01T00:00:21|2026-01-01T00:00:30|gres/gpu:a=1,gres/gpu:b=2|1|g4"

ARABIC_ONE = "T00:0\u0661:20"  # int() reads it, the time pattern (ASCII digits only) does not

CASES = {
    "plain": f"{HEADER}\n{JOB}\n{STEP}\n{OTHER}\n{GRES}\n",
    "crlf, no final newline": f"{HEADER}\r\n{JOB}\r\n{STEP}\r\n{GRES}",
    "lone CR": f"{HEADER}\r{JOB}\r{GRES}\r",
    "sacct -p, BOM, blank lines": f"\ufeff\n \n{HEADER}|\n{JOB}|\n\n{GRES}|\n",
    "requeued twice": f"{HEADER}\n{JOB}\n{GRES}\n{JOB.replace('00:10', '00:11')}\n{JOB.replace('00:10', '00:12')}\n",
    "NUL byte": f"{HEADER}\n{JOB}\n{GRES}\0\n",  # read by the csv path (accepted since Python 3.11)
    "wrong width": f"{HEADER}\n{JOB}\n7|a|b\n{GRES}\n",
    "bad second after a cached minute": f"{HEADER}\n{JOB}\n{JOB.replace('T00:00:20', 'T00:00:60').replace('7|', '5|')}\n",
    "hour 24": f"{HEADER}\n{GRES}\n{GRES.replace('T00:00:21', 'T24:00:21').replace('9|', '6|')}\n",
    "Feb 30": f"{HEADER}\n{GRES.replace('2026-01-01T00:00:21', '2026-02-30T00:00:21')}\n",
    "unicode digit": f"{HEADER}\n{JOB}\n{JOB.replace('T00:00:20', ARABIC_ONE).replace('7|', '4|')}\n",
    "negative duration": f"{HEADER}\n{JOB.replace('T01:00:20', 'T00:00:00')}\n{GRES}\n",
    "still running, never started": f"{HEADER}\n{JOB.replace('2026-01-01T01:00:20', 'Unknown')}\n"
    f"{GRES.replace('2026-01-01T00:00:21', 'None')}\n",
    "empty job id": f"{HEADER}\n{JOB}\n {JOB[1:]}\n",
    "bad TRES": f"{HEADER}\n{JOB.replace('gres/gpu=8', 'gres/gpu=x')}\n{GRES}\n",
    "no submit time": f"{HEADER}\n{JOB.replace('2026-01-01T00:00:10', 'Unknown')}\n",
    "header only": f"{HEADER}\n\n",
    "empty": "",
    "JobID not first": "User|JobID|"
    + HEADER.replace("JobID|", "").replace("User|", "")
    + "\n"
    + "\n".join(
        f"{r.split('|')[2]}|{r.split('|')[0]}|" + "|".join(r.split("|")[1:2] + r.split("|")[3:])
        for r in (JOB, STEP, OTHER, GRES)
    )
    + "\n",
    "no Submit column": HEADER.replace("Submit|", "")
    + "\n"
    + "\n".join("|".join(f for i, f in enumerate(r.split("|")) if i != 5) for r in (JOB, OTHER))
    + "\n",
}


def _read(path: Path, skip_invalid: bool) -> tuple[object, list[tuple[str, int]]]:
    skipped: Counter[str] = Counter()
    try:
        jobs: object = list(iter_jobs(path, "sacct", skip_invalid=skip_invalid, skipped=skipped))
    except TraceError as exc:
        jobs = str(exc)
    return jobs, list(skipped.items())


@pytest.mark.parametrize("skip_invalid", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_path_reads_like_the_csv_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, skip_invalid: bool
) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text(CASES[case], encoding="utf-8", newline="")
    fast = _read(path, skip_invalid)
    monkeypatch.setattr(sacct_reader, "_scan", lambda ctx: None)
    assert fast == _read(path, skip_invalid)


def test_read_trace_rebases_in_place_like_replace(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text(CASES["plain"], encoding="utf-8")
    result = read_trace(path, "sacct")
    assert [(j.job_id, j.submit) for j in result.jobs] == [("7", 0.0), ("9", 1.0)]
    assert result.origin == 1767225610.0 and result.skipped == {"job steps": 1, "zero GPUs": 1}

"""Per-job run-time estimates in the reference simulator's format, for `simulate --estimates FILE`.

The layout of HeliosArtifact's `estimators/Philly_lgb.csv`: a header with `jobname` and `priority`
(other columns are ignored), one row per job. `priority` is the job's estimated run time in
seconds; QSSF ranks by it times the job's GPUs. Decisions:

- `priority` is any finite number up to `MAX_ESTIMATE` in magnitude, negative included: the
  reference's files hold `int()` of a perturbed duration, about 15 % of them <= 0.
- A `jobname` given twice is refused at its second line (the reference takes the first match
  silently; a duplicate means the file was not made for one trace of unique names).
- Rows naming no job of the trace are ignored and counted (`unused`): the reference looks jobs up
  by name, and a file may be made for a larger trace, e.g. one with the zero-GPU jobs the trace
  readers skip.
- A trace job with no row stops the run before it starts, naming the first such job (the
  reference fails with an IndexError the first time it ranks that job).
- Trace jobs that share a name share its row, as they do in the reference (rows are matched by
  `jobname`, not `job_id`: its Philly mode matches names).

Bounded like the trace readers: lines of at most `MAX_LINE_CHARS` characters (the shared `Table`),
at most `MAX_ESTIMATES` rows, numbers of at most 40 characters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gputwin.core.history import TableEstimator
from gputwin.core.model import JobSpec

from .errors import FieldError, TraceError
from .fields import _FLOAT, _show, _short, parse_name
from .table import ReadContext, Row, Table, open_text

COLUMNS = ("jobname", "priority")
MAX_ESTIMATES = 5_000_000  # rows: a few hundred bytes each while read, so at most ~2 GB
MAX_ESTIMATE = 1e12  # seconds (~31,700 years): exact as a float, far above 100x any real run


@dataclass(frozen=True)
class Estimates:
    """The table read from `path`, as the scheduler's estimator, and what of it the trace uses."""

    path: Path
    estimator: TableEstimator
    unused: int  # rows naming no job of the trace

    def describe(self) -> dict[str, object]:
        """What `simulate --json` reports about the file."""
        return {"path": str(self.path), "rows": len(self.estimator.by_name), "unused": self.unused}


def read_estimates(path: Path, jobs: Sequence[JobSpec]) -> Estimates:
    """The estimates of `path` for `jobs`; TraceError (`PATH[:LINE]: FIELD: reason`) otherwise."""
    table = _read_table(ReadContext(path))
    names = {job.name for job in jobs}
    missing = [job for job in jobs if job.name not in table]
    if missing:
        first = missing[0]
        reason = (f"no row for {len(missing):,} of the trace's {len(jobs):,} jobs, "
                  f"first job {first.job_id!r} (jobname {first.name!r})")  # fmt: skip
        raise TraceError(str(path), None, "jobname", reason)
    unused = sum(1 for name in table if name not in names)
    return Estimates(path, TableEstimator(table), unused)


def _read_table(ctx: ReadContext) -> dict[str, float]:
    with open_text(ctx) as stream:
        table = Table.open(ctx, stream, ",")
        table.require(*COLUMNS)
        name_at, value_at = (table.columns[c] for c in COLUMNS)
        rows: dict[str, tuple[float, int]] = {}  # jobname -> (estimate, line)
        for line, row in table.rows():
            try:
                name, value = _row(row, name_at, value_at)
                if name in rows:
                    raise FieldError("jobname", f"{_show(name)} again (first on line {rows[name][1]})")
                if len(rows) >= MAX_ESTIMATES:
                    raise FieldError("row", f"more than {MAX_ESTIMATES:,} estimates")
            except FieldError as exc:
                raise ctx.error(line, exc) from None
            rows[name] = (value, line)
        return {name: value for name, (value, _) in rows.items()}


def _row(row: Row | FieldError, name_at: int, value_at: int) -> tuple[str, float]:
    if isinstance(row, FieldError):
        raise row
    return parse_name(row[name_at], "jobname"), _estimate(row[value_at])


def _estimate(text: str) -> float:
    value = _short(text, "priority")
    if not _FLOAT.fullmatch(value):
        raise FieldError("priority", f"not a number: {_show(text)}")
    seconds = float(value)
    if not math.isfinite(seconds) or abs(seconds) > MAX_ESTIMATE:
        raise FieldError("priority", f"out of range: {_show(text)} (at most {MAX_ESTIMATE:.0e} s either way)")
    return seconds

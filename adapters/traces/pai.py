"""Alibaba PAI 2020 (`cluster-trace-gpu-v2020` of github.com/alibaba/clusterdata): task and job tables.

`--trace` is a `pai_task_table.csv` (`job_name,task_name,inst_num,status,start_time,end_time,
plan_cpu,plan_mem,plan_gpu,gpu_type`); the release ships headers in separate `.header` files, so
a first line that is not this header is read as a record. The `pai_job_table.csv`
(`job_name,inst_id,user,status,start_time,end_time`) beside it -- the same name with `task_table`
replaced by `job_table` -- is joined by `job_name` when it exists, for the user and the job's
submission time. Decisions, following the trace's own analysis (`analysis/utils.py`: a table of
tasks joined with their jobs):

- one task row is one gputwin job (a job's `ps` and `worker` tasks have their own GPUs and times);
  job_id = `job_name/task_name`, name = `task_name`, task_type (the partition) = `gpu_type`
  (T4, P100, V100, V100M32, MISC), "default" when empty.
- GPUs: `plan_gpu` is percent of one GPU per instance (50.0 is half a GPU), `inst_num` instances.
  One instance under 100 is a GPU share: `gpus=1, gpu_milli=round(plan_gpu * 10)` (at least 1,
  `gputwin.core.sharing`), counted under "fractional GPU kept as a share". Otherwise each instance
  takes `ceil(plan_gpu / 100)` whole GPUs and the job `inst_num` times that; a `plan_gpu` that is
  not a multiple of 100 is then counted under "fractional GPU rounded up" (notes: jobs are kept). The fraction itself is kept in
  `PaiTask.plan_gpu` (`iter_tasks` streams those) for the tenancy work's milli-GPUs. Empty or 0 `plan_gpu`
  (CPU tasks such as parameter servers): skipped, "zero GPUs"; `inst_num` 0: "zero instances".
- submit = the job's `start_time` (its submission; the gap to the task's start is the wait the
  paper measures), or the task's `start_time` when the job is not in the job table (counted under
  "no job record", kept) or has a later time; run = task `end_time - start_time`. Times are
  seconds minus a constant, re-based by `read_trace` to the first kept task.
- no task `start_time` (status Waiting): skipped, "never started"; no `end_time` (Running at the
  snapshot): skipped, "still running". state: Terminated -> COMPLETED, Failed -> FAILED,
  Running -> RUNNING, Waiting -> PENDING, others upper-cased. user = the job's `user`, else "".

Memory: the task table streams; the job table is held as one `job_name -> (user, submit)` entry
per job, at most `MAX_JOBS` of them (the real table has 1.05 million). Passing the job table as
`--trace` is refused: it has no GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from gputwin.core.model import JobSpec

from .errors import FieldError, TraceError
from .fields import MAX_DURATION, MAX_GPUS, MAX_NUMBER_CHARS, check_seconds, parse_name, parse_seconds
from .table import ReadContext, Row, Table, convert_rows, open_text

TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")  # fmt: skip
JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
MAX_JOBS = 4_000_000
MAX_INSTANCES = 100_000
MAX_PLAN_GPU = 100.0 * MAX_GPUS
ZERO_GPUS = "zero GPUs"
ZERO_INSTANCES = "zero instances"
FRACTIONAL = "fractional GPU rounded up"
SHARE = "fractional GPU kept as a share"
NO_JOB = "no job record"
NEVER_STARTED = "never started"
STILL_RUNNING = "still running"
_STATES = {"Terminated": "COMPLETED", "Failed": "FAILED", "Running": "RUNNING", "Waiting": "PENDING"}

Jobs = dict[str, tuple[str, float]]


@dataclass(frozen=True, slots=True)
class PaiTask:
    """One task row as read, before whole-GPU rounding: `plan_gpu` is percent of a GPU per instance."""

    job_name: str
    task_name: str
    inst_num: int
    status: str
    start: float | None
    end: float | None
    plan_gpu: float
    gpu_type: str

    @property
    def gpu_milli(self) -> int:
        """GPUs per instance in thousandths (50.0 percent is 500), the unit of a milli-GPU core."""
        return round(self.plan_gpu * 10)


def read_pai(ctx: ReadContext) -> Iterator[JobSpec]:
    """Stream the GPU tasks of a PAI task table in file order, joined with the job table beside it."""
    ctx.clock.observe(True, "start_time")
    with open_text(ctx) as stream:
        table = _open(ctx, stream)
        jobs = _job_index(ctx)
        yield from convert_rows(ctx, table, lambda row, seq: _convert(ctx, _task(row), jobs, seq))


def iter_tasks(path: str | Path, *, skip_invalid: bool = False) -> Iterator[PaiTask]:
    """The task rows as read, fractions kept (`PaiTask.plan_gpu`), for callers that pack GPU shares."""
    ctx = ReadContext(Path(path), skip_invalid)
    with open_text(ctx) as stream:
        for line, row in _open(ctx, stream).rows():
            try:
                if isinstance(row, FieldError):
                    raise row
                yield _task(row)
            except FieldError as exc:
                if not skip_invalid:
                    raise ctx.error(line, exc) from None


def job_table_path(path: Path) -> Path | None:
    """The job table beside a task table: its name with the last `task_table` made `job_table`."""
    head, sep, tail = path.name.rpartition("task_table")
    return path.with_name(f"{head}job_table{tail}") if sep else None


def _open(ctx: ReadContext, stream: TextIO) -> Table:
    table = Table.open(ctx, stream, ",", TASK_COLUMNS)
    if table.header_line:
        if set(JOB_COLUMNS) <= set(table.columns) and "plan_gpu" not in table.columns:
            raise _job_table_given(ctx, table.header_line)
        table.require(*TASK_COLUMNS)
        return table
    return Table(ctx, table.columns, 0, _not_job_rows(ctx, table))


def _not_job_rows(ctx: ReadContext, table: Table) -> Iterator[tuple[int, Row, bool]]:
    """A headerless table's raw rows; a first row of six fields is a job table given by mistake."""
    rows = table._rows
    for line, row, nul in rows:
        if len(row) == len(JOB_COLUMNS):
            raise _job_table_given(ctx, line)
        yield line, row, nul
        yield from rows
        return


def _job_table_given(ctx: ReadContext, line: int) -> TraceError:
    return TraceError(ctx.name, line, "file", "a pai_job_table has no GPU counts: pass the "
                      "pai_task_table.csv beside it (the job table is joined by job_name)")  # fmt: skip


def _task(row: Row) -> PaiTask:
    return PaiTask(
        job_name=parse_name(row[0], "job_name"),
        task_name=row[1].strip(),
        inst_num=_whole(row[2], "inst_num", MAX_INSTANCES),
        status=row[3].strip(),
        start=_time(row[4], "start_time"),
        end=_time(row[5], "end_time"),
        plan_gpu=_plan_gpu(row[8]),
        gpu_type=row[9].strip(),
    )


def _convert(ctx: ReadContext, task: PaiTask, jobs: Jobs | None, seq: int) -> JobSpec | str:
    if task.plan_gpu == 0:
        return ZERO_GPUS
    if task.inst_num == 0:
        return ZERO_INSTANCES
    gpus = task.inst_num * math.ceil(task.plan_gpu / 100)
    if gpus > MAX_GPUS:
        raise FieldError("plan_gpu", f"{gpus:,} GPUs, more than the {MAX_GPUS:,} a job may have")
    if task.start is None:
        return NEVER_STARTED
    if task.end is None:
        return STILL_RUNNING
    if task.end < task.start:
        raise FieldError("end_time", "before start_time")
    job = None if jobs is None else jobs.get(task.job_name)
    # Notes, not skips: the task is kept, but the caller should know how it was read.
    if job is None and jobs is not None:
        ctx.skipped[NO_JOB] += 1
    milli = max(task.gpu_milli, 1) if task.inst_num == 1 and task.plan_gpu < 100 else 1000
    if milli < 1000:
        ctx.skipped[SHARE] += 1
    elif task.plan_gpu % 100:
        ctx.skipped[FRACTIONAL] += 1
    user, submitted = job if job is not None else ("", task.start)
    return JobSpec(
        job_id=f"{task.job_name}/{task.task_name}",
        submit=min(submitted, task.start),  # a job submitted after its task started is a clock glitch
        duration=check_seconds(task.end - task.start, "end_time", MAX_DURATION),
        gpus=gpus,
        task_type=task.gpu_type or "default",
        user=user,
        name=task.task_name,
        state=_STATES.get(task.status, task.status.upper() or "COMPLETED"),
        seq=seq,
        gpu_milli=milli,
    )


def _job_index(ctx: ReadContext) -> Jobs | None:
    """`job_name -> (user, submit)` of the job table beside the task table; None when there is none."""
    path = job_table_path(ctx.path)
    if path is None or not path.is_file():
        return None
    job_ctx = ReadContext(path, ctx.skip_invalid, ctx.skipped)
    jobs: Jobs = {}
    users: dict[str, str] = {}  # one string per user: a million jobs share a few thousand users
    with open_text(job_ctx) as stream:
        table = Table.open(job_ctx, stream, ",", JOB_COLUMNS)
        if table.header_line:
            table.require(*JOB_COLUMNS)
        name, user, start = (table.columns[key] for key in ("job_name", "user", "start_time"))
        for line, row in table.rows():
            try:
                if isinstance(row, FieldError):
                    raise row
                submitted = _time(row[start], "start_time")
                if submitted is not None:
                    text = row[user].strip()
                    jobs[parse_name(row[name], "job_name")] = (users.setdefault(text, text), submitted)
            except FieldError as exc:
                if not ctx.skip_invalid:
                    raise job_ctx.error(line, exc) from None
                ctx.skipped[f"invalid: job table {exc.field}"] += 1
            if len(jobs) > MAX_JOBS:
                raise TraceError(job_ctx.name, line, "file", f"more than {MAX_JOBS:,} jobs")
    return jobs


def _time(text: str, field: str) -> float | None:
    """A PAI time (seconds, written as `1739162.0`); None when empty (the event did not happen)."""
    return parse_seconds(text, field) if text.strip() else None


def _whole(text: str, field: str, maximum: int) -> int:
    """A count written as a float (`1.0`), as pandas wrote every number of the trace."""
    value = parse_seconds(text, field, maximum)
    if not value.is_integer():
        raise FieldError(field, f"not a whole number: {text.strip()[:MAX_NUMBER_CHARS]!r}")
    return int(value)


def _plan_gpu(text: str) -> float:
    """Percent of one GPU per instance; empty (CPU-only tasks) is 0."""
    return parse_seconds(text, "plan_gpu", MAX_PLAN_GPU) if text.strip() else 0.0

"""`sacct -P` (or `-p`) output with its header line: one job per line, pipe-separated.

The column set is whatever `--format` asked for. Required: `JobID`, `Start`, `End` or `Elapsed`,
and a GPU source (`AllocTRES`, `ReqTRES`, `AllocGRES` or `ReqGRES`, first non-empty wins).
Optional: `Submit`, `User`, `Account`, `Partition`, `JobName`, `State`, `NNodes`, `NodeList`;
anything else is ignored. Decisions:

- Times are ISO wall-clock read as UTC; `read_trace` re-bases them to the earliest kept submit.
  Without a `Submit` column, submit = Start (counted under "no Submit column: submit = Start").
- GPUs: `gres/gpu=N` (the untyped total) when present, else the sum of `gres/gpu:TYPE=N`;
  in GRES columns `gpu:N` / `gpu:TYPE:N`, same rule. Without either, SLURM GRES sharding's
  `gres/shard=N` (TRES columns) is a fraction of one GPU: gpu_milli = round(N x 1000 / S), S the
  cluster's shards per GPU (`read_trace(shards_per_gpu=S)`; unknown: one whole GPU, counted).
- Job steps (`123.batch`, `123.0`) are folded into their job: skipped, counted as "job steps".
  Array tasks `123_4` and het components `123+0` are separate jobs, ids kept as printed.
- `sacct -D` prints a requeued job once per run: the last record is kept, earlier ones are
  counted as "requeued duplicates" (a first pass over the file finds them, so output streams).
- Start `Unknown`/`None` -> "never started"; End `Unknown` -> "still running"; then no GPUs ->
  "zero GPUs" (times first: a pending job has an empty AllocTRES). All skipped and counted.
- duration = End - Start, or `Elapsed` (`[D-]HH:MM:SS`) when the dump has no End column.
- State keeps its first word (`CANCELLED by 0` -> CANCELLED); PREEMPTED and REQUEUED records keep
  the run they recorded. task_type = Partition ("default" without one); user = User, else Account
  (the `-X` samples carry no User; the account is the nearest fair-share group).

This module holds the entry point and the csv-based path; the `line.split("|")` fast path is in
sacct_fast.py, and the column names, skip reasons and TRES/GRES/node parsers both share are in
sacct_columns.py.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from gputwin.core.model import JobSpec

from .errors import FieldError
from .fields import MAX_DURATION, check_seconds, parse_elapsed, parse_name, parse_slurm_time
from .sacct_columns import (
    NEVER_STARTED,
    REQUEUED,
    STEPS,
    STILL_RUNNING,
    SUBMIT_FROM_START,
    ZERO_GPUS,
    _check_header,
    _gpus,
    _node_count,
    share,
)
from .sacct_fast import _read_fast, _scan
from .table import Converter, ReadContext, Row, Table, convert_rows, open_text


def read_sacct(ctx: ReadContext) -> Iterator[JobSpec]:
    """Stream the jobs of a `sacct -P` dump in file order (epoch-second submit times).

    `sacct -P` output is not quoted, so a line is `line.split("|")`: the fast path
    (sacct_fast.py) reads it that way. A file with a NUL byte or a line longer than the csv
    module's field limit goes through the csv-based path below instead, so both paths report it
    the same way (a NUL is refused naming its column; an over-long field is a `row` error).
    """
    ctx.clock.observe(True, "Submit")
    scanned = _scan(ctx)
    if scanned is not None:
        yield from _read_fast(ctx, *scanned)
        return
    repeated = _repeated_ids(ctx)
    with open_text(ctx) as stream:
        table = Table.open(ctx, stream, "|")
        _check_header(table)
        yield from convert_rows(ctx, table, _converter(ctx, table, repeated))


def _repeated_ids(ctx: ReadContext) -> dict[str, int]:
    """First pass: how many records each repeated job id has (`sacct -D` prints one per run)."""
    counts: Counter[str] = Counter()
    with open_text(ctx) as stream:
        table = Table.open(ctx, stream, "|")
        position = table.columns.get("JobID")
        if position is None:
            return {}  # the second pass reports the missing column
        for _, row in table.rows():
            if not isinstance(row, FieldError):
                counts[row[position].strip()] += 1
    return {job_id: n for job_id, n in counts.items() if n > 1 and "." not in job_id}


def _converter(ctx: ReadContext, table: Table, repeated: dict[str, int]) -> Converter:
    col = table.columns
    job_col, start_col, end_col = col["JobID"], col["Start"], col.get("End")

    def convert(row: Row, seq: int) -> JobSpec | str:
        job_id = parse_name(row[job_col], "JobID")
        if "." in job_id:
            return STEPS
        if job_id in repeated:
            repeated[job_id] -= 1
            if repeated[job_id] > 0:
                return REQUEUED  # a later record of this job is the one that ran to the end
        # Times first: a pending job's AllocTRES is empty, and it should count as never started.
        start = parse_slurm_time(row[start_col], "Start")
        if start is None:
            return NEVER_STARTED
        if end_col is None:
            duration = parse_elapsed(row[col["Elapsed"]], "Elapsed")
        else:
            end = parse_slurm_time(row[end_col], "End")
            if end is None:
                return STILL_RUNNING
            if end < start:
                raise FieldError("End", f"negative duration: End is {start - end:g} s before Start")
            duration = check_seconds(end - start, "End", MAX_DURATION)
        gpus, nodes, shards = _gpus(table, row)
        gpus, milli = share(gpus, shards, ctx.shards_per_gpu, ctx.skipped)
        if gpus == 0:
            return ZERO_GPUS
        nodes = nodes or _node_count(table, row)
        return JobSpec(
            job_id=job_id,
            submit=_submit(ctx, table, row, start),  # last: it may count a note
            duration=duration,
            gpus=gpus,
            task_type=table.get(row, "Partition").strip() or "default",
            user=table.get(row, "User" if "User" in col else "Account").strip(),
            name=table.get(row, "JobName"),
            state=(table.get(row, "State").split() or ["COMPLETED"])[0],
            num_nodes=nodes,
            seq=seq,
            gpu_milli=milli,
        )

    return convert


def _submit(ctx: ReadContext, table: Table, row: Row, start: float) -> float:
    if "Submit" not in table.columns:
        ctx.skipped[SUBMIT_FROM_START] += 1
        return start
    submit = parse_slurm_time(table.get(row, "Submit"), "Submit")
    if submit is None:
        raise FieldError("Submit", f"no submit time for a job that started: {table.get(row, 'Submit')!r}")
    return submit

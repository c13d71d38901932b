"""`sacct -P` (or `-p`) output with its header line: one job per line, pipe-separated.

The column set is whatever `--format` asked for. Required: `JobID`, `Start`, `End` or `Elapsed`,
and a GPU source (`AllocTRES`, `ReqTRES`, `AllocGRES` or `ReqGRES`, first non-empty wins).
Optional: `Submit`, `User`, `Account`, `Partition`, `JobName`, `State`, `NNodes`, `NodeList`;
anything else is ignored. Decisions:

- Times are ISO wall-clock read as UTC; `read_trace` re-bases them to the earliest kept submit.
  Without a `Submit` column, submit = Start (counted under "no Submit column: submit = Start").
- GPUs: `gres/gpu=N` (the untyped total) when present, else the sum of `gres/gpu:TYPE=N`;
  in GRES columns `gpu:N` / `gpu:TYPE:N`, same rule.
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
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

import hostlist

from gputwin.core.model import JobSpec

from .errors import FieldError
from .fields import parse_count, parse_elapsed, parse_name, parse_slurm_time
from .table import Converter, ReadContext, Row, Table, convert_rows, open_text

GPU_COLUMNS = ("AllocTRES", "ReqTRES", "AllocGRES", "ReqGRES")
STEPS = "job steps"
REQUEUED = "requeued duplicates"
NEVER_STARTED = "never started"
STILL_RUNNING = "still running"
ZERO_GPUS = "zero GPUs"
SUBMIT_FROM_START = "no Submit column: submit = Start"
_PARENS = re.compile(r"\([^)]*\)")
_DIGITS = re.compile(r"\d+", re.ASCII)


def read_sacct(ctx: ReadContext) -> Iterator[JobSpec]:
    """Stream the jobs of a `sacct -P` dump in file order (epoch-second submit times)."""
    ctx.clock.observe(True, "Submit")
    repeated = _repeated_ids(ctx)
    with open_text(ctx) as stream:
        table = Table.open(ctx, stream, "|")
        _check_header(table)
        yield from convert_rows(ctx, table, _converter(ctx, table, repeated))


def _check_header(table: Table) -> None:
    table.require("JobID", "Start")
    if "End" not in table.columns:
        table.require("Elapsed")
    if not any(name in table.columns for name in GPU_COLUMNS):
        table.require(" or ".join(GPU_COLUMNS))


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
            duration = end - start
        gpus, nodes = _gpus(table, row)
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


def _gpus(table: Table, row: Row) -> tuple[int, int]:
    """(GPUs, nodes) from the first non-empty GPU column; nodes is 0 when it does not say."""
    for name in GPU_COLUMNS:
        text = table.get(row, name).strip()
        if text:
            return _tres(text, name) if name.endswith("TRES") else (_gres(text, name), 0)
    return 0, 0


def _tres(text: str, field: str) -> tuple[int, int]:
    """`billing=2,cpu=2,gres/gpu:h100=16,gres/gpu=16,mem=8000M,node=2` -> (16, 2)."""
    total: int | None = None
    typed = nodes = 0
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise FieldError(field, f"not a TRES list (item without '='): {item!r}")
        if key == "gres/gpu":
            total = _tres_count(value, field, key)
        elif key.startswith("gres/gpu:"):
            typed += _tres_count(value, field, key)
        elif key == "node":
            nodes = _tres_count(value, field, key)
    return (typed if total is None else total), nodes


def _tres_count(value: str, field: str, key: str) -> int:
    try:
        return parse_count(value, field)
    except FieldError as exc:
        raise FieldError(field, f"{key}: {exc.reason}") from None


def _gres(text: str, field: str) -> int:
    """`gpu:4`, `gpu:h100:4(IDX:0-3)`, `gpu:h100:2,gpu:a100:2` -> the GPU total."""
    total: int | None = None
    typed = 0
    # Drop `(IDX:0,2-3)` first: its commas are not item separators.
    for item in _PARENS.sub("", text).split(","):
        kind, *rest = item.strip().split(":")
        if kind != "gpu":
            continue
        count = parse_count(rest.pop(), field) if rest and _DIGITS.fullmatch(rest[-1]) else 1
        if len(rest) > 1:
            raise FieldError(field, f"not a GRES item (want gpu[:TYPE][:N]): {item!r}")
        if rest:
            typed += count
        else:
            total = (total or 0) + count
    return typed if total is None else total


def _node_count(table: Table, row: Row) -> int:
    nnodes = table.get(row, "NNodes").strip()
    if nnodes:
        return parse_count(nnodes, "NNodes")
    nodelist = table.get(row, "NodeList").strip()
    if not nodelist or nodelist == "None assigned":
        return 0
    try:
        return len(hostlist.expand_hostlist(nodelist))
    except hostlist.BadHostlist as exc:
        raise FieldError("NodeList", f"not a hostlist ({exc}): {nodelist!r}") from None

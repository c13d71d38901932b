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

import csv
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TextIO

import hostlist

from gputwin.core.model import JobSpec

from .errors import FieldError, TraceError
from .fields import parse_count, parse_elapsed, parse_name, parse_slurm_time, parse_utc
from .table import Converter, ReadContext, Row, Table, _index, convert_rows, open_text

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
    """Stream the jobs of a `sacct -P` dump in file order (epoch-second submit times).

    `sacct -P` output is not quoted, so a line is `line.split("|")`: the fast path below reads it
    that way. A file with a NUL byte or a line longer than the csv module's field limit goes
    through the csv-based path instead, so whatever the csv module makes of it stays as it was.
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
    return _nodes_of(table.get(row, "NNodes"), table.get(row, "NodeList"))


def _nodes_of(nnodes: str, nodelist: str) -> int:
    nnodes = nnodes.strip()
    if nnodes:
        return parse_count(nnodes, "NNodes")
    nodelist = nodelist.strip()
    if not nodelist or nodelist == "None assigned":
        return 0
    try:
        return len(hostlist.expand_hostlist(nodelist))
    except hostlist.BadHostlist as exc:
        raise FieldError("NodeList", f"not a hostlist ({exc}): {nodelist!r}") from None


# --- the fast path ----------------------------------------------------------------------------------
#
# Same decisions as `_repeated_ids` + `_converter` + `convert_rows`, without the csv module and the
# per-row generator layers: column indexes are resolved once, rows are `line.split("|")`, times
# (per minute) and GPU columns (by text) are cached since sacct repeats both a lot, and every
# unusual value goes to the same field parsers as above, so errors and skips are the same.

_BLOCK = 1 << 20  # characters per readlines() batch: the file streams, it is never read whole
_CACHE_MAX = 1 << 16  # entries per text cache before it is emptied (bounded memory on any file)
_EMPTY = (-1, -1)  # a GPU column that is blank in this row: try the next one
_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}):(\d{2}):(\d{2})", re.ASCII)


def _blocks(stream: TextIO) -> Iterator[list[str]]:
    """Batches of whole lines, each ending in a newline (the file's last line gets one)."""
    while block := stream.readlines(_BLOCK):
        if block[-1][-1:] != "\n":
            block[-1] += "\n"
        yield block


def _csv_safe(block: list[str]) -> bool:
    """Whether csv.reader would read these lines as plain splits (no NUL, no oversized field)."""
    return "\0" not in "".join(block) and max(map(len, block)) <= csv.field_size_limit()


def _trailing(bars: int, pipes: int, line: str) -> bool:
    """A `sacct -p` row: one bar more than the header's, at the end of the line."""
    return bars == pipes + 1 and line.endswith("|\n")


def _scan(ctx: ReadContext) -> tuple[dict[str, int], int, dict[str, int]] | None:
    """First pass: (columns, header line, repeated ids), or None when the csv path must read it.

    Raises what `Table.open` and `_repeated_ids` raise, in the same order.
    """
    columns: dict[str, int] | None = None
    header_line = 0
    counts: Counter[str] = Counter()
    seen = False
    with open_text(ctx, newline=None) as stream:
        for block in _blocks(stream):
            if not _csv_safe(block):
                return None
            if columns is None:
                for position, line in enumerate(block):
                    header = line[:-1].split("|")
                    if any(cell.strip() for cell in header):
                        header_line += position + 1
                        columns = _index(ctx, header, header_line)
                        block = block[position + 1 :]
                        break
                else:
                    header_line += len(block)
                    continue
                if "JobID" not in columns:
                    return columns, header_line, {}  # the second pass reports the missing column
                key, pipes = columns["JobID"], len(columns) - 1
            if not seen:
                seen = any(not line.isspace() for line in block)
            # A row of the right width, or with the one trailing delimiter of `sacct -p`.
            rows = [line for line in block if (n := line.count("|")) == pipes or _trailing(n, pipes, line)]
            if key == 0:  # the usual place: slice the id off instead of splitting the line
                counts.update([line[: line.index("|")].strip() for line in rows])
            else:
                counts.update([line.split("|", key + 1)[key].strip() for line in rows])
    if columns is None:
        raise TraceError(ctx.name, None, "file", "empty file (no header line)")
    if not seen:
        raise TraceError(ctx.name, header_line, "file", "no records after the header")
    repeated = {job_id: n for job_id, n in counts.items() if n > 1 and "." not in job_id}
    return columns, header_line, repeated


_SECONDS = {f"{n:02d}": n for n in range(60)}


def _time_reader() -> Callable[[str, str], float | None]:
    """`parse_slurm_time`, remembered per minute: a time whose first 16 characters were seen in a
    well-formed time costs two dict lookups; anything else goes through the full parse."""
    minutes: dict[str, float] = {}
    days: dict[str, float] = {}
    seconds = _SECONDS

    def parse(text: str, field: str) -> float | None:
        if text[16:17] == ":":
            base = minutes.get(text[:16])
            if base is not None:
                sec = seconds.get(text[17:])
                if sec is not None:
                    return base + sec
        value = text.strip()
        match = _TIME.fullmatch(value)
        if match is None:
            return parse_slurm_time(text, field)  # Unknown/None/empty, or raises the usual error
        date, hour, minute, second = match.groups()
        h, m, s = int(hour), int(minute), int(second)
        if h > 23 or m > 59 or s > 59:
            return parse_slurm_time(text, field)  # raises the usual error
        day = days.get(date)
        if day is None:
            try:
                day = parse_utc(date + "T00:00:00", field)
            except FieldError:
                parse_slurm_time(text, field)  # raises the usual error (month 13, Feb 30)
                raise
            days[date] = day
        if len(minutes) >= _CACHE_MAX:
            minutes.clear()
        base = minutes[value[:16]] = day + (h * 3600 + m * 60)
        return base + s

    return parse


def _gpu_reader(name: str) -> Callable[[str], tuple[int, int]]:
    """A GPU column's `(gpus, nodes)` by text (as `_gpus` reads it), `_EMPTY` when blank; cached."""
    cache: dict[str, tuple[int, int]] = {}
    is_tres = name.endswith("TRES")

    def read(text: str) -> tuple[int, int]:
        found = cache.get(text)
        if found is None:
            value = text.strip()
            if not value:
                found = _EMPTY
            else:
                found = _tres(value, name) if is_tres else (_gres(value, name), 0)
            if len(cache) >= _CACHE_MAX:
                cache.clear()
            cache[text] = found
        return found

    return read


def _read_fast(
    ctx: ReadContext, columns: dict[str, int], header_line: int, repeated: dict[str, int]
) -> Iterator[JobSpec]:
    table = Table(ctx, columns, header_line, iter(()))
    _check_header(table)
    width = len(columns)
    job_col, start_col, end_col = columns["JobID"], columns["Start"], columns.get("End")
    elapsed_col = columns.get("Elapsed", -1)
    submit_col = columns.get("Submit", -1)
    part_col = columns.get("Partition", -1)
    user_col = columns.get("User" if "User" in columns else "Account", -1)
    name_col = columns.get("JobName", -1)
    state_col = columns.get("State", -1)
    nnodes_col = columns.get("NNodes", -1)
    nodelist_col = columns.get("NodeList", -1)
    gpu_cols = [(columns[name], _gpu_reader(name)) for name in GPU_COLUMNS if name in columns]
    skipped = ctx.skipped
    skip_invalid = ctx.skip_invalid
    parse_time = _time_reader()
    pipes = width - 1
    key = job_col + 1
    first = job_col == 0  # the usual place: slice the id off instead of splitting the line
    seq = 0
    number = header_line
    with open_text(ctx, newline=None) as stream:
        skip = header_line
        for block in _blocks(stream):
            if skip:
                if skip >= len(block):
                    skip -= len(block)
                    continue
                block, skip = block[skip:], 0
            for line in block:
                number += 1
                try:
                    n = line.count("|")
                    if n != pipes:
                        if n == 0 and line.isspace():
                            continue  # a blank line
                        if not (n == pipes + 1 and line.endswith("|\n")):  # not `sacct -p`'s trailing bar
                            raise FieldError("row", f"expected {width} fields, got {n + 1}")
                    job_id = (line[: line.index("|")] if first else line.split("|", key)[job_col]).strip()
                    if "." in job_id:
                        skipped[STEPS] += 1
                        continue
                    if not job_id:
                        raise FieldError("JobID", "empty")
                    if job_id in repeated:
                        repeated[job_id] -= 1
                        if repeated[job_id] > 0:
                            skipped[REQUEUED] += 1
                            continue
                    row = line[:-1].split("|")
                    text = row[start_col]
                    start = parse_time(text, "Start")
                    if start is None:
                        skipped[NEVER_STARTED] += 1
                        continue
                    if end_col is None:
                        duration = parse_elapsed(row[elapsed_col], "Elapsed")
                    else:
                        text = row[end_col]
                        end = parse_time(text, "End")
                        if end is None:
                            skipped[STILL_RUNNING] += 1
                            continue
                        if end < start:
                            raise FieldError(
                                "End", f"negative duration: End is {start - end:g} s before Start"
                            )
                        duration = end - start
                    for position, read_gpus in gpu_cols:
                        gpus, nodes = read_gpus(row[position])
                        if gpus >= 0:
                            break
                    else:
                        gpus = nodes = 0
                    if gpus == 0:
                        skipped[ZERO_GPUS] += 1
                        continue
                    if not nodes:
                        nodes = _nodes_of(
                            row[nnodes_col] if nnodes_col >= 0 else "",
                            row[nodelist_col] if nodelist_col >= 0 else "",
                        )
                    if submit_col < 0:
                        skipped[SUBMIT_FROM_START] += 1
                        submit = start
                    else:
                        text = row[submit_col]
                        submitted = parse_time(text, "Submit")
                        if submitted is None:
                            raise FieldError("Submit", f"no submit time for a job that started: {text!r}")
                        submit = submitted
                except FieldError as exc:
                    if not skip_invalid:
                        raise ctx.error(number, exc) from None
                    skipped[f"invalid: {exc.field}"] += 1
                    continue
                state = row[state_col].split() if state_col >= 0 else None
                yield JobSpec(
                    job_id,
                    submit,
                    duration,
                    gpus,
                    (row[part_col].strip() if part_col >= 0 else "") or "default",
                    row[user_col].strip() if user_col >= 0 else "",
                    row[name_col] if name_col >= 0 else "",
                    state[0] if state else "COMPLETED",
                    0,  # priority
                    nodes,
                    seq,
                )
                seq += 1

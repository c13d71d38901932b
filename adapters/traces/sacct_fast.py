"""The fast path of the `sacct -P` reader: `line.split("|")` instead of the csv module.

Same decisions as sacct.py's csv path (`_repeated_ids` + `_converter` + `convert_rows`), without
the csv module and the per-row generator layers: column indexes are resolved once, rows are
`line.split("|")`, times (per minute) and GPU columns (by text) are cached since sacct repeats both
a lot, and every unusual value goes to the same field parsers, so errors and skips are the same.
`_scan` returns None for a file the csv module would read differently (a NUL byte, a line longer
than its field limit); `read_sacct` then takes the csv path.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TextIO

from gputwin.api.files import MAX_LINE_CHARS
from gputwin.core.model import JobSpec

from .errors import FieldError, TraceError
from .fields import MAX_DURATION, check_seconds, parse_elapsed, parse_slurm_time, parse_utc
from .sacct_columns import (
    GPU_COLUMNS,
    NEVER_STARTED,
    REQUEUED,
    STEPS,
    STILL_RUNNING,
    SUBMIT_FROM_START,
    ZERO_GPUS,
    _check_header,
    _gres,
    _nodes_of,
    _tres,
    WHOLE,
    share,
)
from .table import ReadContext, Table, _index, open_text

_BLOCK = 1 << 20  # characters per readlines() batch: the file streams, it is never read whole
_CACHE_MAX = 1 << 16  # entries per text cache before it is emptied (bounded memory on any file)
_EMPTY = (-1, -1, 0)  # a GPU column that is blank in this row: try the next one
_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[T ](\d{2}):(\d{2}):(\d{2})", re.ASCII)


def _blocks(ctx: ReadContext, stream: TextIO) -> Iterator[list[str]]:
    """Batches of whole lines, without their newline.

    Read in chunks of `_BLOCK` characters, never a line at a time: a line longer than
    MAX_LINE_CHARS is a TraceError once that many characters were read, not a whole-file read.
    """
    rest, number = "", 0
    while chunk := stream.read(_BLOCK):
        block = (rest + chunk).split("\n")
        rest = block.pop()
        if len(rest) > MAX_LINE_CHARS:
            raise TraceError(
                ctx.name, number + len(block) + 1, "line", f"line longer than {MAX_LINE_CHARS:,} characters"
            )
        if block:
            number += len(block)
            yield block
    if rest:
        yield [rest]


def _csv_safe(block: list[str]) -> bool:
    """Whether csv.reader would read these lines as plain splits (no NUL, no oversized field)."""
    return "\0" not in "".join(block) and max(map(len, block)) <= csv.field_size_limit()


def _trailing(bars: int, pipes: int, line: str) -> bool:
    """A `sacct -p` row: one bar more than the header's, at the end of the line."""
    return bars == pipes + 1 and line.endswith("|")


def _scan(ctx: ReadContext) -> tuple[dict[str, int], int, dict[str, int]] | None:
    """First pass: (columns, header line, repeated ids), or None when the csv path must read it.

    Raises what `Table.open` and `_repeated_ids` raise, in the same order.
    """
    columns: dict[str, int] | None = None
    header_line = 0
    counts: Counter[str] = Counter()
    seen = False
    with open_text(ctx, newline=None) as stream:
        for block in _blocks(ctx, stream):
            if not _csv_safe(block):
                return None
            if columns is None:
                for position, line in enumerate(block):
                    header = line.split("|")
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
                seen = any(line and not line.isspace() for line in block)
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


def _gpu_reader(name: str) -> Callable[[str], tuple[int, int, int]]:
    """A GPU column's `(gpus, nodes, shards)` by text (as `_gpus` reads it), `_EMPTY` when blank; cached."""
    cache: dict[str, tuple[int, int, int]] = {}
    is_tres = name.endswith("TRES")

    def read(text: str) -> tuple[int, int, int]:
        found = cache.get(text)
        if found is None:
            value = text.strip()
            if not value:
                found = _EMPTY
            else:
                found = _tres(value, name) if is_tres else (_gres(value, name), 0, 0)
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
    per_gpu = ctx.shards_per_gpu
    parse_time = _time_reader()
    pipes = width - 1
    key = job_col + 1
    first = job_col == 0  # the usual place: slice the id off instead of splitting the line
    seq = 0
    number = header_line
    with open_text(ctx, newline=None) as stream:
        skip = header_line
        for block in _blocks(ctx, stream):
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
                        if n == 0 and (not line or line.isspace()):
                            continue  # a blank line
                        if not (n == pipes + 1 and line.endswith("|")):  # not `sacct -p`'s trailing bar
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
                    row = line.split("|")
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
                        if duration > MAX_DURATION:
                            check_seconds(duration, "End", MAX_DURATION)
                    for position, read_gpus in gpu_cols:
                        gpus, nodes, shards = read_gpus(row[position])
                        if gpus >= 0:
                            break
                    else:
                        gpus = nodes = shards = 0
                    milli = WHOLE
                    if shards:  # SLURM GRES sharding: a fraction of one GPU (sacct_columns.share)
                        gpus, milli = share(gpus, shards, per_gpu, skipped)
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
                    "",  # model: sacct's typed GRES are not read as models here
                    milli,
                )
                seq += 1

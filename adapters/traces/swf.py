"""The Standard Workload Format (SWF) of the Parallel Workloads Archive.

One job per line, 18 whitespace-separated numbers; `;` starts a header comment (see
https://www.cs.huji.ac.il/labs/parallel/workload/swf.html). Decisions, for a GPU scheduler
replaying a CPU-era log (fields numbered from 1, as the format's definition does):

- GPUs = requested processors (field 8), or the allocated ones (field 5) when that is -1, divided
  by `procs_per_gpu` and rounded up (a 36-processor job on 8 processors per GPU needs 5 GPUs).
  Neither known: skipped, "no processor count"; 0 GPUs: skipped, "zero GPUs".
- run time = field 4; -1 (unknown) is skipped and counted under "unknown run time".
- submit = field 2, seconds from the log's start (some converted logs write epoch seconds);
  `read_trace` re-bases it so the earliest kept job submits at 0 (`origin` says where that was).
- task_type = the queue (field 15), named by the header's `; Queue: N name` lines, else `queueN`;
  -1 (no queue recorded) is "default". user = field 12 (`""` for -1); job id = field 1.
- state from field 11: 0 FAILED, 5 CANCELLED, anything else COMPLETED.
- The other fields (wait, CPU time, memory, group, executable, partition, dependencies, think
  time) are read as nothing: they may be `-1` or decimals such as `18.00`.

Bounds: a line longer than `MAX_LINE` characters or a field longer than `MAX_FIELD` is a
TraceError (so no number of a million digits reaches `int()`); `open_text` opens regular files only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TextIO

from gputwin.core.model import JobSpec

from .errors import FieldError, TraceError
from .fields import MAX_DURATION, MAX_GPUS, parse_count, parse_name, parse_seconds
from .table import ReadContext, keep_jobs, open_text

FIELDS = 18
MAX_LINE = 1 << 20  # characters
MAX_FIELD = 40  # characters: any real count or time has far fewer digits
MAX_PROCESSORS = 1 << 40  # a count of processors; the GPUs it makes are checked against MAX_GPUS
MAX_ID = 1 << 32  # user and queue numbers
UNKNOWN_RUN_TIME = "unknown run time"
NO_PROCESSORS = "no processor count"
ZERO_GPUS = "zero GPUs"
_QUEUE_LINE = re.compile(r";\s*Queue:\s*(\d{1,9})\s+(\S(?:.*\S)?)\s*", re.ASCII)
_STATES = {"0": "FAILED", "5": "CANCELLED"}


def read_swf(ctx: ReadContext) -> Iterator[JobSpec]:
    """Stream the jobs of an SWF log in file order (submit times on the file's clock)."""
    # Re-based like an epoch clock: SWF counts from the log's start, but converted logs (Theta's)
    # write epoch seconds, and a replay should start with its first kept job either way.
    ctx.clock.observe(True, "submit_time")
    queues: dict[str, str] = {}  # filled from the header while the lines stream past
    with open_text(ctx, newline=None) as stream:
        yield from keep_jobs(
            ctx, _job_lines(ctx, stream, queues), lambda item, seq: _convert(item[1], seq, queues, ctx.procs_per_gpu),
            lambda item, exc: ctx.error(item[0], exc),
        )  # fmt: skip


def _job_lines(ctx: ReadContext, stream: TextIO, queues: dict[str, str]) -> Iterator[tuple[int, list[str]]]:
    """`(line number, fields)` of each job line; `; Queue:` header lines fill `queues` on the way."""
    seen = False
    for number, line in bounded_lines(ctx, stream):
        text = line.strip()
        if text.startswith(";"):
            _header(text, queues)
        elif text:
            seen = True
            yield number, text.split()
    if not seen:
        raise TraceError(ctx.name, None, "file", "no job lines (only comments or blank lines)")


def bounded_lines(ctx: ReadContext, stream: TextIO) -> Iterator[tuple[int, str]]:
    """`(line number, line)` pairs; a line over MAX_LINE characters is a TraceError."""
    number = 0
    while True:
        line = stream.readline(MAX_LINE + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE:
            raise TraceError(ctx.name, number, "line", f"longer than {MAX_LINE} characters")
        yield number, line


def _header(text: str, queues: dict[str, str]) -> None:
    match = _QUEUE_LINE.fullmatch(text)
    if match is not None:
        queues[str(int(match.group(1)))] = match.group(2)


def _convert(row: list[str], seq: int, queues: dict[str, str], procs_per_gpu: int) -> JobSpec | str:
    if len(row) != FIELDS:
        raise FieldError("row", f"expected {FIELDS} fields, got {len(row)}")
    for position, value in enumerate(row, 1):
        if len(value) > MAX_FIELD:
            raise FieldError(f"field {position}", f"longer than {MAX_FIELD} characters")
    job_id = parse_name(row[0], "job_number")
    submit = parse_seconds(row[1], "submit_time")
    if row[3] == "-1":
        return UNKNOWN_RUN_TIME
    run_time = parse_seconds(row[3], "run_time", MAX_DURATION)
    procs = _processors(row[7], "requested_processors")
    if procs is None:
        procs = _processors(row[4], "allocated_processors")
    if procs is None:
        return NO_PROCESSORS
    gpus = -(-procs // procs_per_gpu)
    if gpus == 0:
        return ZERO_GPUS
    if gpus > MAX_GPUS:
        raise FieldError("requested_processors", f"{gpus:,} GPUs, more than the {MAX_GPUS:,} a job may have")
    return JobSpec(
        job_id=job_id,
        submit=submit,
        duration=run_time,
        gpus=gpus,
        task_type=_queue(row[14], queues),
        user="" if row[11] == "-1" else str(parse_count(row[11], "user_id", MAX_ID)),
        state=_STATES.get(row[10], "COMPLETED"),
        seq=seq,
    )


def _processors(text: str, field: str) -> int | None:
    """A processor count; None for -1 (not recorded)."""
    return None if text == "-1" else parse_count(text, field, MAX_PROCESSORS)


def _queue(text: str, queues: dict[str, str]) -> str:
    if text == "-1":
        return "default"
    number = str(parse_count(text, "queue_number", MAX_ID))
    return queues.get(number, f"queue{number}")

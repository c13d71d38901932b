"""Microsoft Philly's original `cluster_job_log` (github.com/msr-fiddle/philly-traces): a JSON list.

Each job is `{status, vc, jobid, attempts: [{start_time, end_time, detail: [{ip, gpus}]}],
submitted_time, user}`. The mapping follows the trace's own analysis notebook
(`analysis/Philly Trace Analysis.ipynb`, class `Job`), which the ATC'19 paper's figures use:

- GPUs = the number of GPU ids over the FIRST attempt's `detail` (all its machines); num_nodes =
  its machine count. 0 GPUs: skipped, "zero GPUs".
- run time = the LAST attempt's `end_time` minus the FIRST attempt's `start_time`: retries and
  the gaps between them count, as the job held its place in the cluster throughout.
- skipped and counted: no attempts ("no attempts"), a first attempt without `start_time`
  ("never started"), a last attempt without `end_time` ("still running": the README says such a
  job was running at the snapshot). A missing time is `null`, `""` or `"None"`.
- submit = `submitted_time`, `YYYY-MM-DD HH:MM:SS` read as UTC (epoch clock, re-based by
  `read_trace`); task_type = `vc` (a string: `6214e9` is a name); user = `user`;
  state: Pass -> COMPLETED, Killed -> CANCELLED, Failed -> FAILED.

Streaming: the file is one JSON array, read one element at a time with `json.JSONDecoder.raw_decode`
on a sliding buffer, so memory stays at one record (at most `MAX_RECORD` characters, else a
TraceError) whatever the file's size. Errors name the line the record starts on and its JSON path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import TextIO

from gputwin.core.model import JobSpec

from .errors import FieldError, TraceError
from .fields import parse_name, parse_utc
from .table import ReadContext, keep_jobs, open_text

MAX_RECORD = 1 << 20  # characters of one job's JSON
_CHUNK = 1 << 16
NO_ATTEMPTS = "no attempts"
NEVER_STARTED = "never started"
STILL_RUNNING = "still running"
ZERO_GPUS = "zero GPUs"
_STATES = {"Pass": "COMPLETED", "Killed": "CANCELLED", "Failed": "FAILED"}
_NO_TIME = (None, "", "None")
_DECODER = json.JSONDecoder()

Json = Mapping[str, object]


def read_philly(ctx: ReadContext) -> Iterator[JobSpec]:
    """Stream the jobs of a Philly `cluster_job_log` in file order (epoch-second submit times)."""
    ctx.clock.observe(True, "submitted_time")
    with open_text(ctx, newline=None) as stream:
        yield from keep_jobs(ctx, enumerate(_elements(ctx, stream)), _record_job, lambda item, exc: TraceError(
            ctx.name, item[1][0], f"[{item[0]}].{exc.field}" if exc.field else f"[{item[0]}]", exc.reason))  # fmt: skip


def _record_job(item: tuple[int, tuple[int, object]], seq: int) -> JobSpec | str:
    record = item[1][1]
    if not isinstance(record, Mapping):
        raise FieldError("", f"not an object: {type(record).__name__}")
    return _convert(record, seq)


class _Buffer:
    """Text read so far but not yet decoded, and the line its first character is on."""

    def __init__(self, ctx: ReadContext, stream: TextIO) -> None:
        self.ctx, self.stream = ctx, stream
        self.text, self.pos, self.line, self.eof = "", 0, 1, False

    def fill(self) -> bool:
        """Read one more chunk; False at the end of the file."""
        if self.eof:
            return False
        chunk = self.stream.read(_CHUNK)
        if not chunk:
            self.eof = True
            return False
        self.text = self.text[self.pos :] + chunk
        self.pos = 0
        return True

    def skip_space(self) -> str:
        """The next non-blank character ("" at the end of the file), not consumed."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
                self.line += self.text[self.pos] == "\n"
                self.pos += 1
            if self.pos < len(self.text) or not self.fill():
                return self.text[self.pos : self.pos + 1]

    def take(self, expected: str) -> str:
        char = self.skip_space()
        if char not in expected:
            shown = "the end of the file" if not char else repr(char)
            raise TraceError(
                self.ctx.name, self.line, "json", f"expected {' or '.join(expected)}, got {shown}"
            )
        self.pos += 1
        return char

    def value(self) -> object:
        """Decode one JSON value at the cursor, reading more until it is whole (or too big)."""
        self.skip_space()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.text) - self.pos > MAX_RECORD:
                    raise TraceError(
                        self.ctx.name, self.line, "json", f"a record over {MAX_RECORD} characters"
                    ) from None
                if not self.fill():
                    raise TraceError(
                        self.ctx.name, self.line + _lines(self.text, self.pos, exc.pos), "json", exc.msg
                    ) from None
                continue
            except RecursionError:
                raise TraceError(self.ctx.name, self.line, "json", "nested too deeply") from None
            # A number at the very end of the buffer may continue in the next chunk.
            if end == len(self.text) and not self.eof and self.fill():
                continue
            self.line += _lines(self.text, self.pos, end)
            self.pos = end
            return value


def _lines(text: str, start: int, end: int) -> int:
    return text.count("\n", start, end)


def _elements(ctx: ReadContext, stream: TextIO) -> Iterator[tuple[int, object]]:
    """`(line, element)` for each element of the top-level array."""
    buffer = _Buffer(ctx, stream)
    if not buffer.skip_space():
        raise TraceError(ctx.name, None, "file", "empty file")
    buffer.take("[")
    if buffer.skip_space() == "]":
        raise TraceError(ctx.name, buffer.line, "jobs", "no jobs in the file")
    while True:
        buffer.skip_space()
        line = buffer.line
        yield line, buffer.value()
        if buffer.take(",]") == "]":
            break
    if buffer.skip_space():
        raise TraceError(ctx.name, buffer.line, "json", "extra data after the list of jobs")


def _convert(job: Json, seq: int) -> JobSpec | str:
    job_id = parse_name(_text(job, "jobid"), "jobid")
    attempts = job.get("attempts")
    if not isinstance(attempts, list):
        raise FieldError("attempts", "missing or not a list")
    submit = parse_utc(_text(job, "submitted_time"), "submitted_time")
    if not attempts:
        return NO_ATTEMPTS
    first, last = _attempt(attempts, 0), _attempt(attempts, len(attempts) - 1)
    detail = first.get("detail")
    if not isinstance(detail, list):
        raise FieldError("attempts[0].detail", "missing or not a list")
    gpus = 0
    for position, machine in enumerate(detail):
        ids = machine.get("gpus") if isinstance(machine, Mapping) else None
        if not isinstance(ids, list):
            raise FieldError(f"attempts[0].detail[{position}].gpus", "missing or not a list")
        gpus += len(ids)
    if gpus == 0:
        return ZERO_GPUS
    start = _time(first, "start_time", "attempts[0]")
    if start is None:
        return NEVER_STARTED
    end = _time(last, "end_time", f"attempts[{len(attempts) - 1}]")
    if end is None:
        return STILL_RUNNING
    if end < start:
        raise FieldError(f"attempts[{len(attempts) - 1}].end_time", "before the first attempt's start_time")
    status = _text(job, "status")
    return JobSpec(
        job_id=job_id,
        submit=submit,
        duration=end - start,
        gpus=gpus,
        task_type=parse_name(_text(job, "vc"), "vc"),
        user=_text(job, "user", required=False).strip(),
        state=_STATES.get(status, status.upper() or "COMPLETED"),
        num_nodes=len(detail),
        seq=seq,
    )


def _text(record: Json, key: str, *, required: bool = True) -> str:
    value = record.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise FieldError(key, "missing" if value is None else f"not a string: {type(value).__name__}")
    return value


def _attempt(attempts: list[object], index: int) -> Json:
    attempt = attempts[index]
    if not isinstance(attempt, Mapping):
        raise FieldError(f"attempts[{index}]", f"not an object: {type(attempt).__name__}")
    return attempt


def _time(attempt: Json, key: str, where: str) -> float | None:
    value = attempt.get(key)
    if value in _NO_TIME:
        return None
    if not isinstance(value, str):
        raise FieldError(f"{where}.{key}", f"not a string: {type(value).__name__}")
    return parse_utc(value, f"{where}.{key}")

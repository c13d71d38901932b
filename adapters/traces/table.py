"""Reading a header-first delimited text file row by row, and the loop every reader shares.

`open_text` turns the ways a file can be unreadable into `TraceError`s. `Table` finds the header,
checks the columns a reader needs and streams `(line, fields)` pairs with 1-based line numbers
(the header is line 1 when the file starts with it). `convert_rows` is the one place that applies
`skip_invalid`, counts skip reasons and numbers the kept jobs, so each reader only has to say how
one row becomes a job or a skip reason.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from gputwin.core.model import JobSpec

from .errors import FieldError, TraceError

Row = list[str]
# A converter gets (fields, seq) and returns the job, or the reason it was left out.
Converter = Callable[[Row, int], "JobSpec | str"]


class Clock:
    """Which clock a trace's times are on: epoch seconds (re-based later) or trace-relative.

    Mutable on purpose: a CSV trace only reveals its clock while it streams, and the caller
    decides the origin after the last row.
    """

    __slots__ = ("epoch",)

    def __init__(self, epoch: bool | None = None) -> None:
        self.epoch = epoch

    def observe(self, epoch: bool, field: str) -> None:
        if self.epoch is None:
            self.epoch = epoch
        elif self.epoch != epoch:
            raise FieldError(field, "mixes wall-clock dates and plain seconds in one file")


@dataclass(frozen=True)
class ReadContext:
    """Everything a reader needs besides the format: where, how strict, and where to count."""

    path: Path
    skip_invalid: bool = False
    skipped: Counter[str] = field(default_factory=Counter)
    clock: Clock = field(default_factory=Clock)
    procs_per_gpu: int = 1  # SWF only: processors that make one GPU

    @property
    def name(self) -> str:
        return str(self.path)

    def error(self, line: int | None, exc: FieldError) -> TraceError:
        return TraceError(self.name, line, exc.field, exc.reason)


@contextmanager
def open_text(ctx: ReadContext, newline: str | None = "") -> Iterator[TextIO]:
    """Open for reading as UTF-8 (a BOM is dropped); missing or unreadable files are TraceErrors.

    `newline=""` (for the csv module) keeps line ends as they are; None translates CR LF and a
    lone CR to LF, which splits lines exactly where the csv module would.
    """
    try:
        with open(ctx.path, encoding="utf-8-sig", newline=newline) as stream:
            yield stream
    except FileNotFoundError:
        raise TraceError(ctx.name, None, "file", "no such file") from None
    except IsADirectoryError:
        raise TraceError(ctx.name, None, "file", "is a directory") from None
    except PermissionError:
        raise TraceError(ctx.name, None, "file", "permission denied") from None
    except UnicodeDecodeError as exc:
        raise TraceError(ctx.name, None, "file", f"not UTF-8 text ({exc.reason})") from None


@dataclass(frozen=True)
class Table:
    """A header row and the data rows after it, streamed with their line numbers."""

    ctx: ReadContext
    columns: dict[str, int]
    header_line: int
    _rows: Iterator[tuple[int, Row]]

    @classmethod
    def open(cls, ctx: ReadContext, stream: TextIO, delimiter: str) -> Table:
        # sacct -P is not CSV: a quote is a literal character there, not a quoting mark.
        if delimiter == "|":
            reader = csv.reader(stream, delimiter=delimiter, quoting=csv.QUOTE_NONE, strict=True)
        else:
            reader = csv.reader(stream, delimiter=delimiter, strict=True)
        rows = _numbered(ctx, reader, lambda: reader.line_num)
        for line, header in rows:
            if any(cell.strip() for cell in header):
                return cls(ctx, _index(ctx, header, line), line, rows)
        raise TraceError(ctx.name, None, "file", "empty file (no header line)")

    def get(self, row: Row, name: str, default: str = "") -> str:
        """An optional column's value, or `default` when the file has no such column."""
        position = self.columns.get(name)
        return default if position is None else row[position]

    def require(self, *names: str) -> None:
        for name in names:
            if name not in self.columns:
                raise TraceError(
                    self.ctx.name,
                    self.header_line,
                    name,
                    f"missing required column (header has: {', '.join(self.columns)})",
                )

    def rows(self) -> Iterator[tuple[int, Row | FieldError]]:
        """Data rows, blank lines dropped; a row with the wrong field count comes as a FieldError."""
        width = len(self.columns)
        seen = False
        for line, row in self._rows:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line; a line of bare delimiters is a malformed row instead
            seen = True
            # `sacct -p` (lower case) ends every line with the delimiter: one empty extra field.
            if len(row) == width + 1 and row[-1] == "":
                row.pop()
            if len(row) != width:
                yield line, FieldError("row", f"expected {width} fields, got {len(row)}")
            else:
                yield line, row
        if not seen:
            raise TraceError(self.ctx.name, self.header_line, "file", "no records after the header")


def _numbered(ctx: ReadContext, reader: Iterator[Row], line: Callable[[], int]) -> Iterator[tuple[int, Row]]:
    """Rows with the line they end on; csv.Error (a NUL byte, a stray quote) as a TraceError."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise TraceError(ctx.name, line(), "row", str(exc)) from None
        yield line(), row


def _index(ctx: ReadContext, header: Sequence[str], line: int) -> dict[str, int]:
    names = [name.strip() for name in header]
    if names and names[-1] == "":
        names.pop()  # the trailing delimiter of `sacct -p`
    columns: dict[str, int] = {}
    for position, name in enumerate(names):
        if not name:
            raise TraceError(ctx.name, line, f"column {position + 1}", "empty column name")
        if name in columns:
            raise TraceError(ctx.name, line, name, "duplicate column")
        columns[name] = position
    return columns


def convert_rows(ctx: ReadContext, table: Table, convert: Converter) -> Iterator[JobSpec]:
    """Rows to jobs in file order: count skip reasons, apply skip_invalid, number kept jobs."""
    seq = 0
    for line, row in table.rows():
        try:
            if isinstance(row, FieldError):
                raise row
            outcome = convert(row, seq)
        except FieldError as exc:
            if not ctx.skip_invalid:
                raise ctx.error(line, exc) from None
            ctx.skipped[f"invalid: {exc.field}"] += 1
            continue
        if isinstance(outcome, str):
            ctx.skipped[outcome] += 1
            continue
        seq += 1
        yield outcome

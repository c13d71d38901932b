"""Reading a header-first delimited text file row by row, and the loop every reader shares.

`open_text` turns the ways a file can be unreadable into `TraceError`s; it opens regular files only
(a FIFO or a device is refused without blocking on it). `Table` reads lines of at most
`MAX_LINE_CHARS` characters (records too; fields are capped by the csv module's field limit),
refuses a NUL character naming its column, finds the header,
checks the columns a reader needs and streams `(line, fields)` pairs with 1-based line numbers
(the header is line 1 when the file starts with it; a headerless table of published columns has
its first record on line 1). `convert_rows` is the one place that applies
`skip_invalid`, counts skip reasons and numbers the kept jobs, so each reader only has to say how
one row becomes a job or a skip reason.
"""

from __future__ import annotations

import csv
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO, TypeVar

from gputwin.api.files import BoundedLines, LineTooLongError, NotRegularFileError, open_regular
from gputwin.core.model import JobSpec

from .errors import FieldError, TraceError

Row = list[str]
# A converter gets (fields, seq) and returns the job, or the reason it was left out.
Converter = Callable[[Row, int], "JobSpec | str"]
R = TypeVar("R")


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
    shards_per_gpu: int = 0  # sacct only: SLURM gres/shard per GPU (0: unknown, a shard job is 1 GPU)

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
    if "\0" in ctx.name:  # os.open would raise ValueError ("embedded null byte")
        raise TraceError(ctx.name.replace("\0", "\\0"), None, "file", "the path contains a NUL character")
    try:
        with open_regular(ctx.path, encoding="utf-8-sig", newline=newline) as stream:
            yield stream
    except NotRegularFileError as exc:
        raise TraceError(ctx.name, None, "file", f"not a regular file ({exc.kind})") from None
    except FileNotFoundError:
        raise TraceError(ctx.name, None, "file", "no such file") from None
    except IsADirectoryError:
        raise TraceError(ctx.name, None, "file", "is a directory") from None
    except PermissionError:
        raise TraceError(ctx.name, None, "file", "permission denied") from None
    except UnicodeDecodeError as exc:
        raise TraceError(ctx.name, None, "file", f"not UTF-8 text ({exc.reason})") from None
    except OSError as exc:  # ELOOP, ENAMETOOLONG, EIO...: say what, without a traceback
        raise TraceError(ctx.name, None, "file", exc.strerror or type(exc).__name__) from None


@dataclass(frozen=True)
class Table:
    """A header row and the data rows after it, streamed with their line numbers."""

    ctx: ReadContext
    columns: dict[str, int]
    header_line: int
    _rows: Iterator[tuple[int, Row, bool]]

    @classmethod
    def open(
        cls, ctx: ReadContext, stream: TextIO, delimiter: str, published: Sequence[str] = ()
    ) -> Table:
        """The table in `stream`; with `published` column names (a trace that ships its header in a
        separate file, as Alibaba PAI 2020 does), a first row that is not that header is data."""
        lines = BoundedLines(stream, records=True)
        # sacct -P is not CSV: a quote is a literal character there, not a quoting mark.
        if delimiter == "|":
            reader = csv.reader(lines, delimiter=delimiter, quoting=csv.QUOTE_NONE, strict=True)
        else:
            reader = csv.reader(lines, delimiter=delimiter, strict=True)
        rows = _numbered(ctx, reader, lines)
        for line, header, nul in rows:
            if any(cell.strip() for cell in header):
                if published and [cell.strip() for cell in header] != list(published):
                    columns = {name: position for position, name in enumerate(published)}
                    return cls(ctx, columns, 0, itertools.chain([(line, header, nul)], rows))
                if nul:
                    raise TraceError(
                        ctx.name, line, f"column {_nul_at(header) + 1}", "contains a NUL character"
                    )
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
        names = list(self.columns)
        seen = False
        for line, row, nul in self._rows:
            if not row or (len(row) == 1 and not row[0].strip() and not nul):
                continue  # a blank line; a line of bare delimiters is a malformed row instead
            seen = True
            if nul:
                at = _nul_at(row)
                yield line, FieldError(names[at] if at < width else "row", "contains a NUL character")
                continue
            # `sacct -p` (lower case) ends every line with the delimiter: one empty extra field.
            if len(row) == width + 1 and row[-1] == "":
                row.pop()
            if len(row) != width:
                yield line, FieldError("row", f"expected {width} fields, got {len(row)}")
            else:
                yield line, row
        if not seen:
            raise TraceError(self.ctx.name, self.header_line, "file", "no records after the header")


def _numbered(
    ctx: ReadContext, reader: Iterator[Row], lines: BoundedLines
) -> Iterator[tuple[int, Row, bool]]:
    """Rows with the line they end on and whether they hold a NUL; csv.Error (a stray quote, a field
    over the csv module's limit) and over-long lines as TraceErrors."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise TraceError(ctx.name, lines.number, "row", str(exc)) from None
        except LineTooLongError as exc:
            raise TraceError(ctx.name, exc.line, "line", exc.reason) from None
        nul, lines.nul = lines.nul, False
        lines.mark()
        yield lines.number, row, nul


def _nul_at(row: Row) -> int:
    """The position of the first field holding a NUL character."""
    return next((position for position, cell in enumerate(row) if "\0" in cell), 0)


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

    def row_job(item: tuple[int, Row | FieldError], seq: int) -> JobSpec | str:
        row = item[1]
        if isinstance(row, FieldError):
            raise row
        return convert(row, seq)

    return keep_jobs(ctx, table.rows(), row_job, lambda item, exc: ctx.error(item[0], exc))


def keep_jobs(
    ctx: ReadContext,
    records: Iterable[R],
    convert: Callable[[R, int], JobSpec | str],
    error: Callable[[R, FieldError], TraceError],
) -> Iterator[JobSpec]:
    """Every reader's record loop: `convert(record, seq)` gives a job, or a skip reason to count;
    a FieldError stops the read as `error(record, exc)`, or with skip_invalid is counted as
    `invalid: FIELD`. Kept jobs are numbered from 0 in file order."""
    seq = 0
    for record in records:
        try:
            outcome = convert(record, seq)
        except FieldError as exc:
            if not ctx.skip_invalid:
                raise error(record, exc) from None
            ctx.skipped[f"invalid: {exc.field or 'record'}"] += 1
            continue
        if isinstance(outcome, str):
            ctx.skipped[outcome] += 1
            continue
        seq += 1
        yield outcome

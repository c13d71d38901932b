"""Opening an input file for reading without letting its kind hang or flood the process.

Only regular files are inputs: a FIFO would block the reader forever (open() of a FIFO waits for
a writer; O_NONBLOCK makes it return at once so it can be refused), and a device such as
/dev/zero never ends. `open_regular` opens with O_NONBLOCK, checks `S_ISREG` on the open
descriptor (no window between the check and the read) and then hands out an ordinary text stream.
`BoundedLines` then reads that stream line by line with a length cap, so one endless line (a
regular file of 4 GB without a newline) is refused after `MAX_LINE_CHARS` characters instead of
being read whole.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TextIO

# The longest line (or csv record spanning lines) an input may have: 1 Mi characters, eight times
# the csv module's default field limit and far beyond any real trace or table line.
MAX_LINE_CHARS = 1 << 20

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFileError(OSError):
    """The path exists but is not a regular file; `kind` says what it is ("a FIFO", ...)."""

    def __init__(self, path: str, kind: str) -> None:
        self.kind = kind
        super().__init__(f"{path}: not a regular file ({kind})")


class LineTooLongError(ValueError):
    """Line `line` (1-based) is longer than `limit` characters, or a record ending there is."""

    def __init__(self, line: int, limit: int, what: str = "line") -> None:
        self.line = line
        self.limit = limit
        self.reason = f"{what} longer than {limit:,} characters"
        super().__init__(f"line {line}: {self.reason}")


class BoundedLines:
    """The lines of a text stream, each at most `limit` characters (else LineTooLongError).

    `number` counts the lines read; `nul` says whether any of them held a NUL character (a csv
    reader keeps NULs in fields; callers refuse them, naming the field). With `records=True`,
    `mark()` starts a new record and the lines read since the last mark may not add up to more
    than `limit` either (a quoted csv field may span lines).
    """

    __slots__ = ("_records", "_since", "_stream", "limit", "nul", "number")

    def __init__(self, stream: TextIO, limit: int = MAX_LINE_CHARS, *, records: bool = False) -> None:
        self._stream = stream
        self.limit = limit
        self.number = 0
        self.nul = False
        self._since = 0
        self._records = records

    def __iter__(self) -> BoundedLines:
        return self

    def __next__(self) -> str:
        line = self._stream.readline(self.limit + 1)
        if not line:
            raise StopIteration
        self.number += 1
        if len(line) > self.limit:
            raise LineTooLongError(self.number, self.limit)
        self._since += len(line)
        if self._records and self._since > self.limit:
            raise LineTooLongError(self.number, self.limit, "record")
        if "\0" in line:
            self.nul = True
        return line

    def mark(self) -> None:
        """A record ended: count the next one's characters from zero."""
        self._since = 0


def open_regular(path: str | Path, *, encoding: str = "utf-8-sig", newline: str | None = "") -> TextIO:
    """Open a regular file as text. FileNotFoundError/PermissionError as usual; IsADirectoryError for
    a directory; NotRegularFileError for a FIFO, device or socket (without blocking on it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a plain file")
            raise NotRegularFileError(str(path), kind)
        os.set_blocking(fd, True)  # no effect on a regular file's reads; restores the usual mode
        return open(fd, encoding=encoding, newline=newline, closefd=True)
    except BaseException:
        os.close(fd)
        raise

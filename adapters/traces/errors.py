"""The two errors trace readers raise.

`TraceError` is what callers see: bad user input, located as precisely as the format allows
(`PATH:LINE: FIELD: REASON`, or `PATH: FIELD: REASON` when there is no line, e.g. a JSON path).
`FieldError` is internal: field parsers raise it without knowing which file or line they are on,
and the row loop that does know turns it into a `TraceError`. That keeps path/line plumbing out of
every small parser.
"""

from __future__ import annotations

from gputwin.errors import InputError


class TraceError(InputError, ValueError):
    """A trace file the readers cannot accept; `str(e)` is `PATH:LINE: FIELD: REASON`."""

    path: str
    line: int | None
    field: str
    reason: str

    def __init__(self, path: str, line: int | None, field: str, reason: str) -> None:
        self.path = path
        self.line = line
        self.field = field
        self.reason = reason
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {field}: {reason}")

    def __reduce__(self) -> tuple[type[TraceError], tuple[str, int | None, str, str]]:
        # The default pickling passes only the message to __init__; keep all four parts.
        return (type(self), (self.path, self.line, self.field, self.reason))


class FieldError(ValueError):
    """One bad field, before the row loop adds the file and line (internal)."""

    field: str
    reason: str

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")

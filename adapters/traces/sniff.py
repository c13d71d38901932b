"""Telling a trace's format from its first bytes (`fmt="auto"`).

Rules, in order: a first non-blank character `{` or `[` is `sacct --json`; a first line with `|`
and `JobID` is `sacct -P`; a CSV header with `num_gpu` and `creation_time` is an Alibaba pod list;
one with `gpu_num` and `submit_time` is a Helios CSV. Anything else is a TraceError that shows
what was seen and lists the formats.
"""

from __future__ import annotations

import csv
from pathlib import Path

from .errors import TraceError
from .table import ReadContext, open_text

FORMATS = ("sacct", "sacct-json", "helios", "alibaba")
_PEEK = 64 * 1024  # enough for any header line; a JSON document only needs its first character


def sniff_format(path: str | Path) -> str:
    """The format of the trace at `path`, from its first bytes; TraceError when it is none of them."""
    ctx = ReadContext(Path(path))
    with open_text(ctx) as stream:
        head = stream.read(_PEEK).lstrip()
    if not head:
        raise TraceError(ctx.name, None, "file", "empty file")
    if head[0] in "{[":
        return "sacct-json"
    first = head.splitlines()[0]
    if "|" in first and "JobID" in first:
        return "sacct"
    names = {name.strip() for name in next(csv.reader([first]), [])}
    if {"num_gpu", "creation_time"} <= names:
        return "alibaba"
    if {"gpu_num", "submit_time"} <= names:
        return "helios"
    raise TraceError(
        ctx.name,
        1,
        "format",
        f"cannot tell the format from {first[:120]!r}; expected one of {', '.join(FORMATS)} "
        "(sacct -P needs a JobID|... header, CSVs a gpu_num+submit_time or "
        "num_gpu+creation_time header)",
    )

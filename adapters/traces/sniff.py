"""Telling a trace's format from its first bytes (`fmt="auto"`).

Rules, in order: a `[` whose first element is an object with `attempts` is a Philly
`cluster_job_log`; any other first non-blank character `{` or `[` is `sacct --json`; a first line
starting with `;` (an SWF header) or of 18 numbers (SWF without one) is SWF; a first line with `|`
and `JobID` is `sacct -P`; a CSV header with `num_gpu` and `creation_time` is an Alibaba pod list;
one with `gpu_num` and `submit_time` is a Helios CSV. Anything else is a TraceError that shows
what was seen and lists the formats.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from .errors import TraceError
from .table import ReadContext, open_text

FORMATS = ("sacct", "sacct-json", "helios", "alibaba", "swf", "philly-json")
_PEEK = 64 * 1024  # enough for any header line; a JSON document only needs its first character


def sniff_format(path: str | Path) -> str:
    """The format of the trace at `path`, from its first bytes; TraceError when it is none of them."""
    ctx = ReadContext(Path(path))
    with open_text(ctx) as stream:
        head = stream.read(_PEEK).lstrip()
    if not head:
        raise TraceError(ctx.name, None, "file", "empty file")
    if head[0] in "{[":
        return "philly-json" if _is_philly(head) else "sacct-json"
    first = head.splitlines()[0]
    if _is_swf(first):
        return "swf"
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
        "num_gpu+creation_time header, SWF a ; header or 18 numbers a line)",
    )


# --- SWF and Philly (kept apart from the rules above so either can change alone) ---------------

_SWF_NUMBER = re.compile(r"-?\d+(?:\.\d+)?", re.ASCII)
_SWF_FIELDS = 18


def _is_swf(first: str) -> bool:
    """An SWF header comment, or a job line of 18 numbers (a log without header)."""
    if first.startswith(";"):
        return True
    tokens = first.split()
    return len(tokens) == _SWF_FIELDS and all(_SWF_NUMBER.fullmatch(token) for token in tokens)


def _is_philly(head: str) -> bool:
    """A JSON list whose first element (when it fits in the peek) is an object with `attempts`."""
    if head[0] != "[":
        return False
    rest = head[1:].lstrip()
    try:
        first, _ = json.JSONDecoder().raw_decode(rest)
    except (ValueError, RecursionError):
        return False
    return isinstance(first, dict) and "attempts" in first

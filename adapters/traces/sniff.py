"""Telling a trace's format from its first bytes (`fmt="auto"`).

Rules, in order: a `[` whose first element is an object with `attempts` is a Philly
`cluster_job_log`; any other first non-blank character `{` or `[` is `sacct --json`; a first line
starting with `;` (an SWF header) or of 18 numbers (SWF without one) is SWF; a first line with `|`
and `JobID` is `sacct -P`; a CSV header with `num_gpu` and `creation_time` is an Alibaba pod list;
one with `gpu_num` and `submit_time` is a Helios CSV: the raw `cluster_log.csv` when it also has
`start_time` and `end_time`, else the simulator's processed CSV; a PAI 2020 task (or job) table
is recognised by its published header or, headerless as released, by a first record of its
column count with numbers where the schema has them. Anything else is a TraceError that shows
what was seen and lists the formats.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from .errors import TraceError
from .table import ReadContext, open_text

FORMATS = ("sacct", "sacct-json", "helios", "helios-raw", "alibaba", "swf", "philly-json", "pai")
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
    cells = [name.strip() for name in next(csv.reader([first]), [])]
    names = set(cells)
    if {"num_gpu", "creation_time"} <= names:
        return "alibaba"
    if {"gpu_num", "submit_time"} <= names:
        return "helios-raw" if _is_helios_raw(names) else "helios"
    if _is_pai(cells):
        return "pai"
    raise TraceError(
        ctx.name,
        1,
        "format",
        f"cannot tell the format from {first[:120]!r}; expected one of {', '.join(FORMATS)} "
        "(sacct -P needs a JobID|... header, CSVs a gpu_num+submit_time or "
        "num_gpu+creation_time header, SWF a ; header or 18 numbers a line, "
        "PAI 2020 its published columns)",
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


# --- Helios raw logs and PAI 2020 ---------------------------------------------------------------

_PAI_NUMBER = re.compile(r"(?:\d+(?:\.\d*)?)?", re.ASCII)  # a number, or empty (not recorded)


def _is_helios_raw(names: set[str]) -> bool:
    """The release's `cluster_log.csv` records when each job started and ended; the processed CSV
    the simulator reads does not."""
    return {"start_time", "end_time"} <= names


def _is_pai(cells: list[str]) -> bool:
    """A PAI 2020 task or job table: its published header, or a first record of 10 (task) or 6
    (job) fields with numbers in the time (and instance, GPU) columns."""
    from .pai import JOB_COLUMNS, TASK_COLUMNS

    if cells in (list(TASK_COLUMNS), list(JOB_COLUMNS)):
        return True
    numbers = {len(TASK_COLUMNS): (2, 4, 5, 8), len(JOB_COLUMNS): (4, 5)}.get(len(cells))
    return bool(numbers) and bool(cells[0]) and all(_PAI_NUMBER.fullmatch(cells[i]) for i in numbers or ())

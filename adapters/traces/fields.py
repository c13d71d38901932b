"""Field parsers shared by every reader: counts, seconds, wall-clock times, SLURM durations.

All raise `FieldError(field, reason)`; the row loop adds file and line. Wall-clock times carry no
zone in any supported format, so they are read as UTC with `calendar.timegm`: the same file gives
the same numbers whatever the TZ environment variable says. Parsing is strict on purpose (no
`int("1_000")`, no NaN, no infinity): a trace that needs leniency is a trace worth looking at.
"""

from __future__ import annotations

import calendar
import math
import re
from datetime import datetime

from .errors import FieldError

_INT = re.compile(r"[+-]?\d+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_DATETIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})", re.ASCII)
_ELAPSED = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", re.ASCII)

# What sacct prints for a time that has not happened (yet).
_NO_TIME = frozenset({"", "Unknown", "None"})


def parse_name(text: str, field: str) -> str:
    """A required label such as a job id or partition: stripped, and not empty."""
    value = text.strip()
    if not value:
        raise FieldError(field, "empty")
    return value


def parse_count(text: str, field: str) -> int:
    """A non-negative whole number such as a GPU count."""
    value = text.strip()
    if not _INT.fullmatch(value):
        raise FieldError(field, f"not an integer: {text!r}")
    number = int(value)
    if number < 0:
        raise FieldError(field, f"negative: {text!r}")
    return number


def parse_seconds(text: str, field: str) -> float:
    """A non-negative number of seconds; whole numbers stay exactly integer-valued."""
    value = text.strip()
    if _INT.fullmatch(value):
        seconds = float(int(value))
    elif _FLOAT.fullmatch(value):
        seconds = float(value)
    else:
        raise FieldError(field, f"not a number: {text!r}")
    if not math.isfinite(seconds):
        raise FieldError(field, f"not a finite number: {text!r}")
    if seconds < 0:
        raise FieldError(field, f"negative: {text!r}")
    return seconds


def parse_utc(text: str, field: str) -> float:
    """`YYYY-MM-DDTHH:MM:SS` (or with a space) as epoch seconds, read as UTC."""
    match = _DATETIME.fullmatch(text.strip())
    if match is None:
        raise FieldError(field, f"not a time (want YYYY-MM-DDTHH:MM:SS): {text!r}")
    try:
        # datetime() validates the ranges (month 13, Feb 30) that timegm would silently accept.
        year, month, day, hour, minute, second = (int(part) for part in match.groups())
        stamp = datetime(year, month, day, hour, minute, second)
    except ValueError as exc:
        raise FieldError(field, f"not a time ({exc}): {text!r}") from None
    return float(calendar.timegm(stamp.timetuple()))


def parse_slurm_time(text: str, field: str) -> float | None:
    """A sacct time column; None for `Unknown`/`None`/empty (the event has not happened)."""
    if text.strip() in _NO_TIME:
        return None
    return parse_utc(text, field)


def parse_trace_time(text: str, field: str) -> tuple[float, bool]:
    """A CSV trace time: plain seconds, or a wall-clock date; returns `(seconds, is_date)`."""
    value = text.strip()
    if _DATETIME.fullmatch(value):
        return parse_utc(value, field), True
    if _INT.fullmatch(value) or _FLOAT.fullmatch(value):
        return parse_seconds(value, field), False
    raise FieldError(field, f"not a time (want seconds or YYYY-MM-DD HH:MM:SS): {text!r}")


def parse_elapsed(text: str, field: str) -> float:
    """A SLURM duration `[D-][HH:]MM:SS[.fff]` in seconds."""
    match = _ELAPSED.fullmatch(text.strip())
    if match is None:
        raise FieldError(field, f"not a duration (want [D-]HH:MM:SS): {text!r}")
    days, hours, minutes, seconds = match.groups()
    whole = int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60
    return whole + (float(int(seconds)) if seconds.isdigit() else float(seconds))

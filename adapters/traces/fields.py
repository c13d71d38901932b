"""Field parsers shared by every reader: counts, seconds, wall-clock times, SLURM durations.

All raise `FieldError(field, reason)`; the row loop adds file and line. Wall-clock times carry no
zone in any supported format, so they are read as UTC with `calendar.timegm`: the same file gives
the same numbers whatever the TZ environment variable says. Parsing is strict on purpose (no
`int("1_000")`, no NaN, no infinity): a trace that needs leniency is a trace worth looking at.

Bounds (issue 12), defined here once for every reader. They sit far above any real trace and low
enough that numbers stay exact as floats and small for the simulator: a number's text is at most
`MAX_NUMBER_CHARS` long (so `int()` never meets its 4300-digit limit and `float()` never
overflows to infinity); times are at most `MAX_SECONDS` (the end of year 9999: even there a
float keeps 0.0001 s, so a JCT never vanishes by absorption); durations at most `MAX_DURATION`
(ten years); GPUs per job at most `MAX_GPUS`; nodes per job at most `MAX_NODES` (the hostlist
bound of gputwin.api.names).
"""

from __future__ import annotations

import calendar
import math
import re
from datetime import datetime

from .errors import FieldError

MAX_NUMBER_CHARS = 40
MAX_SECONDS = 253_402_300_799.0  # 9999-12-31T23:59:59 UTC as epoch seconds
MAX_DURATION = 315_576_000.0  # ten years of 365.25 days
MAX_GPUS = 100_000

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


def _show(text: str) -> str:
    """`text` for an error message: quoted, and cut short when it is long."""
    return (
        repr(text)
        if len(text) <= MAX_NUMBER_CHARS
        else f"{text[:MAX_NUMBER_CHARS]!r}... ({len(text)} characters)"
    )


def _short(text: str, field: str) -> str:
    """The stripped text of a number, refused when it is longer than any bounded number can be."""
    value = text.strip()
    if len(value) > MAX_NUMBER_CHARS:
        raise FieldError(
            field, f"too long for a number ({len(value)} characters; at most {MAX_NUMBER_CHARS})"
        )
    return value


def parse_count(text: str, field: str, maximum: int) -> int:
    """A whole number from 0 to `maximum` such as a GPU count."""
    value = _short(text, field)
    if not _INT.fullmatch(value):
        raise FieldError(field, f"not an integer: {_show(text)}")
    number = int(value)
    if number < 0:
        raise FieldError(field, f"negative: {text!r}")
    if number > maximum:
        raise FieldError(field, f"too large: {number} (at most {maximum:,})")
    return number


def check_seconds(seconds: float, field: str, maximum: float) -> float:
    """`seconds`, refused when above `maximum` (`MAX_SECONDS` for a time, `MAX_DURATION` for a duration)."""
    if seconds > maximum:
        what = "ten years" if maximum == MAX_DURATION else "9999-12-31T23:59:59"
        raise FieldError(field, f"too large: {seconds:g} s (at most {maximum:.0f} s, {what})")
    return seconds


def parse_seconds(text: str, field: str, maximum: float = MAX_SECONDS) -> float:
    """A number of seconds from 0 to `maximum`; whole numbers stay exactly integer-valued."""
    value = _short(text, field)
    if _INT.fullmatch(value):
        seconds = float(int(value))
    elif _FLOAT.fullmatch(value):
        seconds = float(value)
    else:
        raise FieldError(field, f"not a number: {_show(text)}")
    if not math.isfinite(seconds):
        raise FieldError(field, f"not a finite number: {text!r}")
    if seconds < 0:
        raise FieldError(field, f"negative: {text!r}")
    return check_seconds(seconds, field, maximum)


def parse_utc(text: str, field: str) -> float:
    """`YYYY-MM-DDTHH:MM:SS` (or with a space) as epoch seconds, read as UTC."""
    match = _DATETIME.fullmatch(text.strip())
    if match is None:
        raise FieldError(field, f"not a time (want YYYY-MM-DDTHH:MM:SS): {_show(text)}")
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
    value = _short(text, field)
    if _DATETIME.fullmatch(value):
        return parse_utc(value, field), True
    if _INT.fullmatch(value) or _FLOAT.fullmatch(value):
        return parse_seconds(value, field), False
    raise FieldError(field, f"not a time (want seconds or YYYY-MM-DD HH:MM:SS): {_show(text)}")


def parse_elapsed(text: str, field: str) -> float:
    """A SLURM duration `[D-][HH:]MM:SS[.fff]` in seconds, at most `MAX_DURATION`."""
    match = _ELAPSED.fullmatch(_short(text, field))
    if match is None:
        raise FieldError(field, f"not a duration (want [D-]HH:MM:SS): {_show(text)}")
    days, hours, minutes, seconds = match.groups()
    whole = int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60
    return check_seconds(
        whole + (float(int(seconds)) if seconds.isdigit() else float(seconds)), field, MAX_DURATION
    )

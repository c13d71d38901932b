"""Strict checks for user-supplied values before they reach a SLURM command line.

Commands run without a shell (argument lists only), so `;` or `$(...)` cannot run anything. The
checks still matter: a value must not smuggle an option (`-x`), a list separator (`,`), an
assignment (`=`) or a newline into an argument, and later into a config file or a Lua script. So
every value is matched against a whitelist pattern with `fullmatch` (a `$` anchor would accept a
trailing newline) and refused with a one-line `SlurmInputError` otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime

from .errors import SlurmInputError

# Partition, account, user and switch names: letters, digits, `_ . -`, not starting with `.`/`-`.
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}", re.ASCII)
NAME_RULE = "1-64 characters from A-Z a-z 0-9 _ . - (not starting with . or -)"

# Job states sacct's --state accepts: full names and their short codes.
JOB_STATES = frozenset((
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PENDING",
    "PREEMPTED", "RUNNING", "REQUEUED", "RESIZING", "REVOKED", "SUSPENDED", "TIMEOUT",
    "BF", "CA", "CD", "DL", "F", "NF", "OOM", "PD", "PR", "R", "RQ", "RS", "RV", "S", "TO",
))  # fmt: skip
# The states a job never leaves (sacct's State column, first word): it ran or will never run.
ENDED_STATES = frozenset(("BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
                          "OUT_OF_MEMORY", "TIMEOUT"))  # fmt: skip
STATE = re.compile(r"[A-Z_]{1,16}", re.ASCII)

# Times sacct accepts that we pass on: ISO dates, with or without a time of day, and `now[+-N<unit>]`.
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?)?", re.ASCII)
RELATIVE_TIME = re.compile(r"now([+-]\d{1,9}(seconds|minutes|hours|days|weeks)?)?", re.ASCII)


def _refuse(what: str, value: object, rule: str) -> SlurmInputError:
    # repr() keeps the message on one line even when the value holds a newline.
    return SlurmInputError(f"{what}: refused {value!r:.80}: want {rule}")


def check_name(value: object, what: str) -> str:
    """A partition (account, user, switch) name, returned unchanged when it passes."""
    if not isinstance(value, str) or NAME.fullmatch(value) is None:
        raise _refuse(what, value, NAME_RULE)
    return value


def check_names(values: Iterable[object], what: str) -> list[str]:
    """Several names; duplicates dropped, order kept."""
    return list(dict.fromkeys(check_name(value, what) for value in values))


def check_state(value: object) -> str:
    """A job state name or short code (case-insensitive), returned upper-case."""
    text = value.upper() if isinstance(value, str) else None
    if text is None or STATE.fullmatch(text) is None or text not in JOB_STATES:
        raise _refuse(
            "state", value, "a SLURM job state such as COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED"
        )
    return text


def check_time(value: object, what: str) -> str:
    """A window bound as sacct reads it in UTC: a datetime, `YYYY-MM-DD[THH:MM[:SS]]`, or `now[-N<unit>]`.

    A naive datetime is taken as UTC; an aware one is converted to UTC.
    """
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.replace(microsecond=0).isoformat()
    if isinstance(value, str) and RELATIVE_TIME.fullmatch(value):
        return value
    if isinstance(value, str) and ISO_TIME.fullmatch(value):
        try:
            datetime.fromisoformat(value)  # rejects month 13, Feb 30, hour 25
        except ValueError:
            raise _refuse(what, value, "a valid date") from None
        return value
    raise _refuse(
        what, value, "YYYY-MM-DD[THH:MM[:SS]] (UTC), now, or now-N[seconds|minutes|hours|days|weeks]"
    )

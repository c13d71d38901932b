"""kubectl's vocabulary and looks for the emulator: kind names, `get` tables, ages.

`resolve_kinds` accepts what kubectl accepts for a gputwin kind (kind, plural, singular, short
name, `x.gputwin.io`, the category `gputwin`), `resolve_words` a comma-separated list of them;
`table` prints the CRDs' own printer columns (`gputwin.api.crdgen.NAMES`), so the emulator and
`kubectl get` show the same columns, and with `wide` the `WIDE` columns after them (kept here, not
in the CRDs, whose printer columns stay what `kubectl get` shows). `user_errors` (exit 1, kubectl's
status) and `state_option` are what every emulator command shares.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from gputwin.api.bodies import Body, Obj
from gputwin.api.crdgen import CATEGORY, NAMES, Column
from gputwin.api.status import epoch_seconds
from gputwin.api.v1alpha1 import KINDS
from gputwin.cli.manifests import ManifestError, resource

F = TypeVar("F", bound=Callable[..., Any])


class UserError(Exception):
    """A mistake on the command line; `lines` are printed as `error: …`."""

    def __init__(self, *lines: str) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def exiting(status: int) -> Callable[[F], F]:
    """Turn UserError, ManifestError and OS errors into `error: …` lines and exit `status`."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return command(*args, **kwargs)
            except (UserError, ManifestError) as exc:
                lines: Sequence[str] = exc.lines
            except OSError as exc:
                lines = [str(exc)]
            for line in lines:
                click.echo(f"error: {line}", err=True)
            raise SystemExit(status)

        return wrapper  # type: ignore[return-value]

    return decorate


# The kubectl-shaped commands (apply, get, describe, delete, events) exit 1 on any error, as kubectl
# does, so a script written for kubectl reads them the same; the emulator's own `run` exits 2 as
# every other gputwin command.
user_errors = exiting(1)


state_option = click.option(
    "--state", type=click.Path(path_type=Path, file_okay=False), envvar="GPUTWIN_STATE", default=".gputwin",
    show_default="$GPUTWIN_STATE or ./.gputwin", help="State directory of the emulated cluster.",
)  # fmt: skip


def resolve_words(words: str) -> list[str]:
    """Kinds a comma-separated list names (`gpujobs,gpupartitions`), each once, in the order given."""
    kinds: list[str] = []
    for word in words.split(","):
        if not word:
            raise UserError(f"{words!r}: an empty resource type in a comma-separated list")
        kinds += [k for k in resolve_kinds(word) if k not in kinds]
    return kinds


def resolve_kinds(word: str) -> list[str]:
    """Kinds a command-line word names: kind, plural, singular, short name, `x.gputwin.io`, or `gputwin`."""
    word = word.lower().removesuffix(".gputwin.io")
    if word == CATEGORY:
        return list(KINDS)
    for kind in KINDS:
        names = NAMES[kind]
        if word in (kind.lower(), names.plural, *names.short_names):
            return [kind]
    raise UserError(f'the server doesn\'t have a resource type "{word}"')


def table(
    kind: str, objs: list[Obj], now: float, with_namespace: bool, qualified: bool, wide: bool = False
) -> str:
    """A `kubectl get` table: NAME (and NAMESPACE), the printer columns, AGE on the virtual clock;
    `wide` adds the `WIDE` columns after them (as kubectl adds priority-1 columns)."""
    columns = NAMES[kind].columns
    extra = WIDE[kind] if wide else ()
    header = (["NAMESPACE"] if with_namespace else []) + ["NAME"] + [c.name.upper() for c in columns]
    rows = [header + [c.name.upper() for c in extra]]
    for obj in objs:
        body = Body(obj)
        name = f"{resource(kind)}/{body.name}" if qualified else body.name
        cells = [body.namespace] if with_namespace else []
        rows.append(cells + [name] + [_cell(obj, c, now) for c in (*columns, *extra)])
    return format_rows(rows)


READY = Column("Ready", ".status.conditions[Ready]", "condition")
# `get -o wide`: more columns after the printer columns (CRD printer columns hold the default view).
WIDE: dict[str, tuple[Column, ...]] = {
    "SwitchTopology": (READY, Column("Per-Tier", ".spec.commOverhead.perTier", "number"),
                       Column("Cross-Node", ".spec.commOverhead.crossNode", "number")),
    "GPUPartition": (Column("Running", ".status.running", "integer"), Column("Nodes", ".status.nodes", "integer"),
                     Column("Topology", ".spec.topology", "string"),
                     Column("Task-Types", ".spec.taskTypes", "list"), READY),
    "SchedulingPolicy": (Column("Backfill", ".spec.queue.backfill", "boolean"),
                         Column("Sizing", ".spec.sizing.policy", "string"),
                         Column("Partitions", ".status.partitions", "list"), READY),
    "GPUJob": (Column("User", ".spec.user", "string"), Column("Switches", ".status.switches", "integer"),
               Column("Preemptions", ".status.preemptions", "integer"),
               Column("Reason", ".status.conditions[Scheduled]", "reason")),
    "TraceReplay": (Column("Trials", ".status.trials", "integer"),
                    Column("Promoted", ".status.promoted", "boolean"), READY),
}  # fmt: skip


def format_rows(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("   ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def _cell(obj: Obj, column: Column, now: float) -> str:
    value: Any = obj
    path, _, wanted = column.json_path.strip(".").removesuffix("]").partition("[")
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if wanted:  # a condition by type: its status (or its reason)
        found = [c for c in value or [] if isinstance(c, dict) and c.get("type") == wanted]
        value = found[0].get("reason" if column.type == "reason" else "status") if found else None
    if value is None or value == []:
        return "<none>"
    if isinstance(value, list):
        return ",".join(map(str, value))
    if column.type == "date":
        return age(now - epoch_seconds(str(value)))
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def age(seconds: float) -> str:
    """kubectl's short human duration: 45s, 5m30s, 3h, 2d4h, 400d, 3y20d."""
    s = max(0, int(seconds))
    m, h, d = s // 60, s // 3600, s // 86400
    if s < 120:
        return f"{s}s"
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if h < 3:
        return f"{m}m"
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    if h < 24 * 365 * 2:
        return f"{d}d"
    return f"{d // 365}y{d % 365}d" if d // 365 < 8 else f"{d // 365}y"


__all__ = [
    "WIDE",
    "UserError",
    "age",
    "format_rows",
    "resolve_kinds",
    "resolve_words",
    "state_option",
    "table",
    "user_errors",
]

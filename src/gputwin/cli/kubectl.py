"""kubectl's vocabulary and looks for the emulator: kind names, `get` tables, ages.

`resolve_kinds` accepts what kubectl accepts for a gputwin kind (kind, plural, singular, short
name, `x.gputwin.io`, the category `gputwin`); `table` prints the CRDs' own printer columns
(`gputwin.api.crdgen.NAMES`), so the emulator and `kubectl get` show the same columns.
"""

from __future__ import annotations

from typing import Any

from gputwin.api.bodies import Body, Obj
from gputwin.api.crdgen import CATEGORY, NAMES, Column
from gputwin.api.status import epoch_seconds
from gputwin.api.v1alpha1 import KINDS
from gputwin.cli.manifests import resource


class UserError(Exception):
    """A mistake on the command line; `lines` are printed as `error: …`."""

    def __init__(self, *lines: str) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


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


def table(kind: str, objs: list[Obj], now: float, with_namespace: bool, qualified: bool) -> str:
    """A `kubectl get` table: NAME (and NAMESPACE), the printer columns, AGE on the virtual clock."""
    columns = NAMES[kind].columns
    header = (["NAMESPACE"] if with_namespace else []) + ["NAME"] + [c.name.upper() for c in columns]
    rows = [header]
    for obj in objs:
        body = Body(obj)
        name = f"{resource(kind)}/{body.name}" if qualified else body.name
        cells = [body.namespace] if with_namespace else []
        rows.append(cells + [name] + [_cell(obj, c, now) for c in columns])
    return format_rows(rows)


def format_rows(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("   ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)


def _cell(obj: Obj, column: Column, now: float) -> str:
    value: Any = obj
    for part in column.json_path.strip(".").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return "<none>"
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


__all__ = ["UserError", "age", "format_rows", "resolve_kinds", "table"]

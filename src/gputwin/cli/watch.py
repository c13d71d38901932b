"""`gputwin get -w`: print the objects, then one line per change, as `kubectl get --watch` does.

The emulator has no API server to stream events from: its state is a folder of JSON files, each
replaced atomically (`os.replace`) by the command that changes it. So the watch polls: every
`POLL_SECONDS` it stats the watched kinds' files (inode, size, mtime: a replaced file has a new
inode), and only when that signature changed does it take the shared lock and read the objects,
so it sees a command's whole change at once, never half of one. 0.25 s because changes come from
commands a person or a script runs (`apply`, `run`, `delete`): a quarter second reads as at once,
and an idle watch costs four stats of the folder a second (some milliseconds for a thousand
objects), no inotify dependency and the same on every platform. A line is printed per object whose
content changed (ADDED, MODIFIED, DELETED with its last state), not per file write.

It ends on Ctrl-C (exit 0, no traceback) or after `--request-timeout` (kubectl's flag: `0` means
never, else `30s`, `5m`, `1h30m`, or plain seconds).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import click
import yaml

from gputwin.adapters.emulator import FileStore
from gputwin.api.bodies import Body, Obj
from gputwin.api.crdgen import NAMES
from gputwin.api.v1alpha1 import KINDS
from gputwin.cli.kubectl import UserError, table
from gputwin.cli.manifests import resource

POLL_SECONDS = 0.25
Key = tuple[str, str, str]  # kind, namespace ("" for cluster-scoped), name
Filter = Callable[[Obj], bool]
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_timeout(text: str) -> float | None:
    """kubectl's --request-timeout: seconds, or None for `0` (wait for ever); UserError if unreadable."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        seconds = float(text)
    elif text and "".join(m.group(0) for m in _DURATION.finditer(text)) == text:
        seconds = sum(float(m.group(1)) * _UNIT[m.group(2)] for m in _DURATION.finditer(text))
    else:
        raise UserError(f"--request-timeout: invalid duration {text[:40]!r}: expected 0, 30s, 5m, 1h30m or seconds")
    return seconds or None


@dataclass(frozen=True, slots=True)
class View:
    """What the watch shows and how: one kind, the objects a filter keeps, the output format."""

    kind: str
    keep: Filter
    output: str | None  # None (table), wide, json, yaml, name
    all_namespaces: bool
    events: bool  # --output-watch-events: an EVENT column, or {"type", "object"} documents

    def header(self) -> str:
        line = table(self.kind, [], 0.0, self.with_ns(), False, self.output == "wide")
        return f"{'EVENT':<10}{line}" if self.events else line

    def line(self, event: str, obj: Obj, now: float) -> str:
        """The object as one watch line (a table row) or document (json, yaml, name)."""
        if self.output in ("json", "yaml"):
            doc = {"type": event, "object": obj} if self.events else obj
            text = json.dumps(doc, indent=4) if self.output == "json" else "---\n" + yaml.safe_dump(doc, sort_keys=False)
            return text.rstrip("\n")
        if self.output == "name":
            name = f"{resource(self.kind)}/{Body(obj).name}"
            return f"{event:<10}{name}" if self.events else name
        row = table(self.kind, [obj], now, self.with_ns(), False, self.output == "wide").splitlines()[1]
        return f"{event:<10}{row}" if self.events else row

    def with_ns(self) -> bool:
        return self.all_namespaces and KINDS[self.kind].scope == "Namespaced"


def signature(root: Path, kind: str) -> frozenset[tuple[str, int, int, int]]:
    """The kind's object files as (path, inode, size, mtime): what changes when one is replaced."""
    folder = root / "objects" / NAMES[kind].plural
    found = set()
    for dirpath, _, files in os.walk(folder):
        for name in files:
            if name.endswith(".json") and not name.startswith("."):
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except FileNotFoundError:  # deleted between the listing and the stat: the next poll sees it
                    continue
                found.add((path, st.st_ino, st.st_size, st.st_mtime_ns))
    return frozenset(found)


def read(root: Path, view: View) -> tuple[dict[Key, Obj], float]:
    """The watched objects and the virtual clock, read under the shared lock (a whole change, or none)."""
    store = FileStore(root)
    with store.lock(exclusive=False):
        objs = [o for o in store.list(view.kind) if view.keep(o)]
        now = store.now
    return {(view.kind, Body(o).namespace or "", Body(o).name): o for o in objs}, now


def changes(before: Mapping[Key, Obj], after: Mapping[Key, Obj]) -> list[tuple[str, Obj]]:
    """ADDED and MODIFIED (content changed) in `after`'s order, then DELETED with the last state seen."""
    out = [("ADDED" if key not in before else "MODIFIED", obj) for key, obj in after.items()
           if before.get(key) != obj]  # fmt: skip
    return out + [("DELETED", obj) for key, obj in before.items() if key not in after]


def follow(root: Path, view: View, seen: dict[Key, Obj], header_shown: bool, timeout: float | None,
           sleep: Callable[[float], None] = time.sleep) -> None:  # fmt: skip
    """Print each change after `seen` until Ctrl-C or `timeout` seconds; returns normally either way."""
    deadline = None if timeout is None else time.monotonic() + timeout
    last = signature(root, view.kind)
    try:
        while deadline is None or time.monotonic() < deadline:
            left = POLL_SECONDS if deadline is None else min(POLL_SECONDS, deadline - time.monotonic())
            sleep(max(0.0, left))
            current = signature(root, view.kind)
            if current == last:
                continue
            last = current
            after, now = read(root, view)
            for event, obj in changes(seen, after):
                if not header_shown and view.output in (None, "wide"):
                    click.echo(view.header())
                    header_shown = True
                click.echo(view.line(event, obj, now))
            seen = after
    except KeyboardInterrupt:  # Ctrl-C is how a watch ends: no traceback, no "Aborted!"
        return


def start(root: Path, view: View, found: list[Obj], now: float, watch_only: bool, timeout: float | None) -> None:
    """The first listing (unless --watch-only or nothing is found: `get` said so), then `follow`."""
    seen = {(view.kind, Body(o).namespace or "", Body(o).name): o for o in found}
    shown = False
    if watch_only or not found:
        pass
    elif view.output in (None, "wide"):  # one aligned table, as kubectl's first listing
        lines = table(view.kind, found, now, view.with_ns(), False, view.output == "wide").splitlines()
        click.echo("\n".join(f"{e:<10}{line}" for e, line in zip(["EVENT"] + ["ADDED"] * len(found), lines))
                   if view.events else "\n".join(lines))  # fmt: skip
        shown = True
    else:
        for obj in found:
            click.echo(view.line("ADDED", obj, now))
    follow(root, view, seen, shown, timeout)


__all__ = ["POLL_SECONDS", "View", "changes", "follow", "parse_timeout", "signature", "start"]

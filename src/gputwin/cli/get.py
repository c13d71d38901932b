"""`gputwin get`: stored objects as `kubectl get` shows them (tables, wide, yaml, json, name).

KIND may be one kind (kind, plural, short name), the category `gputwin`, a comma-separated list
(`gpujobs,gpupartitions`) or `KIND/NAME`. `-l` filters by labels as kubectl's equality-based
selectors do: `key=value`, `key==value`, `key!=value`, `key` (has the label), `!key` (has not),
comma = AND. Reading only: the state directory is held with a shared lock, nothing is reconciled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import click
import yaml

from gputwin.adapters.emulator import FileStore
from gputwin.api.bodies import Body, Obj
from gputwin.api.v1alpha1 import KINDS
from gputwin.cli.kubectl import UserError, resolve_words, state_option, table, user_errors
from gputwin.cli.manifests import plural, resource
from gputwin.cli.watch import Filter, View, parse_timeout, start

Requirement = tuple[str, str, str]  # (key, operator: = != exists !exists, value)
LABEL_KEY = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")  # fmt: skip
MAX_SELECTOR = 10_000  # characters: some hundred requirements, far more than any real selector
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")


def parse_selector(text: str) -> list[Requirement]:
    """kubectl's equality-based label selector; UserError naming the bad requirement."""
    out: list[Requirement] = []
    if len(text) > MAX_SELECTOR:
        raise UserError(f"-l: longer than {MAX_SELECTOR} characters")
    for part in text.split(","):
        item = part.strip()
        match = re.fullmatch(r"([^=!]+?)\s*(==|!=|=)\s*(.*)", item)
        if match:
            key, op, value = match.group(1), "!=" if match.group(2) == "!=" else "=", match.group(3)
        elif item.startswith("!"):
            key, op, value = item[1:].strip(), "!exists", ""
        else:
            key, op, value = item, "exists", ""
        # Lengths first: the patterns then never look at more than a label can hold.
        if (
            len(key) > 316
            or len(value) > 63
            or not LABEL_KEY.fullmatch(key)
            or not LABEL_VALUE.fullmatch(value)
        ):
            shown = item[:80] + ("..." if len(item) > 80 else "")  # one short line, whatever was given
            shown = shown if shown.isprintable() else json.dumps(shown)[1:-1]
            raise UserError(
                f"-l: unable to parse requirement '{shown}': expected key=value, key!=value, key or !key"
            )
        out.append((key, op, value))
    return out


def matches(labels: Mapping[str, object], selector: list[Requirement]) -> bool:
    """Whether labels meet every requirement (kubectl: `!=` also holds where the key is absent)."""
    for key, op, value in selector:
        has = key in labels
        if op == "=" and not (has and str(labels[key]) == value):
            return False
        if op == "!=" and has and str(labels[key]) == value:
            return False
        if (op == "exists" and not has) or (op == "!exists" and has):
            return False
    return True


@click.command()
@click.argument("kind")
@click.argument("names", nargs=-1)
@click.option("-o", "--output", type=click.Choice(["wide", "yaml", "json", "name"]), help="Output format.")
@click.option("-l", "--selector", help="Label selector: key=value, key!=value, key, !key; comma = AND.")
@click.option(
    "-n", "--namespace", default="default", show_default=True, help="Namespace of GPUJobs and TraceReplays."
)
@click.option("-A", "--all-namespaces", is_flag=True, help="List namespaced kinds across all namespaces.")
@click.option("-w", "--watch", is_flag=True, help="After listing, print a line per change (Ctrl-C ends).")
@click.option("--watch-only", is_flag=True, help="Print changes only, without the first listing.")
@click.option("--output-watch-events", is_flag=True,
              help="With -w: an EVENT column (ADDED, MODIFIED, DELETED), or {type, object} with -o json|yaml.")
@click.option("--request-timeout", default="0", show_default=True,
              help="With -w: stop watching after this long (30s, 5m, 1h30m, seconds; 0: never), exit 0.")
@state_option
@user_errors
def get(kind: str, names: tuple[str, ...], output: str | None, selector: str | None, namespace: str,
        all_namespaces: bool, watch: bool, watch_only: bool, output_watch_events: bool, request_timeout: str,
        state: Path) -> None:  # fmt: skip
    """Show objects like `kubectl get`: KIND is a kind, plural, short name (gpuj), `gputwin` for all,
    or a comma-separated list of them.

    The table columns are the CRDs' printer columns (`-o wide` adds more); AGE is measured on the
    virtual clock. `KIND/NAME` works too. `-w` watches the state folder (one kind at a time, as
    kubectl): it polls it four times a second, and ends on Ctrl-C or --request-timeout.
    """
    if "/" in kind:
        kind, name = kind.split("/", 1)
        names = (name, *names)
    kinds = resolve_words(kind)
    wanted = parse_selector(selector) if selector is not None else None
    if wanted is not None and names:
        raise UserError("name objects or select them with -l, not both")
    watching = watch or watch_only
    timeout = parse_timeout(request_timeout)
    if watching and len(kinds) > 1:
        raise UserError("you may only specify a single resource type")
    store = FileStore(state)
    with store.lock(exclusive=False):
        found = select(store, kinds, names, None if all_namespaces else namespace)
        now = store.now
    if wanted is not None:
        found = [o for o in found if matches(Body(o).metadata.get("labels") or {}, wanted)]
    if watching:
        if not found and not watch_only:
            _none_found(kinds, namespace, all_namespaces)
        keep = _keeper(kinds[0], names, None if all_namespaces else namespace, wanted)
        start(state, View(kinds[0], keep, output, all_namespaces, output_watch_events), found, now, watch_only,
              timeout)  # fmt: skip
        return
    if not found:
        _none_found(kinds, namespace, all_namespaces)
        return
    _print(found, output, kinds, now, all_namespaces, single=len(names) == 1)


def _none_found(kinds: list[str], namespace: str, all_namespaces: bool) -> None:
    cluster_scoped = all(KINDS[k].scope == "Cluster" for k in kinds)
    where = "" if all_namespaces or cluster_scoped else f" in {namespace} namespace"
    click.echo(f"No resources found{where}.", err=True)


def _keeper(kind: str, names: tuple[str, ...], namespace: str | None, wanted: list[Requirement] | None) -> Filter:
    """What a watch keeps of the kind's objects: `select`'s namespace and names, the -l selector."""
    everywhere = namespace is None or KINDS[kind].scope == "Cluster"

    def keep(obj: Obj) -> bool:
        body = Body(obj)
        return ((everywhere or body.namespace == namespace) and (not names or body.name in names)
                and (wanted is None or matches(body.metadata.get("labels") or {}, wanted)))  # fmt: skip

    return keep


class Lister(Protocol):
    """What `select` reads: a FileStore, or the live cluster's objects (`gputwin.cli.plugin`)."""

    def list(self, kind: str) -> Sequence[Obj]: ...


def select(store: Lister, kinds: list[str], names: tuple[str, ...], namespace: str | None) -> list[Obj]:
    """The stored objects of these kinds (in this namespace, if namespaced), these names if given;
    UserError naming every name not found."""
    found: list[Obj] = []
    for kind in kinds:
        everywhere = namespace is None or KINDS[kind].scope == "Cluster"
        objs = [o for o in store.list(kind) if everywhere or Body(o).namespace == namespace]
        by_name = {Body(o).name: o for o in objs}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise UserError(*(f'{plural(kind)} "{n}" not found' for n in missing))
        found += [by_name[n] for n in names] if names else objs
    return found


def _print(
    found: list[Obj], output: str | None, kinds: list[str], now: float, all_ns: bool, single: bool
) -> None:
    if output in ("yaml", "json"):
        doc: Obj = (
            found[0] if single and len(found) == 1 else {"apiVersion": "v1", "kind": "List", "items": found}
        )
        text = yaml.safe_dump(doc, sort_keys=False) if output == "yaml" else json.dumps(doc, indent=4)
        click.echo(text.rstrip("\n"))
        return
    if output == "name":
        for obj in found:
            click.echo(f"{resource(obj['kind'])}/{obj['metadata']['name']}")
        return
    blocks = []
    for kind in kinds:
        objs = [o for o in found if o["kind"] == kind]
        if objs:
            with_ns = all_ns and KINDS[kind].scope == "Namespaced"
            blocks.append(table(kind, objs, now, with_ns, len(kinds) > 1, wide=output == "wide"))
    click.echo("\n\n".join(blocks))


__all__ = ["get", "matches", "parse_selector", "select"]

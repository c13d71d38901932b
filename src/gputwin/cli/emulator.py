"""The embedded emulator: `gputwin apply / delete / run / events`, kubectl-like, no cluster needed
(`get` and `describe`, which only read, are `gputwin.cli.get` and `gputwin.cli.describe`).

State lives in a directory (`--state`, else `$GPUTWIN_STATE`, else `./.gputwin`): one JSON file
per object, a virtual clock and an event log (`gputwin.adapters.emulator.FileStore`). Every
command that changes objects reconciles them with the operator's own reconcilers
(`gputwin.operator.controller.Controller`) and the simulated backend, at the current virtual time;
only `gputwin run` moves the clock, event by event, never second by second.

User mistakes (a bad manifest, an unknown kind, a missing object) end the command with one line per
problem on stderr and exit status 2, with nothing stored.

A TraceReplay's `spec.trace.file` is relative to the folder of the manifest that declared it
(`apply` records that folder in the annotation `gputwin.io/manifest-folder`, replacing any value
the manifest gave; for `-f -` the current directory), and must stay inside that folder or
`$GPUTWIN_TRACE_DIR`: the sandbox of `gputwin.operator.trace_files`, as in a cluster. A replay whose file fails it, or fails to read,
gets a Failed status; later commands carry on.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import click

from gputwin.adapters.emulator import FileStore
from gputwin.api.bodies import Body, Obj
from gputwin.api.status import LATEST_TIME, rfc3339
from gputwin.api.v1alpha1 import KINDS
from gputwin.cli.kubectl import UserError, age, exiting, format_rows, resolve_kinds, state_option, user_errors
from gputwin.cli.manifests import (
    STDIN_NAME,
    Manifest,
    ManifestError,
    cluster_errors,
    plural,
    read_manifests,
    resource,
)
from gputwin.cli.params import FiniteRange
from gputwin.operator.backends import SimBackend
from gputwin.operator.config import ConfigError, models_dir, trace_access
from gputwin.operator.controller import Controller
from gputwin.operator.forecasts import ForecastSettings, refresh
from gputwin.operator.trace_files import MANIFEST_FOLDER, TraceAccess
from gputwin.runtime.clock import run_steps

ACTIVE = ("Queued", "Running")


json_option = click.option(
    "-o", "--output", type=click.Choice(["json"]), help="json: one JSON document on stdout instead of text."
)

files_option = click.option(
    "-f", "--filename", "paths", multiple=True, type=click.Path(path_type=Path, allow_dash=True),
    help="A YAML file, a folder of them, or - for standard input (multi-document; repeatable).",
)  # fmt: skip


@dataclass(frozen=True)
class Settings:
    """What the environment sets for the emulator's controller: read before anything is stored,
    so a bad setting changes nothing (`$GPUTWIN_TRACE_DIR`, `$GPUTWIN_TRACE_MAX_BYTES` plus the
    manifests' folders; `$GPUTWIN_MODEL_DIR`, where a policy's learned model comes from; the
    `$GPUTWIN_FORECAST_*` of the operator's forecaster)."""

    traces: TraceAccess
    models: Path | None
    forecast: ForecastSettings


def _settings() -> Settings:
    try:
        return Settings(trace_access(manifest_folders=True), models_dir(), ForecastSettings.from_env())
    except ConfigError as exc:
        raise UserError(str(exc)) from None


def _reconcile(store: FileStore, settings: Settings, forecasts: bool = True) -> Controller:
    """A fresh controller (state is in the files), settled at the current virtual time; then the
    waiting GPUJobs' and the partitions' `status.forecast` (`gputwin.operator.forecasts.refresh`)."""
    controller = Controller(store, SimBackend(), traces=settings.traces, models=settings.models)
    settle(controller, store.now)
    if forecasts:
        _forecast(store, settings.forecast)
    return controller


def _forecast(store: FileStore, settings: ForecastSettings) -> None:
    """As the operator's forecaster writes them (`GPUTWIN_FORECAST_SECONDS=0`: none)."""
    if settings.period > 0:
        refresh(store, store.now, settings)


def settle(controller: Controller, now: float) -> None:
    """Reconcile at `now` until nothing more is due then (a 0-second run ends where it starts)."""
    controller.reconcile(now)
    for _ in range(1000):  # each round ends at least one run; the bound only guards against a bug
        when = controller.next_event()
        if when is None or when > now:
            return
        controller.reconcile(now)


# --- apply ----------------------------------------------------------------------------------------


@click.command()
@files_option
@click.option(
    "--dry-run", type=click.Choice(["none", "client", "server"]), default="none", is_flag=False,
    flag_value="client", help="Validate and say what would change; store nothing (client and server alike).",
)  # fmt: skip
@json_option
@state_option
@user_errors
def apply(paths: tuple[Path, ...], dry_run: str, output: str | None, state: Path) -> None:
    """Create or update objects from manifests (`-f -`: standard input), then reconcile at the
    current virtual time.

    Every document is validated first (schema, then the cross-object rules the apply would break);
    any error stores nothing. Prints `KIND.gputwin.io/NAME created|configured|unchanged` per object;
    with --dry-run the same, marked `(dry run)`, and nothing is stored or reconciled.
    """
    if not paths:
        raise UserError("give -f FILE|DIR|-: a manifest, a folder of them, or - for standard input")
    manifests = read_manifests(paths, validate=True)
    settings = _settings()
    store = FileStore(state)
    with store.lock(exclusive=dry_run == "none"):
        stored = [
            obj for kind in ("SwitchTopology", "GPUPartition", "SchedulingPolicy") for obj in store.list(kind)
        ]
        errors = cluster_errors(stored, manifests)
        if errors:
            raise ManifestError(errors)
        if dry_run != "none":
            outcomes = [(m, store.preview(_with_folder(m))) for m in manifests]
            objects = [_with_folder(m) for m in manifests]
        else:
            outcomes = [(m, store.put(_with_folder(m))) for m in manifests]
            _reconcile(store, settings)
            objects = [store.get(m.kind, m.namespace, m.name) or m.obj for m in manifests]
    if output == "json":
        click.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=4))
        return
    mark = {"none": "", "client": " (dry run)", "server": " (server dry run)"}[dry_run]
    for m, outcome in outcomes:
        click.echo(f"{resource(m.kind)}/{m.name} {outcome}{mark}")


def _with_folder(manifest: Manifest) -> Obj:
    """A TraceReplay with the folder of its manifest file in MANIFEST_FOLDER (any other kind as is)."""
    if manifest.kind != "TraceReplay":
        return manifest.obj
    file = manifest.where.rsplit(":doc", 1)[0]  # where: FILE:docN[.items[i]]
    folder = Path.cwd() if file == STDIN_NAME else Path(file).resolve().parent  # stdin: where it runs
    meta = dict(Body(manifest.obj).metadata)
    meta["annotations"] = {**(meta.get("annotations") or {}), MANIFEST_FOLDER: str(folder)}
    return {**manifest.obj, "metadata": meta}


# --- delete ---------------------------------------------------------------------------------------


@click.command()
@click.argument("target", nargs=-1)
@files_option
@click.option(
    "-n", "--namespace", default="default", show_default=True, help="Namespace of GPUJobs and TraceReplays."
)
@click.option("--ignore-not-found", is_flag=True, help="Treat objects that do not exist as deleted.")
@state_option
@user_errors
def delete(target: tuple[str, ...], paths: tuple[Path, ...], namespace: str, ignore_not_found: bool,
           state: Path) -> None:  # fmt: skip
    """Delete objects named in manifests (-f) or as KIND NAME…, then reconcile.

    A deleted running GPUJob stops and frees its GPUs. Nothing is deleted if any object is missing
    (unless --ignore-not-found).
    """
    keys = _delete_keys(target, paths, namespace)
    settings = _settings()
    store = FileStore(state)
    with store.lock():
        present = [k for k in keys if store.get(*k) is not None]
        missing = [k for k in keys if k not in present]
        if missing and not ignore_not_found:
            raise UserError(*(f'{plural(k[0])} "{k[2]}" not found' for k in missing))
        for key in present:
            store.delete(*key)
        _reconcile(store, settings)
    for kind, _, name in present:
        click.echo(f'{resource(kind)} "{name}" deleted')


def _delete_keys(
    target: tuple[str, ...], paths: tuple[Path, ...], namespace: str
) -> list[tuple[str, str | None, str]]:
    if bool(target) == bool(paths):
        raise UserError("give either -f FILE|DIR or KIND NAME…")
    if paths:
        return [(m.kind, m.namespace, m.name) for m in read_manifests(paths, namespace)]
    word, *names = target
    if "/" in word:
        word, first = word.split("/", 1)
        names = [first, *names]
    if not names:
        raise UserError("give the names of the objects to delete: gputwin delete KIND NAME…")
    kinds = resolve_kinds(word)
    if len(kinds) != 1:
        raise UserError(f"name one kind, not the category {word!r}")
    scoped = namespace if KINDS[kinds[0]].scope == "Namespaced" else None
    return [(kinds[0], scoped, n) for n in names]


# --- run ------------------------------------------------------------------------------------------


@click.command()
@click.option(
    "--until", "until", type=FiniteRange(min=0), help="Advance at most this many virtual seconds."
)
@json_option
@state_option
@exiting(2)
def run(until: float | None, output: str | None, state: Path) -> None:
    """Advance virtual time event by event until no GPUJob is Queued or Running.

    Each step jumps to the next run end or policy wake-up and reconciles there. With --until the
    clock stops at most SECONDS later (and moves there even if nothing happens). `-o json`: one
    object, `{"time", "advancedSeconds", "steps", "gpujobs": {phase: count}}`.
    """
    settings = _settings()
    store = FileStore(state)
    with store.lock():
        start = store.now
        controller = _reconcile(store, settings, forecasts=False)
        # No step past the latest time a status can show: a later event waits there, never wedges.
        limit = min(start + until if until is not None else float("inf"), LATEST_TIME)
        steps = run_steps(Emulator(controller, store), StoreClock(store), limit)
        if until is not None and _active(store) and store.now < limit:
            store.set_now(limit)
            settle(controller, limit)
        _forecast(store, settings.forecast)
        if output == "json":
            phases = dict(sorted(_phases(store).items()))
            click.echo(json.dumps({"time": rfc3339(store.now), "advancedSeconds": store.now - start,
                                   "steps": steps, "gpujobs": phases}))  # fmt: skip
        else:
            click.echo(_summary(store, start, steps))


class StoreClock:
    """The emulator's virtual clock: the time kept in its state folder (`gputwin.runtime.clock.Clock`)."""

    def __init__(self, store: FileStore) -> None:
        self.store = store

    def advance_to(self, when: float) -> float:
        self.store.set_now(max(when, self.store.now))
        return self.store.now


class Emulator:
    """The controller as the runtime's loop steps it (`gputwin.runtime.clock.Steps`): the next event
    is the runtime's while any GPUJob is Queued or Running; a step reconciles at that time."""

    def __init__(self, controller: Controller, store: FileStore) -> None:
        self.controller, self.store = controller, store

    def next_event(self) -> float | None:
        return self.controller.next_event() if _active(self.store) else None

    def step(self, now: float) -> None:
        settle(self.controller, now)


def _active(store: FileStore) -> int:
    phases = _phases(store)
    return sum(phases[p] for p in ACTIVE)


def _phases(store: FileStore) -> Counter[str]:
    return Counter(Body(o).status.get("phase", "Pending") for o in store.list("GPUJob"))


def _summary(store: FileStore, start: float, steps: int) -> str:
    phases = _phases(store)
    counts = ", ".join(
        f"{phases[p]} {p.lower()}" for p in ("Succeeded", "Running", "Queued", "Pending", "Rejected")
    )
    if phases["Failed"]:  # only then: the line reads as before when nothing failed
        counts += f", {phases['Failed']} failed"
    return f"{rfc3339(store.now)} (+{age(store.now - start)}, {steps} steps): GPUJobs {counts}"


# --- events ---------------------------------------------------------------------------------------


@click.command()
@click.option("--for", "for_object", metavar="KIND/NAME", help="Only events about this object.")
@json_option
@state_option
@user_errors
def events(for_object: str | None, output: str | None, state: Path) -> None:
    """List the events the reconcilers posted, oldest first (times on the virtual clock).

    `-o json`: a kubectl List of them (empty when there are none).
    """
    wanted: tuple[list[str], str] | None = None
    if for_object is not None:
        if "/" not in for_object:
            raise UserError("--for takes KIND/NAME, e.g. gpujob/resnet50-4gpu")
        word, name = for_object.split("/", 1)
        wanted = (resolve_kinds(word), name)
    store = FileStore(state)
    with store.lock(exclusive=False):
        found = [
            e for e in store.events() if wanted is None or (e["kind"] in wanted[0] and e["name"] == wanted[1])
        ]
    if output == "json":
        click.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": found}, indent=4))
        return
    if not found:
        click.echo("No events found.", err=True)
        return
    rows = [["TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"]]
    rows += [
        [e["time"], e["type"], e["reason"], f"{e['kind'].lower()}/{e['name']}", e["message"]] for e in found
    ]
    click.echo(format_rows(rows))


COMMANDS = (apply, delete, run, events)  # get and describe: gputwin.cli.get, gputwin.cli.describe

__all__ = ["COMMANDS", "settle"]

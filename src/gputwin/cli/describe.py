"""`gputwin describe KIND[/NAME] [NAME…]`: one object at a time, as `kubectl describe` shows it.

For each object: name, namespace, labels and annotations, the spec as an indented block, the rest
of the status, the status conditions as a table, and the events the reconcilers posted about it
(`FileStore.events`). A Queued or Pending GPUJob also gets a `Queue:` block saying why it waits:
its position in its partition's queue and the GPUs it waits for (`gputwin.cli.pending`).

Reading only: the state directory is held with a shared lock and nothing is reconciled, so what
is shown is what the last command left.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import click
import yaml

from gputwin.adapters.emulator import FileStore
from gputwin.api.bodies import Body, Obj
from gputwin.api.status import epoch_seconds
from gputwin.api.v1alpha1 import KINDS
from gputwin.cli.get import select
from gputwin.cli.kubectl import age, format_rows, resolve_words, state_option, user_errors
from gputwin.cli.pending import Placement, Waiting, why_waiting

WAITING = ("Queued", "Pending")


@click.command()
@click.argument("kind")
@click.argument("names", nargs=-1)
@click.option(
    "-n", "--namespace", default="default", show_default=True, help="Namespace of GPUJobs and TraceReplays."
)
@click.option("-A", "--all-namespaces", is_flag=True, help="Describe namespaced kinds across all namespaces.")
@state_option
@user_errors
def describe(kind: str, names: tuple[str, ...], namespace: str, all_namespaces: bool, state: Path) -> None:
    """Show objects in detail, like `kubectl describe`: spec, conditions, events, and for a
    waiting GPUJob why it waits (queue position, GPUs free against GPUs requested)."""
    if "/" in kind:
        kind, name = kind.split("/", 1)
        names = (name, *names)
    store = FileStore(state)
    with store.lock(exclusive=False):
        show(store, kind, names, namespace, all_namespaces)


class Source(Protocol):
    """What describe reads: the emulator's FileStore, or the live cluster (`gputwin.cli.plugin`)."""

    @property
    def now(self) -> float: ...

    def list(self, kind: str) -> Sequence[Obj]: ...

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None: ...

    def events(self) -> Sequence[Obj]: ...


def show(store: Source, kind: str, names: tuple[str, ...], namespace: str, all_namespaces: bool) -> None:
    """Print the describe text of the objects KIND and NAMES select (every one of the kind without names)."""
    kinds = resolve_words(kind)
    found = select(store, kinds, names, None if all_namespaces else namespace)
    texts = [describe_object(store, obj) for obj in found]
    if not texts:
        click.echo(f"No resources found{'' if all_namespaces else f' in {namespace} namespace'}.", err=True)
        return
    click.echo("\n\n".join(texts))


def describe_object(store: Source, obj: Obj) -> str:
    """The whole `describe` text of one stored object."""
    body = Body(obj)
    lines = [_field("Name", body.name)]
    if body.namespace:
        lines.append(_field("Namespace", body.namespace))
    lines += [
        _field("Labels", _pairs(body.metadata.get("labels"))),
        _field("Annotations", _pairs(body.metadata.get("annotations"))),
        _field("API Version", str(obj.get("apiVersion", ""))),
        _field("Kind", str(obj["kind"])),
        _field("Created", f"{body.metadata.get('creationTimestamp', '<unknown>')} ({_age(store, obj)} ago)"),
    ]
    for title, block in (("Spec", obj.get("spec")), ("Data", obj.get("data"))):
        if block:
            lines += [f"{title}:", _indented(block)]
    status = {k: v for k, v in (obj.get("status") or {}).items() if k != "conditions"}
    if status:
        lines += ["Status:", _indented(status)]
    if obj["kind"] in KINDS:
        lines += ["Conditions:", _conditions((obj.get("status") or {}).get("conditions") or [])]
    if obj["kind"] == "GPUJob" and (obj.get("status") or {}).get("phase", "Pending") in WAITING:
        lines += ["Queue:", *_queue(store, obj)]
    lines += ["Events:", _events(store, obj)]
    return "\n".join(lines)


def _field(label: str, value: str) -> str:
    return f"{label + ':':<14}{value}"


def _pairs(mapping: object) -> str:
    if not isinstance(mapping, dict) or not mapping:
        return "<none>"
    return ("\n" + " " * 14).join(f"{k}={v}" for k, v in sorted(mapping.items()))


def _indented(data: object) -> str:
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip("\n")
    return "\n".join(f"  {line}" for line in text.splitlines())


def _age(store: Source, obj: Obj) -> str:
    created = Body(obj).metadata.get("creationTimestamp")
    return age(store.now - epoch_seconds(str(created))) if created else "<unknown>"


def _conditions(conditions: list[Obj]) -> str:
    if not conditions:
        return "  <none>"
    rows = [["TYPE", "STATUS", "REASON", "MESSAGE", "LAST TRANSITION"]]
    rows += [
        [str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason", "")),
         str(c.get("message", "")) or "<none>", str(c.get("lastTransitionTime", ""))]
        for c in conditions
    ]  # fmt: skip
    return _indent_table(rows)


def _events(store: Source, obj: Obj) -> str:
    body = Body(obj)
    mine = [
        e for e in store.events()
        if e["kind"] == obj["kind"] and e["name"] == body.name and (e.get("namespace") or "") == body.namespace
    ]  # fmt: skip
    if not mine:
        return "  <none>"
    rows = [["TIME", "TYPE", "REASON", "MESSAGE"]]
    rows += [[str(e["time"]), str(e["type"]), str(e["reason"]), str(e["message"])] for e in mine]
    return _indent_table(rows)


def _indent_table(rows: list[list[str]]) -> str:
    return "\n".join(f"  {line}" for line in format_rows(rows).splitlines())


def _queue(store: Source, obj: Obj) -> list[str]:
    """Position and reason of a waiting job, from the stored jobs, partition and policy."""
    status = obj.get("status") or {}
    part_name = status.get("partition")
    if not part_name:
        held = next((c for c in status.get("conditions") or [] if c.get("type") == "Scheduled"), None)
        message = held.get("message") if held else "not yet seen by the scheduler (apply or run reconciles)"
        return [_field("  Partition", "<none>"), _field("  Waiting", str(message) or "<none>")]
    part = store.get("GPUPartition", None, part_name) or {}
    part_status = part.get("status") or {}
    policy_obj = store.get("SchedulingPolicy", None, str((part.get("spec") or {}).get("policy", ""))) or {}
    spec = policy_obj.get("spec") or {}
    policy = str((spec.get("queue") or {}).get("policy", "fifo"))
    placing = spec.get("placement") or {}
    queue = [_waiting(j) for j in store.list("GPUJob") if _queued_in(j, part_name)]
    placement = Placement(str(placing.get("policy", "")), float(placing.get("maxWaitSeconds", 300.0)),
                          store.now - _waiting(obj).submit)  # fmt: skip
    me = f"{Body(obj).namespace}/{Body(obj).name}"
    why = why_waiting(me, queue, policy, part_name, int(part_status.get("freeGPUs", 0)),
                      int(part_status.get("totalGPUs", 0)), placement)  # fmt: skip
    return [
        _field("  Partition", f"{part_name} (queue policy {policy})"),
        _field("  Position", f"{why.position} of {why.queued} (by {why.order})"),
        _field("  Waiting", why.reason),
    ]


def _queued_in(job: Obj, partition: str) -> bool:
    status = job.get("status") or {}
    return status.get("phase") == "Queued" and status.get("partition") == partition


def _waiting(job: Obj) -> Waiting:
    body, spec, status = Body(job), job.get("spec") or {}, job.get("status") or {}
    submit = status.get("submitTime") or body.metadata.get("creationTimestamp")
    return Waiting(
        name=f"{body.namespace}/{body.name}",
        submit=epoch_seconds(str(submit)) if submit else 0.0,
        duration=float(spec.get("durationSeconds") or 0.0),
        priority=int(spec.get("priority") or 0),
        gpus=int(status.get("gpus") or spec.get("gpus") or 0),
    )


__all__ = ["describe", "describe_object"]

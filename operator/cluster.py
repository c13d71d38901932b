"""The declared cluster as a store holds it: parse, cross-check, convert, and report on each object.

`read_cluster` parses every SwitchTopology, GPUPartition and SchedulingPolicy with the pydantic
models, runs the cross-object checks of `gputwin.api.validate` over them (each named `Kind/name`),
and files every problem under the object it is about, with a condition reason a person can act
on. When nothing stands in the way it also builds the core's `ClusterSpec`.

`write_cluster_statuses` turns that view, plus what the scheduler knows right now (free GPUs,
queue lengths), into the three kinds' statuses and their `Ready` condition. A backend that runs
jobs itself (SLURM) reports its own `Occupancy`; the partitions it knows show those counts instead
of the operator's idle ledger, and say so in `Ready` when the last read of them failed.

Reading is remembered: `read_cluster(store, previous)` hands back `previous` itself when no object
changed what its users declared (statuses and resourceVersions aside, which every pass's own status
writes bump), so a busy operator does not re-parse, re-check and re-expand a 1,000-node topology
on every pass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TypeVar

from pydantic import ValidationError

from gputwin.api.bodies import Body, Obj
from gputwin.api.convert import cluster_spec, select_nodes, topology_spec
from gputwin.api.problems import Problem, validation_problems
from gputwin.api.status import (
    DeployResult,
    GPUPartitionStatus,
    SchedulingPolicyStatus,
    StatusBase,
    SwitchTopologyStatus,
    rfc3339,
)
from gputwin.api.status import Backend as BackendName
from gputwin.api.v1alpha1 import KINDS, GPUPartition, Resource, SchedulingPolicy, SwitchTopology
from gputwin.api.validate import Document, check_cluster
from gputwin.core.model import ClusterSpec
from gputwin.core.scheduler import Scheduler
from gputwin.runtime.capabilities import Occupancy
from gputwin.runtime.capabilities import DeployOutcome
from gputwin.operator.metrics import record_partitions
from gputwin.operator.statuses import StatusBook, condition, updated
from gputwin.operator.store import Store, is_deleted, name_of

CLUSTER_KINDS = ("SwitchTopology", "GPUPartition", "SchedulingPolicy")
SOURCE = "cluster"  # where check_cluster files problems of no one object (no topology at all)
READY = "Ready"
S = TypeVar("S", bound=StatusBase)


@dataclass(frozen=True, slots=True)
class Issue:
    """One reason an object is not Ready: a CamelCase reason and a `field: what is wrong` message."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Declared:
    """One stored object of a cluster kind; `model` is None when it fails its own schema."""

    kind: str
    name: str
    obj: Obj  # as read for this view: a remembered view keeps an older status (statuses are re-read to write)
    model: Resource | None


@dataclass(frozen=True)
class ClusterView:
    """Every declared cluster object, what is wrong with each, and the ClusterSpec when all is well."""

    declared: tuple[Declared, ...]
    issues: Mapping[tuple[str, str], tuple[Issue, ...]] = field(default_factory=dict)
    spec: ClusterSpec | None = None
    blocker: str = ""  # why there is no spec, in one line
    declarations: tuple[str, ...] = ()  # what users declared, as read (see `read_cluster`)

    def of(self, kind: str) -> list[Declared]:
        return [d for d in self.declared if d.kind == kind]

    def issues_of(self, kind: str, name: str) -> tuple[Issue, ...]:
        return self.issues.get((kind, name), ())


def read_cluster(store: Store, previous: ClusterView | None = None) -> ClusterView:
    """Parse, check and (when valid) convert the cluster objects in `store`; `previous` itself when
    they declare exactly what they declared when it was read."""
    # Oldest first: when two objects clash (nodes claimed twice), the later one is at fault.
    objects = [(kind, obj) for kind in CLUSTER_KINDS for obj in sorted(store.list(kind), key=_created)
               if not is_deleted(obj)]  # fmt: skip
    declarations = tuple(_declaration(kind, obj) for kind, obj in objects)
    if previous is not None and previous.declarations == declarations:
        return previous
    declared: list[Declared] = []
    issues: dict[tuple[str, str], list[Issue]] = {}
    for kind, obj in objects:
            found, messages = _parse(kind, obj)
            declared.append(found)
            if messages:
                issues[(kind, found.name)] = [Issue("Invalid", m) for m in messages]
    docs = [Document(f"{d.kind}/{d.name}", d.model) for d in declared if d.model is not None]
    if any(isinstance(doc.resource, (SwitchTopology, GPUPartition)) for doc in docs):
        for problem in check_cluster(docs, SOURCE):
            for key, issue in _file(problem, declared):
                issues.setdefault(key, []).append(issue)
    _mark_dependents(declared, issues)
    frozen = {key: tuple(found) for key, found in issues.items()}
    blocker = _blocker(ClusterView(tuple(declared), frozen))
    view = ClusterView(tuple(declared), frozen, None, blocker, declarations)
    return view if blocker else ClusterView(view.declared, frozen, _spec(view), "", declarations)


# Bumped by every status write (ours included): not a change of what users declared.
VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields"})


def _declaration(kind: str, obj: Obj) -> str:
    """The object as its users declared it, as one comparable string."""
    metadata = {k: v for k, v in Body(obj).metadata.items() if k not in VOLATILE_METADATA}
    declared = {k: v for k, v in obj.items() if k not in ("status", "metadata")}
    return json.dumps([kind, metadata, declared], sort_keys=True, default=str)


def _created(obj: Obj) -> str:
    return Body(obj).creation_timestamp


def _parse(kind: str, obj: Obj) -> tuple[Declared, list[str]]:
    """The object as a model, or None and its schema errors as `field: reason` messages."""
    # Status is ours and not what makes an object valid: parse what users wrote.
    try:
        model = KINDS[kind].model_validate({k: v for k, v in obj.items() if k != "status"})
    except ValidationError as exc:
        messages = [f"{p.field}: {p.reason}" for p in validation_problems("", exc)]
        return Declared(kind, name_of(obj), obj, None), messages
    return Declared(kind, name_of(obj), obj, model), []


def _reason(kind: str, problem: Problem) -> str:
    """The condition reason for a cross-object problem, from the field it is about."""
    if problem.field == "kind":
        return "MultipleTopologies"
    if problem.field in ("spec.topology", "spec.policy"):
        return "InvalidReference"
    if problem.field.startswith(("spec.nodes", "spec.nodeSelector")):
        return "NodeConflict" if "already in GPUPartition" in problem.reason else "InvalidNodes"
    return "InvalidTopology" if kind == "SwitchTopology" else "Invalid"


def _file(problem: Problem, declared: list[Declared]) -> list[tuple[tuple[str, str], Issue]]:
    """Which objects a problem belongs to, and how to say it to their owner."""
    if problem.document == SOURCE:  # no SwitchTopology: every partition is stuck
        invalid = [d.name for d in declared if d.kind == "SwitchTopology" and d.model is None]
        issue = (
            Issue(
                "TopologyNotReady",
                f"spec.topology: SwitchTopology {invalid[0]!r} is invalid (see its Ready condition)",
            )
            if invalid
            else Issue("MissingTopology", "spec.topology: no SwitchTopology is declared; apply one")
        )
        return [(("GPUPartition", d.name), issue) for d in declared if d.kind == "GPUPartition"]
    kind, _, name = problem.document.partition("/")
    message = f"{problem.field}: {problem.reason}"
    if problem.field in ("spec.topology", "spec.policy"):
        message = _reference_message(problem, declared) or message
    return [((kind, name), Issue(_reason(kind, problem), message))]


def _reference_message(problem: Problem, declared: list[Declared]) -> str | None:
    """A reference to an object that exists but is invalid says so, not "unknown"."""
    target = "SchedulingPolicy" if problem.field == "spec.policy" else "SwitchTopology"
    for d in declared:
        if d.kind == target and d.model is None and repr(d.name) in problem.reason:
            return f"{problem.field}: {target} {d.name!r} is invalid (see its Ready condition)"
    return None


def _mark_dependents(declared: list[Declared], issues: dict[tuple[str, str], list[Issue]]) -> None:
    """A partition on a broken topology cannot schedule either, even if it is fine itself."""
    broken = [d.name for d in declared if d.kind == "SwitchTopology" and (d.kind, d.name) in issues]
    for d in declared:
        if d.kind != "GPUPartition" or (d.kind, d.name) in issues or not isinstance(d.model, GPUPartition):
            continue
        if d.model.spec.topology in broken:
            message = (
                f"spec.topology: SwitchTopology {d.model.spec.topology!r} is not Ready (see its condition)"
            )
            issues[(d.kind, d.name)] = [Issue("TopologyNotReady", message)]


def _blocker(view: ClusterView) -> str:
    """Why the declared objects do not make a cluster to schedule on ('' when they do)."""
    for d in view.declared:
        found = view.issues_of(d.kind, d.name)
        if found and d.kind != "SchedulingPolicy":  # an unused broken policy blocks nothing
            return f"{d.kind}/{d.name}: {found[0].message}"
    for d in view.of("SchedulingPolicy"):
        if view.issues_of(d.kind, d.name) and _is_used(view, d.name):
            return f"{d.kind}/{d.name}: {view.issues_of(d.kind, d.name)[0].message}"
    if not view.of("SwitchTopology"):
        return "no SwitchTopology is declared"
    if not view.of("GPUPartition"):
        return "no GPUPartition is declared"
    return ""


def _is_used(view: ClusterView, policy: str) -> bool:
    return any(
        isinstance(d.model, GPUPartition) and d.model.spec.policy == policy for d in view.of("GPUPartition")
    )


def _spec(view: ClusterView) -> ClusterSpec:
    topology = next(d.model for d in view.of("SwitchTopology") if isinstance(d.model, SwitchTopology))
    partitions = [d.model for d in view.of("GPUPartition") if isinstance(d.model, GPUPartition)]
    policies = [d.model for d in view.of("SchedulingPolicy") if isinstance(d.model, SchedulingPolicy)]
    return cluster_spec(topology, partitions, policies)


# --- statuses -------------------------------------------------------------------------------------


def _ready(
    status: S, issues: tuple[Issue, ...], ok: str, now: float, generation: int | None, reason: str = "Valid"
) -> S:
    if issues:
        message = "; ".join(i.message for i in issues)
        conditions = condition(status.conditions, READY, "False", issues[0].reason, message, now, generation)
    else:
        conditions = condition(status.conditions, READY, "True", reason, ok, now, generation)
    return updated(status, conditions=conditions, observed_generation=generation)


def write_cluster_statuses(
    store: Store, view: ClusterView, scheduler: Scheduler | None, backend: BackendName, now: float,
    installed: bool = False, deployed: DeployOutcome | None = None, occupancy: Occupancy | None = None,
) -> None:  # fmt: skip
    """Status and Ready condition of every declared topology, partition and policy.

    `installed`: the scheduler was just rebuilt, so a policy edited since its last status write
    has now been deployed to the backend (its `lastDeploy` moves to `now`). `deployed`: what a
    backend's deployer said of that deployment (None: the scheduler is the deployment, it worked).
    `occupancy`: the backend's own partition counts (None: the scheduler's ledger is the truth).
    """
    _topologies(store, view, now)
    _partitions(store, view, scheduler, now, occupancy)
    _policies(store, view, scheduler, backend, now, installed, deployed)


def _topologies(store: Store, view: ClusterView, now: float) -> None:
    book = StatusBook(store, "SwitchTopology", SwitchTopologyStatus)
    for obj in store.list("SwitchTopology"):  # fresh: the view's copies may predate this pass's writes
        book.prime(obj)
    for d in view.of("SwitchTopology"):
        status = book.get(None, d.name)
        if isinstance(d.model, SwitchTopology):
            # The converted cluster's topology when there is one: 1,000 nodes are expanded once.
            converted = view.spec.topology if view.spec else None
            spec = converted if converted and converted.name == d.name else topology_spec(d.model)
            status = updated(status, nodes=len(spec.nodes), gpus=sum(n.gpus for n in spec.nodes),
                             switches=len(spec.switches))  # fmt: skip
        ok = "the switch tree and its nodes are valid"
        book.set(
            None,
            d.name,
            _ready(status, view.issues_of(d.kind, d.name), ok, now, book.generation(None, d.name)),
        )
    book.flush()


def _partitions(
    store: Store, view: ClusterView, scheduler: Scheduler | None, now: float, occupancy: Occupancy | None
) -> None:
    book = StatusBook(store, "GPUPartition", GPUPartitionStatus)
    topology = next((d.model for d in view.of("SwitchTopology") if isinstance(d.model, SwitchTopology)), None)
    for obj in store.list("GPUPartition"):  # fresh: the view's copies may predate this pass's writes
        book.prime(obj)
    for d in view.of("GPUPartition"):
        counts = _partition_counts(d, topology, scheduler)
        if occupancy is not None and d.name in occupancy.partitions:
            counts = asdict(occupancy.partitions[d.name])
        status = updated(book.get(None, d.name), **counts)
        ok = "scheduling" if scheduler and d.name in scheduler.partitions else "valid"
        reason, ok = _occupancy_note(d.name, occupancy, ok)
        book.set(
            None,
            d.name,
            _ready(status, view.issues_of(d.kind, d.name), ok, now, book.generation(None, d.name), reason),
        )
    record_partitions({d.name: book.get(None, d.name) for d in view.of("GPUPartition")})  # /metrics gauges
    book.flush()


def _partition_counts(
    d: Declared, topology: SwitchTopology | None, scheduler: Scheduler | None
) -> dict[str, int]:
    part = scheduler.partitions.get(d.name) if scheduler else None
    if part is not None:
        ledger = part.ledger
        return {"nodes": len(part.spec.nodes), "total_gpus": ledger.total_gpus, "free_gpus": ledger.free_gpus,
                "queued": len(part.queued), "running": len(part.running)}  # fmt: skip
    counts = {"nodes": 0, "total_gpus": 0, "free_gpus": 0, "queued": 0, "running": 0}
    if isinstance(d.model, GPUPartition) and topology is not None:
        nodes = topology_spec(topology).nodes
        gpus = {n.name: n.gpus for n in nodes}
        selected = [n for n in select_nodes(d.model.spec, nodes) if n in gpus]
        counts.update(nodes=len(selected), total_gpus=sum(gpus[n] for n in selected))
    return counts


def _occupancy_note(name: str, occupancy: Occupancy | None, ok: str) -> tuple[str, str]:
    """The Ready reason and message of a valid partition, given where its counts came from."""
    if occupancy is None:
        return "Valid", ok
    if occupancy.error:  # counts kept from the last good read: say how old, and why
        since = f"as of {rfc3339(occupancy.as_of)}" if occupancy.as_of is not None else "never read"
        return "OccupancyStale", f"{ok}; occupancy is stale ({since}): {occupancy.error}"
    if name not in occupancy.partitions:  # not (yet) deployed: only the declared capacity is known
        return "NotInBackend", f"{ok}; the backend has no partition {name!r}: counts are the declared ones"
    return "Valid", ok


def _policies(
    store: Store,
    view: ClusterView,
    scheduler: Scheduler | None,
    backend: BackendName,
    now: float,
    installed: bool,
    deployed: DeployOutcome | None,
) -> None:
    book = StatusBook(store, "SchedulingPolicy", SchedulingPolicyStatus)
    for obj in store.list("SchedulingPolicy"):  # fresh: the view's copies may predate this pass's writes
        book.prime(obj)
    for d in view.of("SchedulingPolicy"):
        generation = book.generation(None, d.name)
        users = sorted(
            p.name
            for p in view.of("GPUPartition")
            if isinstance(p.model, GPUPartition) and p.model.spec.policy == d.name
        )
        active = scheduler is not None and any(u in scheduler.partitions for u in users)
        status = updated(book.get(None, d.name), partitions=users, backends=[backend] if active else [])
        last = status.last_deploy
        if active and (
            last is None
            or last.backend != backend
            or (installed and (deployed is not None or status.observed_generation != generation))
        ):  # a deployer deploys the whole cluster: every deployment is news to every policy in use
            outcome = deployed or DeployOutcome("Succeeded", f"scheduling partition(s) {', '.join(users)}")
            result = DeployResult(backend=backend, result=outcome.result, time=rfc3339(now),
                                  message=outcome.message)  # fmt: skip
            status = updated(status, last_deploy=result)
        ok = f"used by {len(users)} partition(s)" if users else "valid; no GPUPartition uses it"
        book.set(None, d.name, _ready(status, view.issues_of(d.kind, d.name), ok, now, generation))
    book.flush()

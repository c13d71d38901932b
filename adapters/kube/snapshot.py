"""A snapshot of a live Kubernetes cluster now (`gputwin.twin.snapshot.Snapshot`), for forecasts.

`build_snapshot` turns the operator's objects into a snapshot, through the views the backend
itself uses (`gputwin.adapters.kube.view`): `NodeView` says which declared nodes are out of
service (missing, NotReady, cordoned, tainted, short of GPUs: `gputwin.adapters.kube.nodes`),
`PodView` sorts our live pods into GPUJob pods and plain Pods.

- A Running GPUJob holds the GPUs its bound pods request (per node); without bound pods, the
  GPUs its `status.allocation` records. It runs since `allocation.since` (else `startTime`);
  `spec.durationSeconds` is its estimate.
- A GPU share (`gpuFraction`) is its fraction of one GPU (`gpu_milli`), never a whole GPU: its pod
  requests no `nvidia.com/gpu`, and the GPU is held once by a reservation pod
  (`gputwin.adapters.kube.sharing`). A running share is placed on the GPU of the reservation pod its
  pod names (`share_gpu`: one index per reservation pod on its node, its slot label where no other
  pod there claims it first), so shares the operator put on one GPU hold one GPU in the twin and
  shares it kept apart hold one each. Known from `status.allocation` only (no pods: the emulator, a
  simulated backend) its GPU is not known and the twin packs it (`share_gpu` -1).
- A MIG profile (`gpuProfile`) is its slices of one MIG-partitioned GPU, as the simulator holds it
  (`gpu_profile`, `gpu_milli` its slices' share, `model` the job's GPU model): its pod requests one
  `nvidia.com/mig-<profile>` and no `nvidia.com/gpu`, on the node it is bound to, and its
  `gputwin.io/gpu-slot` annotation names the operator's MIG-partitioned GPU (`share_gpu`; no other
  share of the node may claim that index). Every job carries its `gpuModel`.
- A Queued or Pending GPUJob waits in `status.partition` (a Pending one not yet routed: in the
  first partition serving its task type; none: left out, the operator rejects it).
- A plain Pod (`schedulerName: gputwin`, no GPUJob) bound to a node of a partition runs there
  since its `status.startTime` (bound elsewhere: left out, as the operator leaves it); an unbound
  one waits in the partition of its task type.

Queue order is the operator's: it submits jobs by (submit time, creation, namespace/name), and a
partition whose policy ranks statically reorders them (priority: highest first; sjf: shortest
estimate first); the other policies rank in the replay itself. `read_snapshot` reads everything
from an API server with the `kubernetes` client, paged, at most `MAX_OBJECTS` of each kind.
`start_latency_s` is the operator's own delay from room appearing to a start, as measured on the
cluster (`Snapshot.start_latency_s`; the operator's `GPUTWIN_FORECAST_START_LATENCY`); 0 by default.
Anything unusable (no valid cluster declared, a status that does not parse) is a one-line
`KubeSnapshotError` naming the object and the field.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kubernetes import client
from pydantic import ValidationError

from gputwin.adapters.kube.manifests import (JOB_ID, MIG_PROFILE, RESERVATION_LABEL, SCHEDULER, SHARE_GPU,
                                             SHARE_GPU_NAMESPACE, SHARE_MILLI, SHARE_SLOT, gpus_of)  # fmt: skip
from gputwin.adapters.kube.plain_pods import DONE, deleting, epoch, phase_of, pod_spec
from gputwin.adapters.kube.store import KubeStore, TIMEOUT
from gputwin.adapters.kube.view import NodeView, PodView
from gputwin.api.bodies import Body, Key, Obj, Pod, key_of
from gputwin.api.convert import cluster_spec
from gputwin.api.problems import validation_problems
from gputwin.api.status import GPUJobStatus, epoch_seconds
from gputwin.api.v1alpha1 import GPUJob, GPUPartition, SchedulingPolicy, SwitchTopology
from gputwin.api.validate import Document, check_cluster
from gputwin.core.model import ClusterSpec, PartitionSpec
from gputwin.errors import InputError
from gputwin.runtime.capabilities import POD_PREFIX
from gputwin.twin.snapshot import OutOfService, PendingJob, RunningJob, SnapPartition, Snapshot

MAX_OBJECTS = 200_000  # of each kind: a cluster larger than this is refused, not read into memory
PAGE = 500
WAITING = ("Pending", "Queued")
OURS = f"spec.schedulerName={SCHEDULER},status.phase!=Succeeded,status.phase!=Failed"


class KubeSnapshotError(InputError):
    """The cluster's objects do not make a usable snapshot (one line: object: field: reason)."""


def declared_cluster(topologies: Sequence[Obj], partitions: Sequence[Obj], policies: Sequence[Obj]) -> ClusterSpec:
    """The core's cluster from the declared objects, checked as the operator checks them."""
    docs = [Document(f"{kind}/{Body(o).name}", _model(model, o)) for kind, model, objs in
            (("SwitchTopology", SwitchTopology, topologies), ("GPUPartition", GPUPartition, partitions),
             ("SchedulingPolicy", SchedulingPolicy, policies)) for o in objs]  # fmt: skip
    if not any(isinstance(d.resource, GPUPartition) for d in docs):
        raise KubeSnapshotError("cluster: GPUPartition: none is declared")
    problems = check_cluster(docs, "cluster")
    if problems:
        raise KubeSnapshotError(str(problems[0]))
    by_kind: dict[type, list[Any]] = {}
    for d in docs:
        by_kind.setdefault(type(d.resource), []).append(d.resource)
    return cluster_spec(by_kind[SwitchTopology][0], by_kind[GPUPartition], by_kind.get(SchedulingPolicy, []))


def _model(model: Any, obj: Obj) -> Any:
    try:
        return model.model_validate({k: v for k, v in obj.items() if k != "status"})
    except ValidationError as exc:
        body = Body(obj)
        name = f"{body.namespace}/{body.name}" if body.namespace else body.name
        found = validation_problems(f"{body.kind}/{name}", exc)[0]
        raise KubeSnapshotError(str(found)) from None


def build_snapshot(cluster: ClusterSpec, jobs: Iterable[Obj], pods: Iterable[Obj], nodes: Iterable[Obj] | None,
                   now: float, tolerated: Sequence[str] = (), start_latency_s: float = 0.0) -> Snapshot:  # fmt: skip
    """The snapshot of these objects at `now` (see the module docstring). `nodes` None: every declared
    node is in service (a simulated backend, which runs on no Nodes). `start_latency_s`: the
    operator's measured start latency, carried into the snapshot."""
    node_view = NodeView(tolerated)
    if nodes is not None:
        node_view.update(cluster, {key_of(n): n for n in nodes}, full=True)
    pod_view = PodView(None)
    for pod in pods:
        if phase_of(pod) not in DONE and not deleting(pod):
            pod_view.apply(key_of(pod), pod)
    held = _held(pod_view.gang.values())
    shares = _share_gpus(pod_view.gang.values(), pod_view.reservations)
    running: list[RunningJob] = []
    waiting: list[tuple[float, str, str, PendingJob]] = []
    for obj in jobs:
        _gpujob(cluster, obj, (held, shares), now, running, waiting)
    for pod in pod_view.plain.values():
        _plain(cluster, pod, now, running, waiting)
    out = tuple(OutOfService(n, why) for n, why in sorted(node_view.problems.items()))
    parts = tuple(SnapPartition(p.name, p.nodes) for p in cluster.partitions)
    pending = _queue_order(cluster, waiting)
    snap = Snapshot(now, "kube", cluster.topology, parts, tuple(sorted(running, key=lambda r: r.job_id)),
                    pending, out, start_latency_s)  # fmt: skip
    problems = snap.problems()
    if problems:
        raise KubeSnapshotError(f"snapshot: {problems[0][0]}: {problems[0][1]}")
    return snap


def _held(pods: Iterable[Obj]) -> dict[str, list[tuple[str, int]]]:
    """GPUJob id -> (node, GPUs) of its bound pods, nodes in the order first seen."""
    held: dict[str, dict[str, int]] = {}
    for pod in pods:
        view = Pod(pod)
        if view.node_name:
            slots = held.setdefault(str(view.annotations.get(JOB_ID)), {})
            slots[view.node_name] = slots.get(view.node_name, 0) + gpus_of(pod)
    return {job: [(n, g) for n, g in slots.items() if g > 0] for job, slots in held.items()}


def _share_gpus(pods: Iterable[Obj], reservations: Mapping[Key, Obj]) -> dict[str, tuple[str, int]]:
    """GPUJob id -> (node, GPU index) of its bound share pod, the GPU being the reservation pod the
    pod names: shares naming one reservation pod get one index, shares naming two get two. A MIG
    job's pod: (node, its slot annotation; -1 without one), an index no reservation pod takes."""
    named: dict[str, tuple[str, Key]] = {}
    mig: dict[str, tuple[str, int]] = {}
    for pod in pods:
        view = Pod(pod)
        notes = view.annotations
        if view.node_name and notes.get(MIG_PROFILE):
            label = str(notes.get(SHARE_SLOT, ""))
            slot = int(label) if label.isdigit() and len(label) < 5 else -1
            mig[str(notes.get(JOB_ID))] = (view.node_name, slot)
        elif view.node_name and notes.get(SHARE_MILLI) and notes.get(SHARE_GPU):
            gpu = (str(notes.get(SHARE_GPU_NAMESPACE) or view.namespace), str(notes[SHARE_GPU]))
            named[str(notes.get(JOB_ID))] = (view.node_name, gpu)
    taken: dict[str, set[int]] = {}
    for node, mig_slot in mig.values():
        taken.setdefault(node, set()).add(mig_slot)
    index = _gpu_index(set(named.values()), reservations, taken)
    return {job: (node, index[(node, gpu)]) for job, (node, gpu) in named.items()} | mig


def _gpu_index(gpus: set[tuple[str, Key]], reservations: Mapping[Key, Obj],
               mig: Mapping[str, set[int]]) -> dict[tuple[str, Key], int]:  # fmt: skip
    """A distinct index per (node, reservation pod): the pod's slot label (the operator's own
    numbering) unless another on the node (or a MIG-partitioned GPU, `mig`) took it first, else the
    lowest one free. Distinct matters more than the number: two GPUs merged into one would look
    half free."""
    by_node: dict[str, list[tuple[bool, int, Key]]] = {}
    for node, gpu in gpus:
        slot = _slot(reservations.get(gpu))
        by_node.setdefault(node, []).append((slot < 0, slot, gpu))
    index: dict[tuple[str, Key], int] = {}
    for node, named in by_node.items():
        taken: set[int] = set(mig.get(node, ()))
        for _, slot, gpu in sorted(named):  # labelled first, so a free index never takes a label's slot
            if slot < 0 or slot in taken:
                slot = min(set(range(len(taken) + 1)) - taken)
            taken.add(slot)
            index[(node, gpu)] = slot
    return index


def _slot(reservation: Obj | None) -> int:
    """A reservation pod's slot label; -1 when it is gone (being deleted, never seen) or unreadable."""
    label = str((Body(reservation).labels if reservation is not None else {}).get(RESERVATION_LABEL, ""))
    return int(label) if label.isdigit() else -1


Held = tuple[dict[str, list[tuple[str, int]]], dict[str, tuple[str, int]]]  # `_held`'s and `_share_gpus`'


def _gpujob(cluster: ClusterSpec, obj: Obj, pods: Held, now: float,
            running: list[RunningJob], waiting: list[tuple[float, str, str, PendingJob]]) -> None:  # fmt: skip
    body = Body(obj)
    job_id = f"{body.namespace or 'default'}/{body.name}"
    if body.deleting:
        return
    job = _model(GPUJob, obj)
    if not isinstance(body.status, Mapping):
        raise KubeSnapshotError(f"GPUJob/{job_id}: status: want an object, got {type(body.status).__name__}")
    try:
        status = GPUJobStatus.model_validate(dict(body.status))
    except ValidationError as exc:
        found = validation_problems(f"GPUJob/{job_id}", exc)[0]
        raise KubeSnapshotError(f"{found.document}: status.{found.field}: {found.reason}") from None
    spec = job.spec
    created = epoch(body.creation_timestamp, now)
    submit = epoch_seconds(status.submit_time) if status.submit_time else created
    common: dict[str, Any] = {"submit": min(submit, now), "estimate": spec.duration_seconds or None,
                              "user": spec.user, "name": spec.job_name, "gpu_milli": spec.gpu_milli,
                              "model": spec.gpu_model, "gpu_profile": spec.gpu_profile}  # fmt: skip
    if status.phase == "Running":
        alloc = status.allocation
        slots = pods[0].get(job_id) or ([(s.node, s.gpus) for s in alloc.slots] if alloc is not None else [])
        share = pods[1].get(job_id) if spec.gpu_milli < 1000 or spec.gpu_profile else None
        if share is not None:
            slots = [(share[0], 1)]  # its pod's node (it requests no nvidia.com/gpu: `_held` has none)
        since = alloc.since if alloc is not None else status.start_time
        start = min(epoch_seconds(since), now) if since else now
        slot = share[1] if share is not None and spec.gpu_milli < 1000 else -1  # a 7g profile: a whole GPU
        running.append(RunningJob(job_id, status.partition or _route(cluster, spec.task_type) or "", start=start,
                                  slots=tuple(slots), share_gpu=slot, **common))  # fmt: skip
    elif status.phase in WAITING:
        partition = status.partition or _route(cluster, spec.task_type)
        if partition is not None:
            pending = PendingJob(job_id, partition, gpus=spec.gpus, priority=spec.priority, **common)
            waiting.append((common["submit"], body.creation_timestamp, job_id, pending))


def _plain(cluster: ClusterSpec, pod: Obj, now: float, running: list[RunningJob],
           waiting: list[tuple[float, str, str, PendingJob]]) -> None:  # fmt: skip
    view = Pod(pod)
    job_id = f"{POD_PREFIX}{view.namespace}/{view.name}"
    spec = pod_spec(job_id, pod, now)
    partition = _route(cluster, spec.task_type)
    common: dict[str, Any] = {"submit": min(spec.submit, now), "estimate": spec.duration or None,
                              "name": spec.name}  # fmt: skip
    if view.node_name:
        owner = next((p.name for p in cluster.partitions if view.node_name in p.nodes), None)
        if owner is None:
            return  # bound where no partition is: not ours to count (the operator says so in an event)
        start = min(epoch(Body(pod).status.get("startTime"), spec.submit), now)
        running.append(RunningJob(job_id, owner, start=start, slots=((view.node_name, spec.gpus),), **common))
    elif partition is not None:
        waiting.append((common["submit"], view.creation_timestamp, job_id,
                        PendingJob(job_id, partition, gpus=spec.gpus, **common)))  # fmt: skip


def _route(cluster: ClusterSpec, task_type: str) -> str | None:
    """The partition a job of `task_type` goes to: the first serving it, else a catch-all one."""
    for part in cluster.partitions:
        if task_type in part.task_types:
            return part.name
    return next((p.name for p in cluster.partitions if not p.task_types), None)


def _queue_order(cluster: ClusterSpec, waiting: list[tuple[float, str, str, PendingJob]]) -> tuple[PendingJob, ...]:
    """The operator's submit order, reordered per partition where its policy ranks statically."""
    ordered = [w[3] for w in sorted(waiting, key=lambda w: w[:3])]
    rank = {i: k for k, i in enumerate(j.job_id for j in ordered)}
    policies = {p.name: p for p in cluster.partitions}

    def key(job: PendingJob) -> tuple[float, ...]:
        queue = _queue(policies.get(job.partition))
        if queue == "priority":
            return (-float(job.priority), rank[job.job_id])
        if queue == "sjf":
            return (job.estimate or 0.0, rank[job.job_id])
        return (float(rank[job.job_id]),)

    return tuple(sorted(ordered, key=lambda j: (j.partition, *key(j))))


def _queue(part: PartitionSpec | None) -> str:
    return part.policy.queue if part is not None else ""


# --- reading the API server -------------------------------------------------------------------


def read_snapshot(api: client.ApiClient, namespace: str | None = None, tolerated: Sequence[str] = (),
                  clock: Callable[[], float] = time.time, observe: bool = True,
                  start_latency_s: float = 0.0) -> tuple[ClusterSpec, Snapshot]:  # fmt: skip
    """The declared cluster and its snapshot, read now from the API server `api` talks to.
    `observe` False: GPUJobs only, no Pods or Nodes (what the operator's simulated backend sees).
    `start_latency_s`: the operator's measured start latency (see the module docstring)."""
    store = KubeStore(api, namespace)
    cluster = declared_cluster(*(_bounded(store.list(kind), kind) for kind in
                                 ("SwitchTopology", "GPUPartition", "SchedulingPolicy")))  # fmt: skip
    jobs = _bounded(store.list("GPUJob"), "GPUJob")
    if not observe:
        return cluster, build_snapshot(cluster, jobs, (), None, clock(), tolerated, start_latency_s)
    core = client.CoreV1Api(api)
    pods = _paged(core.list_pod_for_all_namespaces, "Pod", field_selector=OURS)
    nodes = _paged(core.list_node, "Node")
    return cluster, build_snapshot(cluster, jobs, pods, nodes, clock(), tolerated, start_latency_s)


def _bounded(objs: list[Obj], kind: str) -> list[Obj]:
    if len(objs) > MAX_OBJECTS:
        raise KubeSnapshotError(f"cluster: {kind}: more than {MAX_OBJECTS} objects; refused")
    return objs


def _paged(call: Callable[..., Any], kind: str, **selector: str) -> list[Obj]:
    """Every object of a core list call, page by page, as raw dicts; at most MAX_OBJECTS."""
    items: list[Obj] = []
    token: str | None = None
    while True:
        options: dict[str, Any] = {"limit": PAGE, "_preload_content": False, "_request_timeout": TIMEOUT, **selector}
        if token:
            options["_continue"] = token
        response = call(**options)
        page = json.loads(response.data)
        response.release_conn()
        items.extend(page.get("items") or [])
        _bounded(items, kind)
        token = Body(page).metadata.get("continue") or None
        if token is None:
            return items


__all__ = ["MAX_OBJECTS", "KubeSnapshotError", "build_snapshot", "declared_cluster", "read_snapshot"]

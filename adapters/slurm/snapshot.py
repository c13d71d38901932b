"""A snapshot of the live SLURM cluster now (`gputwin.twin.snapshot.Snapshot`), for forecasts.

Three reads, each without a shell and with a bounded wait:

- `live_topology()` (``scontrol show node`` / ``show topology``): nodes, GPUs, switch tree;
- ``sinfo --json``: per node its state, flags and partitions. A node that is down, drained,
  draining, failing, in maintenance or not responding takes no new work: out of service;
- ``squeue --json``: every job (22.05 ignores ``--states`` with ``--json``, so states are filtered
  here). RUNNING, CONFIGURING and COMPLETING jobs hold GPUs: their GPUs per node come from
  ``gres_detail`` (one entry per node of ``nodes``, in hostlist order), else an even split of
  ``tres_alloc_str``'s ``gres/gpu``. PENDING jobs ask for ``tres_req_str``'s ``gres/gpu``; a
  pending array (``array_task_string`` ``1-3,7``, ``%N`` limits ignored) is one job per task.

GRES sharding (captured live, 22.05 with ``--shards 4``): a node's ``gres`` is
``gpu:h100:2,shard:h100:8`` (shards per GPU = 8 / 2); a running share's ``gres_detail`` is
``shard:2(IDX:0)`` (2 shards on GPU 0) and its TRES ``gres/shard=2``. Such a job holds a share of
one GPU, ``gpu_milli`` = round(N x 1000 / S) (as the sacct readers, `sacct_columns.share`) on that
GPU (``share_gpu``), so a forecast sees the GPU as held, not free; N = S is the GPU whole.
A pending ``gres/shard=N`` is read against the most shards per GPU any node has.

Queue order is SLURM's own: priority (high first), then job id. A job pending in several
partitions (``-p a,b``) is queued in the first. Time limits are minutes (None: unlimited).
Every value is checked (types, names by `check_name`); anything unexpected is a one-line
`SlurmCommandError` naming the command, the job or node, and the field.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import hostlist

from gputwin.adapters.traces.sacct_columns import share
from gputwin.twin.snapshot import OutOfService, PendingJob, RunningJob, SnapPartition, Snapshot

from .checks import check_name
from .commands import run_command
from .errors import SlurmCommandError, SlurmError
from .live import live_topology
from .occupancy import READ_TIMEOUT, gpu_count

SQUEUE_JSON = ("squeue", "--json", "--all")
SINFO_JSON = ("sinfo", "--json", "--all")
HOLDING = frozenset(("RUNNING", "CONFIGURING", "COMPLETING"))
OUT_STATES = frozenset(("down", "drained", "draining", "fail", "failing", "future", "unknown"))
OUT_FLAGS = frozenset(("DRAIN", "FAIL", "MAINT", "NOT_RESPONDING", "POWERED_DOWN", "POWERING_DOWN",
                       "REBOOT_ISSUED"))  # fmt: skip
_TRES_GPU = re.compile(r"(?:^|,)gres/gpu=(\d+)(?:,|$)", re.ASCII)
_TRES_SHARD = re.compile(r"(?:^|,)gres/shard=(\d+)(?:,|$)", re.ASCII)
_GRES_COUNT = re.compile(r"(?:^|,)(gpu|shard)(?::[^:,()]+)?:(\d+)", re.ASCII)  # gpu:h100:2,shard:h100:8
_DETAIL_SHARD = re.compile(r"shard(?::[^:(]+)?:(\d+)\(IDX:(\d+)\)", re.ASCII)  # shard:2(IDX:0): one GPU
_TASKS = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?", re.ASCII)
MAX_TASKS = 1_000_000  # MaxArraySize's ceiling in SLURM


def slurm_snapshot(clock: Callable[[], float] = time.time, timeout: float = READ_TIMEOUT,
                   start_latency_s: float = 0.0) -> Snapshot:  # fmt: skip
    """The cluster of $SLURM_CONF now (`SlurmError` on any failure). `start_latency_s`: this
    cluster's measured delay from room appearing to a job's start (`Snapshot`), recorded as given."""
    topology = live_topology()
    nodes_out = run_command(SINFO_JSON, timeout=timeout)
    jobs_out = run_command(SQUEUE_JSON, timeout=timeout)
    partitions, out_of_service = parse_sinfo_json(nodes_out)
    running, pending = parse_squeue_json(jobs_out, shards_per_node(nodes_out))
    known = {n.name for n in topology.nodes}
    partitions = tuple(SnapPartition(p.name, tuple(n for n in p.nodes if n in known)) for p in partitions)
    out = tuple(o for o in out_of_service if o.node in known)
    snap = Snapshot(clock(), "slurm", topology, partitions, running, pending, out, start_latency_s)
    problems = snap.problems()
    if problems:
        raise SlurmCommandError(f"squeue/sinfo: {problems[0][0]}: {problems[0][1]}")
    return snap


def parse_sinfo_json(text: str) -> tuple[tuple[SnapPartition, ...], tuple[OutOfService, ...]]:
    """Partitions (in order of first appearance) with their nodes, and the nodes out of service."""
    members: dict[str, list[str]] = {}
    out = []
    for i, node in enumerate(_items(text, "sinfo --json", "nodes")):
        where = f"sinfo --json: nodes[{i}]"
        name = _name(_get(node, "name", str, where), f"{where}: name")
        state = _get(node, "state", str, where).lower()
        flags = _get(node, "state_flags", list, where)
        for part in _get(node, "partitions", list, where):
            members.setdefault(_name(part, f"{where}: partitions"), []).append(name)
        bad = sorted(f for f in flags if isinstance(f, str) and f in OUT_FLAGS)
        if state in OUT_STATES or bad:
            out.append(OutOfService(name, "+".join([state, *bad])))
    return tuple(SnapPartition(p, tuple(n)) for p, n in members.items()), tuple(out)


def shards_per_node(text: str) -> dict[str, int]:
    """Node -> its GRES shards per GPU, from ``sinfo --json`` (only nodes with GPUs and shards)."""
    found = {}
    for i, node in enumerate(_items(text, "sinfo --json", "nodes")):
        where = f"sinfo --json: nodes[{i}]"
        counts = Counter[str]()
        for kind, count in _GRES_COUNT.findall(str(node.get("gres", ""))):
            counts[kind] += int(count)
        if counts["gpu"] and counts["shard"]:
            found[_name(_get(node, "name", str, where), f"{where}: name")] = counts["shard"] // counts["gpu"]
    return found


def parse_squeue_json(text: str, shards: Mapping[str, int] | None = None
                      ) -> tuple[tuple[RunningJob, ...], tuple[PendingJob, ...]]:  # fmt: skip
    """Running jobs (in job id order) and pending ones (in queue order); `shards`: node -> GRES
    shards per GPU (`shards_per_node`), so shard jobs read as GPU shares (none: one whole GPU)."""
    running: list[RunningJob] = []
    queued: list[tuple[int, int, int, PendingJob]] = []
    per_node = shards or {}
    most = max(per_node.values(), default=0)
    for i, job in enumerate(_items(text, "squeue --json", "jobs")):
        state = _get(job, "job_state", str, f"squeue --json: jobs[{i}]")
        if state in HOLDING:
            running.append(_running(job, i, per_node))
        elif state == "PENDING":
            queued += _pending(job, i, most)
    queued.sort(key=lambda q: q[:3])
    return tuple(sorted(running, key=lambda r: _id_key(r.job_id))), tuple(q[3] for q in queued)


def _running(job: Mapping[str, Any], i: int, shards: Mapping[str, int]) -> RunningJob:
    job_id, where = _job_id(job, i)
    common = _common(job, where)
    nodes = hostlist.expand_hostlist(_get(job, "nodes", str, where))
    detail = _get(job, "gres_detail", list, where)
    held = _TRES_SHARD.search(_get(job, "tres_alloc_str", str, where))
    if held and len(nodes) == 1 and not _tres_gpus(job["tres_alloc_str"], where):
        return _running_share(job, job_id, where, (nodes[0], int(held[1])), detail, shards, common)
    if len(detail) == len(nodes):
        gpus = [gpu_count(str(d), f"{where}: gres_detail") for d in detail]
    else:
        total = _tres_gpus(_get(job, "tres_alloc_str", str, where), where)
        gpus = [total // len(nodes) + (k < total % len(nodes)) for k in range(len(nodes))] if nodes else []
    slots = tuple((_name(n, f"{where}: nodes"), g) for n, g in zip(nodes, gpus))
    start = float(_get(job, "start_time", int, where))
    return RunningJob(job_id, start=start, slots=slots, **common)


def _running_share(job: Mapping[str, Any], job_id: str, where: str, held: tuple[str, int], detail: list[Any],
                   shards: Mapping[str, int], common: dict[str, Any]) -> RunningJob:  # fmt: skip
    """A job holding `count` shards of `node`: a share of the GPU gres_detail names (see the docstring)."""
    node, count = held
    gpus, milli = share(0, count, shards.get(node, 0), Counter())
    device = _DETAIL_SHARD.fullmatch(str(detail[0])) if len(detail) == 1 else None
    start = float(_get(job, "start_time", int, where))
    return RunningJob(job_id=job_id, start=start, slots=((_name(node, f"{where}: nodes"), gpus),),
                      gpu_milli=milli, share_gpu=int(device[2]) if device and milli < 1000 else -1,
                      **common)  # fmt: skip


def _pending(job: Mapping[str, Any], i: int, shards: int) -> list[tuple[int, int, int, PendingJob]]:
    job_id, where = _job_id(job, i)
    common = _common(job, where)
    asked = _get(job, "tres_req_str", str, where)
    gpus = _tres_gpus(asked, where)
    held = _TRES_SHARD.search(asked)
    gpus, milli = share(gpus, int(held[1]) if held else 0, shards, Counter())
    if milli < 1000:
        common["gpu_milli"] = milli
    nodes = _get(job, "node_count", int, where)
    priority = _get(job, "priority", int, where)
    tasks = _get(job, "array_task_string", str, where) if "array_task_string" in job else ""
    ids = [job_id] if not tasks else [f"{job_id}_{t}" for t in expand_tasks(tasks, where)]
    order = _id_key(job_id)
    return [(-priority, order[0], k, PendingJob(j, gpus=gpus, num_nodes=nodes, priority=priority, **common))
            for k, j in enumerate(ids)]  # fmt: skip


def _common(job: Mapping[str, Any], where: str) -> dict[str, Any]:
    partition = _get(job, "partition", str, where).split(",")[0]
    limit = job.get("time_limit")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise SlurmCommandError(f"{where}: time_limit: not minutes: {limit!r:.40}")
    return {
        "partition": _name(partition, f"{where}: partition"),
        "submit": float(_get(job, "submit_time", int, where)),
        "time_limit": None if limit is None or limit == 0 else limit * 60.0,
        "user": _name(_get(job, "user_name", str, where), f"{where}: user_name"),
        "name": _get(job, "name", str, where)[:1024],
    }


def expand_tasks(text: str, where: str) -> list[int]:
    """`1-3,7,10-20:5%4` -> [1, 2, 3, 7, 10, 15, 20] (the `%` throttle is not a task)."""
    tasks: list[int] = []
    for part in text.split("%")[0].split(","):
        match = _TASKS.fullmatch(part)
        if match is None:
            raise SlurmCommandError(f"{where}: array_task_string: not understood: {text!r:.80}")
        first = int(match[1])
        last = int(match[2]) if match[2] else first
        step = int(match[3]) if match[3] else 1
        if last < first or step < 1 or len(tasks) + (last - first) // step >= MAX_TASKS:
            raise SlurmCommandError(f"{where}: array_task_string: not a task range: {text!r:.80}")
        tasks += range(first, last + 1, step)
    return tasks


def _items(text: str, command: str, key: str) -> list[Mapping[str, Any]]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SlurmCommandError(f"{command}: not JSON: {str(exc)[:80]}") from None
    items = data.get(key) if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise SlurmCommandError(f"{command}: {key}: want a list of objects")
    return items


def _get(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise SlurmCommandError(f"{where}: {key}: want {kind.__name__}, got {value!r:.60}")
    return value


def _job_id(job: Mapping[str, Any], i: int) -> tuple[str, str]:
    base = _get(job, "job_id", int, f"squeue --json: jobs[{i}]")
    task = job.get("array_task_id")
    array = job.get("array_job_id")
    if isinstance(task, int) and isinstance(array, int) and array and not isinstance(task, bool):
        job_id = f"{array}_{task}"  # a running array task: named as squeue -r names it
    else:
        job_id = str(base)
    return job_id, f"squeue --json: job {job_id}"


def _id_key(job_id: str) -> tuple[int, int]:
    base, _, task = job_id.partition("_")
    return int(base), int(task or -1)


def _tres_gpus(tres: str, where: str) -> int:
    match = _TRES_GPU.search(tres)
    return int(match[1]) if match else 0


def _name(value: object, what: str) -> str:
    try:
        return check_name(str(value), what)
    except SlurmError as exc:  # the controller's answer, not the user's input: a command error
        raise SlurmCommandError(str(exc)) from None


__all__ = ["SINFO_JSON", "SQUEUE_JSON", "expand_tasks", "parse_sinfo_json", "parse_squeue_json", "shards_per_node",
           "slurm_snapshot"]

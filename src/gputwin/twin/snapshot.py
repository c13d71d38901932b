"""A cluster at one moment, as frozen values: what runs where, what waits in which order, what is out.

A `Snapshot` is self-contained: it carries the nodes and switch tree (`topology`) and which
nodes each partition of the live scheduler holds, so a forecast can run from the file alone
(`gputwin.twin.seed.default_cluster`), or on a declared cluster given next to it. Times are
seconds on the snapshot's clock (epoch seconds from a live cluster); `taken_at` is "now".
`problems()` lists what makes a snapshot unusable, each as (field, reason), so the file reader
and the live readers report the same mistakes the same way.

`start_latency_s` is the live scheduler's own delay between the event that makes room for a job
(an end, a submission) and that job's start, as measured on that cluster (never fitted): a
forecast starts each job that much after the instant room appears (0: at once).
"""

from __future__ import annotations

from dataclasses import dataclass

from gputwin.core.model import TopologySpec
from gputwin.core.sharing import profile_milli, profile_slices
from gputwin.core.topology import Topology, TopologyError

VERSION = 1
MAX_START_LATENCY = 3600.0  # a scheduler slower than this to start a job is broken, not slow


@dataclass(frozen=True, slots=True)
class SnapPartition:
    """A partition of the live scheduler and the nodes it may place on (live partitions may overlap)."""

    name: str
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OutOfService:
    """A node that takes no new work now; `state` is what the cluster says (down, drained, ...)."""

    node: str
    state: str


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job running now: `slots` are (node, GPUs) as bound, since `start`.

    `time_limit` is the user's limit (the run ends by then at the latest), `estimate` a run-time
    estimate someone made (total seconds, not remaining); either may be unknown (None).
    `gpu_milli` below 1000 is a share of one GPU (`JobSpec.gpu_milli`; `slots` is then one node and
    one GPU); `share_gpu` is that GPU's device index on its node, so shares the live cluster put on
    one GPU are held on one GPU (-1: not known, the twin packs it as it would). `gpu_profile` names
    a MIG profile (`JobSpec.gpu_profile`: `gpu_milli` is then its slices' share), so the twin holds
    it as that many slices of one MIG-partitioned GPU, as the simulator does; `model` is the GPU
    model the job asked for ("": any).
    """

    job_id: str
    partition: str
    submit: float
    start: float
    slots: tuple[tuple[str, int], ...]
    time_limit: float | None = None
    estimate: float | None = None
    user: str = ""
    name: str = ""
    gpu_milli: int = 1000
    share_gpu: int = -1
    model: str = ""
    gpu_profile: str = ""

    @property
    def gpus(self) -> int:
        return sum(g for _, g in self.slots)


@dataclass(frozen=True, slots=True)
class PendingJob:
    """A job waiting now; a snapshot lists them in the live scheduler's queue order (`gpu_milli`
    below 1000: a share of one GPU; `gpu_profile` and `model`: as `RunningJob`'s)."""

    job_id: str
    partition: str
    submit: float
    gpus: int
    num_nodes: int = 0
    priority: int = 0
    time_limit: float | None = None
    estimate: float | None = None
    user: str = ""
    name: str = ""
    gpu_milli: int = 1000
    model: str = ""
    gpu_profile: str = ""


@dataclass(frozen=True, slots=True)
class Snapshot:
    taken_at: float
    source: str
    topology: TopologySpec
    partitions: tuple[SnapPartition, ...]
    running: tuple[RunningJob, ...] = ()
    pending: tuple[PendingJob, ...] = ()
    out_of_service: tuple[OutOfService, ...] = ()
    start_latency_s: float = 0.0

    def problems(self) -> list[tuple[str, str]]:
        """What is inconsistent, as (field path, reason); empty for a usable snapshot."""
        nodes = {n.name: n.gpus for n in self.topology.nodes}
        found: list[tuple[str, str]] = []
        try:  # the switch tree's own checks, first: a node on an unknown switch makes the rest moot
            Topology(self.topology)
        except TopologyError as exc:
            found.append((exc.field, exc.reason))
        if not 0.0 <= self.start_latency_s <= MAX_START_LATENCY:
            found.append(("start_latency_s", f"must be in [0, {MAX_START_LATENCY:g}] seconds"))
        ids: set[str] = set()
        for i, part in enumerate(self.partitions):
            found += [(f"partitions[{i}].nodes", f"unknown node {n!r}") for n in part.nodes if n not in nodes]
        for i, run in enumerate(self.running):
            found += _running_problems(f"running[{i}]", run, nodes, self.taken_at)
            found += _duplicate(f"running[{i}].job_id", run.job_id, ids)
        for i, job in enumerate(self.pending):
            found += _pending_problems(f"pending[{i}]", job)
            found += _duplicate(f"pending[{i}].job_id", job.job_id, ids)
        for i, out in enumerate(self.out_of_service):
            if out.node not in nodes:
                found.append((f"out_of_service[{i}].node", f"unknown node {out.node!r}"))
        return found


def _duplicate(where: str, job_id: str, ids: set[str]) -> list[tuple[str, str]]:
    if job_id in ids:
        return [(where, f"job id {job_id!r} appears twice")]
    ids.add(job_id)
    return []


def _running_problems(where: str, run: RunningJob, nodes: dict[str, int], now: float) -> list[tuple[str, str]]:
    found = []
    if not run.slots:
        found.append((f"{where}.slots", "a running job holds at least one node"))
    used: dict[str, int] = {}
    for node, gpus in run.slots:
        used[node] = used.get(node, 0) + gpus
    for node, gpus in used.items():
        if node not in nodes:
            found.append((f"{where}.slots", f"unknown node {node!r}"))
        elif not 0 <= gpus <= nodes[node]:
            found.append((f"{where}.slots", f"{gpus} GPUs on {node}, which has {nodes[node]}"))
    if run.start > now:
        found.append((f"{where}.start", "after the snapshot was taken"))
    found += _share_problems(where, run.gpu_milli, run.gpus, len(run.slots), run.gpu_profile)
    if run.share_gpu < -1 or (run.share_gpu >= 0 and run.gpu_milli == 1000):
        found.append((f"{where}.share_gpu", "a device index (>= 0) of a share's GPU, or -1"))
    found += _limits(where, run.time_limit, run.estimate)
    return found


def _pending_problems(where: str, job: PendingJob) -> list[tuple[str, str]]:
    found = [] if job.gpus >= 0 and job.num_nodes >= 0 else [(f"{where}.gpus", "must be >= 0")]
    found += _share_problems(where, job.gpu_milli, job.gpus, max(job.num_nodes, 1), job.gpu_profile)
    return found + _limits(where, job.time_limit, job.estimate)


def _share_problems(where: str, milli: int, gpus: int, nodes: int, profile: str) -> list[tuple[str, str]]:
    if not 0 < milli <= 1000:
        return [(f"{where}.gpu_milli", "must be 1..1000 (1000: whole GPUs)")]
    if (milli < 1000 or profile) and (gpus != 1 or nodes != 1):
        return [(f"{where}.gpu_milli", "a share is of one GPU on one node")]
    if profile and not profile_slices(profile):
        return [(f"{where}.gpu_profile", "a MIG profile is named like 1g.10gb (1 to 7 compute slices)")]
    if profile and milli != (uses := profile_milli(profile_slices(profile))):
        return [(f"{where}.gpu_milli", f"MIG profile {profile} uses {uses}")]
    return []


def _limits(where: str, limit: float | None, estimate: float | None) -> list[tuple[str, str]]:
    found = []
    if limit is not None and not limit > 0:
        found.append((f"{where}.time_limit", "must be > 0 seconds"))
    if estimate is not None and not estimate > 0:
        found.append((f"{where}.estimate", "must be > 0 seconds"))
    return found


__all__ = ["MAX_START_LATENCY", "VERSION", "OutOfService", "PendingJob", "RunningJob", "SnapPartition", "Snapshot"]

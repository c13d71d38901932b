"""What-if: fork a snapshot with proposed changes and replay each candidate policy on the same draws.

A `Change` is what an operator proposes besides a policy: nodes drained (out of service from now),
nodes added to a partition (`AddNodes`, written `PARTITION:COUNTxGPUS`), jobs submitted now. `fork`
applies it to the snapshot and to the cluster (added nodes join the partition, under the leaf
switch of its first node). `outcomes` replays every candidate cluster from the one fork with the
one plan of draws (`gputwin.twin.sampling.plan`) and the one seed, so sample i gives every
candidate the same run times and the differences are the policies' alone.

Each `Outcome` holds, per sample, every forked pending job's start and end (inf: not by the
horizon); what a ranking makes of them is the caller's (`gputwin.cli.whatif` builds compare's
summaries and ranks them with `gputwin.sim.evaluation.rank`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gputwin.core.history import Estimator, HistoryEstimator
from gputwin.core.model import ClusterSpec, NodeSpec, PartitionSpec, TopologySpec
from gputwin.core.scheduler import SchedulerOptions
from gputwin.errors import InputError
from gputwin.twin.forecast import DEFAULT_HORIZON, Sample, replays
from gputwin.twin.sampling import DEFAULT_SIGMA, plan
from gputwin.twin.snapshot import OutOfService, PendingJob, Snapshot

_ADD = re.compile(r"([^:\s]+):([1-9][0-9]{0,4})x([1-9][0-9]{0,3})", re.ASCII)


@dataclass(frozen=True, slots=True)
class AddNodes:
    """`count` new nodes of `gpus` GPUs each in `partition`."""

    partition: str
    count: int
    gpus: int

    @staticmethod
    def parse(spec: str) -> AddNodes:
        """`PARTITION:COUNTxGPUS` (e.g. `gpu:4x8`); InputError naming the spec otherwise."""
        match = _ADD.fullmatch(spec.strip())
        if match is None:
            raise InputError(f"--add-nodes: {spec[:40]!r}: want PARTITION:COUNTxGPUS, e.g. gpu:4x8")
        return AddNodes(match[1], int(match[2]), int(match[3]))


@dataclass(frozen=True, slots=True)
class Change:
    drain: tuple[str, ...] = ()
    add: tuple[AddNodes, ...] = ()
    submit: tuple[PendingJob, ...] = ()  # queued after the snapshot's jobs, at `taken_at`

    def label(self) -> str:
        parts = [f"drain {n}" for n in self.drain] + [f"add {a.partition}:{a.count}x{a.gpus}" for a in self.add]
        return ", ".join(parts + ([f"submit {len(self.submit)} jobs"] if self.submit else [])) or "none"


@dataclass(frozen=True, slots=True)
class Outcome:
    """One candidate's replays: per sample, starts and ends of `Fork.snap.pending`, in order."""

    cluster: ClusterSpec
    samples: tuple[Sample, ...]


def fork(snap: Snapshot, cluster: ClusterSpec, change: Change) -> tuple[Snapshot, ClusterSpec]:
    """The snapshot and cluster with `change` applied; InputError for a node or partition unknown."""
    known = {n.name for n in cluster.topology.nodes}
    for node in change.drain:
        if node not in known:
            raise InputError(f"--drain: {node[:60]!r}: no such node in the cluster")
    names = {p.name: p for p in cluster.partitions}
    for add in change.add:
        if add.partition not in names or not names[add.partition].nodes:
            raise InputError(f"--add-nodes: {add.partition[:60]!r}: no such partition with nodes in the cluster")
    for job in change.submit:
        if not any(job.partition == p.name or job.partition in p.task_types or not p.task_types
                   for p in cluster.partitions):  # fmt: skip
            raise InputError(f"--submit: job {job.job_id}: partition: no partition {job.partition!r} in the cluster")
    drained = tuple(OutOfService(n, "drained (what-if)") for n in change.drain)
    new_nodes, parts = _added(cluster, change.add)
    submitted = tuple(dataclasses.replace(j, submit=snap.taken_at) for j in change.submit)
    forked = dataclasses.replace(
        snap, topology=_with(snap.topology, new_nodes), out_of_service=snap.out_of_service + drained,
        pending=snap.pending + submitted,
    )  # fmt: skip
    return forked, dataclasses.replace(cluster, topology=_with(cluster.topology, new_nodes), partitions=parts)


def _with(topology: TopologySpec, nodes: tuple[NodeSpec, ...]) -> TopologySpec:
    return dataclasses.replace(topology, nodes=topology.nodes + nodes) if nodes else topology


def _added(cluster: ClusterSpec, adds: Sequence[AddNodes]) -> tuple[tuple[NodeSpec, ...], tuple[PartitionSpec, ...]]:
    """The new nodes (under the leaf switch of their partition's first node) and the partitions
    holding them."""
    switch_of = {n.name: n.switch for n in cluster.topology.nodes}
    extra: dict[str, list[NodeSpec]] = {}
    for i, add in enumerate(adds):
        part = next(p for p in cluster.partitions if p.name == add.partition)
        extra.setdefault(add.partition, []).extend(
            NodeSpec(f"{add.partition}-whatif{i}-{k}", add.gpus, switch_of[part.nodes[0]]) for k in range(add.count))
    nodes = tuple(n for group in extra.values() for n in group)
    parts = tuple(dataclasses.replace(p, nodes=p.nodes + tuple(n.name for n in extra.get(p.name, ())))
                  for p in cluster.partitions)  # fmt: skip
    return nodes, parts


def outcomes(clusters: Sequence[ClusterSpec], snap: Snapshot, estimator: Estimator | None = None, *,
             samples: int = 32, seed: int = 0, horizon: float = DEFAULT_HORIZON,
             options: SchedulerOptions = SchedulerOptions(), sigma: float = DEFAULT_SIGMA,
             workers: int | None = None) -> list[Outcome]:  # fmt: skip
    """Every cluster replayed from `snap` on the same draws (one plan, one seed)."""
    the_plan = plan(snap, estimator or HistoryEstimator(), sigma)
    out = []
    for cluster in clusters:
        runs, _ = replays(cluster, snap, the_plan, samples=samples, seed=seed, horizon=horizon, options=options,
                          workers=workers)  # fmt: skip
        out.append(Outcome(cluster, tuple(runs)))
    return out


__all__ = ["AddNodes", "Change", "Outcome", "fork", "outcomes"]

"""The Kubernetes backend's view of pods, nodes and its own runs, kept up to date change by change.

A reconcile pass used to rebuild its view from the whole watched copy: on a 10,000-pod burst that
was four walks over every pod and every node per pass (sorting ours from others' pods, summing
others' GPUs per node, finding the plain Pods to queue, checking every run), most of a pass and
enough GIL to slow the watch threads that feed it. Now a pass applies only what the watches say
changed since the last one (`gputwin.adapters.kube.watch.Watched.changes`), and looks again only
at what those changes touch:

- `PodView`: our pods (`schedulerName: gputwin`, not ended), split into plain Pods and GPUJob
  pods, and per node the GPUs bound pods of other schedulers request (`foreign`); our reservation
  pods (one per shared GPU, `gputwin.adapters.kube.sharing`) apart: they are no job, and their GPU
  is counted by the core's shares, never again as a plain Pod's or another scheduler's;
- `NodeView`: per declared node why it is out of service (`gputwin.adapters.kube.nodes`), and
  every node's allocatable GPUs; a node is judged again only when it changed, all of them when
  the declaration did;
- `Runs`: the runs the backend tracks, which pod belongs to which run, and the runs to look at
  again (`recheck`: new, or not seen running yet), so `finished` checks only runs whose pods
  changed.

Like an informer's resync, the backend still starts over from the whole copy now and then
(`KubernetesBackend`'s `FULL_SECONDS`) and after every restart, so a change this bookkeeping
missed is late, never lost. Everything here runs on the reconcile thread only.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from gputwin.adapters.kube.nodes import Expected, node_problem
from gputwin.adapters.kube.manifests import JOB_ID, RESERVATION_LABEL, SCHEDULER, gpus_of, node_gpus
from gputwin.api.bodies import EMPTY, Key, Obj
from gputwin.core.model import ClusterSpec


@dataclass(frozen=True, slots=True)
class Run:
    """A job's current run: its pods (namespace, names) and the partition it runs in."""

    namespace: str
    pods: tuple[str, ...]
    partition: str


class Runs:
    """The runs a backend tracks by job id (in the order they began), with two indexes: the run of
    each pod (`job_of`) and the runs to look at again (`recheck`)."""

    def __init__(self) -> None:
        self._runs: dict[str, Run] = {}
        self._order: dict[str, int] = {}
        self._count = itertools.count()
        self.job_of: dict[Key, str] = {}  # (namespace, pod name) -> job id, for every tracked pod
        self.recheck: set[str] = set()  # runs not seen running yet (new, pending, unseen pods)

    def add(self, job_id: str, run: Run) -> None:
        self.remove(job_id)
        self._runs[job_id] = run
        self._order[job_id] = next(self._count)
        for name in run.pods:
            self.job_of[(run.namespace, name)] = job_id
        self.recheck.add(job_id)

    def remove(self, job_id: str) -> Run | None:
        run = self._runs.pop(job_id, None)
        if run is not None:
            del self._order[job_id]
            for name in run.pods:
                self.job_of.pop((run.namespace, name), None)
            self.recheck.discard(job_id)
        return run

    def get(self, job_id: str) -> Run | None:
        return self._runs.get(job_id)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._runs

    def __iter__(self) -> Iterator[str]:
        return iter(self._runs)

    def in_order(self, job_ids: Collection[str]) -> list[str]:
        """Those of `job_ids` still tracked, in the order their runs began (a deterministic order)."""
        order = self._order
        return sorted((j for j in job_ids if j in order), key=order.__getitem__)


class PodView:
    """Our live pods (plain and GPUJob pods apart) and other schedulers' GPUs per node."""

    def __init__(self, namespace: str | None) -> None:
        self.namespace = namespace  # None: our pods in every namespace
        self.ours: dict[Key, Obj] = {}
        self.plain: dict[Key, Obj] = {}  # of them, the plain Pods (no GPUJob)
        self.gang: dict[Key, Obj] = {}  # of them, the GPUJobs' pods
        self.reservations: dict[Key, Obj] = {}  # our reservation pods (not in `ours`: no job)
        self.foreign: dict[str, int] = {}  # node -> GPUs requested by bound pods of other schedulers
        self._foreign_of: dict[Key, tuple[str, int]] = {}

    def clear(self) -> None:
        for index in (self.ours, self.plain, self.gang, self.reservations, self.foreign, self._foreign_of):
            index.clear()

    def apply(self, key: Key, pod: Obj | None) -> None:
        """The pod at `key` is now `pod` (None: it ended or is gone)."""
        held = self._foreign_of.pop(key, None)
        if held is not None:
            node, gpus = held
            left = self.foreign[node] - gpus
            if left:
                self.foreign[node] = left
            else:
                del self.foreign[node]
        if self.ours.pop(key, None) is not None:
            self.plain.pop(key, None)
            self.gang.pop(key, None)
        self.reservations.pop(key, None)
        if pod is None:
            return
        # Direct lookups (what Pod(pod).scheduler_name, .annotations, .node_name read): this runs for
        # every pod of a 10,000-pod burst, and a Pod view made it about 4x slower.
        spec = pod.get("spec") or EMPTY
        if spec.get("schedulerName") == SCHEDULER:
            if self.namespace is None or key[0] == self.namespace:
                if RESERVATION_LABEL in ((pod.get("metadata") or EMPTY).get("labels") or EMPTY):
                    self.reservations[key] = pod
                    return
                self.ours[key] = pod
                annotations = (pod.get("metadata") or EMPTY).get("annotations") or EMPTY
                (self.gang if annotations.get(JOB_ID) else self.plain)[key] = pod
        elif bound := str(spec.get("nodeName") or ""):  # bound, not ended; still holding while being deleted
            gpus = gpus_of(pod)
            if gpus:
                self._foreign_of[key] = (bound, gpus)
                self.foreign[bound] = self.foreign.get(bound, 0) + gpus


class NodeView:
    """Which declared nodes are out of service and why, and every node's allocatable GPUs."""

    def __init__(self, tolerated: Collection[str]) -> None:
        self.tolerated = tuple(tolerated)
        self.nodes: dict[str, Obj] = {}
        self.allocatable: dict[str, int] = {}
        self.expected: dict[str, Expected] = {}
        self.problems: dict[str, str] = {}  # declared node -> why it takes no new work
        self._cluster: ClusterSpec | None = None

    def update(self, cluster: ClusterSpec, changed: Mapping[Key, Obj | None], full: bool) -> None:
        """Apply changed Nodes (all of them when `full`); judge again what the changes touch."""
        if full:
            self.nodes.clear()
            self.allocatable.clear()
        for (_, name), node in changed.items():
            if node is None:
                self.nodes.pop(name, None)
                self.allocatable.pop(name, None)
            else:
                self.nodes[name] = node
                self.allocatable[name] = node_gpus(node)
        if full or cluster is not self._cluster:
            self._cluster = cluster
            partition_of = {n: p.name for p in cluster.partitions for n in p.nodes}
            self.expected = {
                n.name: Expected(n.switch, n.gpus, partition_of.get(n.name)) for n in cluster.topology.nodes
            }
            self.problems = {}
            names: Collection[str] = self.expected
        else:
            names = [name for _, name in changed if name in self.expected]
        for name in names:
            why = node_problem(self.nodes.get(name), self.expected[name], self.tolerated)
            if why is None:
                self.problems.pop(name, None)
            else:
                self.problems[name] = why


__all__ = ["Key", "NodeView", "PodView", "Run", "Runs"]

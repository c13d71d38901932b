"""GPU accounting for one partition: who has how many free GPUs, indexed for fast placement.

The ledger is the scheduler's own truth about free GPUs (the Kubernetes API server never checks
GPU capacity, and the simulator has nothing else). Placers only read it; `allocate` and `release`
are the only writers, and both keep every index in step:

* `by_free[f]`  - nodes with exactly `f` free GPUs (f >= 1), sorted by node index, so best fit is
  "the first non-empty bucket at or above the request" and ties go to the lowest index;
* `idle`        - nodes with every GPU free (whole-node placement of multi-node jobs);
* `avail`       - nodes with any free GPU, in index order (first fit);
* per leaf switch: free GPU totals and the same buckets, for topology-aware placement.

Node indexes are the topology's global indexes, so placements mean the same thing everywhere.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence

from sortedcontainers import SortedList

from gputwin.core.topology import Topology


class OverAllocation(RuntimeError):
    """An allocation asked for GPUs that are not free: a scheduler bug, never a user error."""


class _Buckets:
    """Nodes grouped by their free-GPU count, each group sorted by node index."""

    __slots__ = ("lists", "idle", "free_total")

    def __init__(self, max_gpus: int) -> None:
        self.lists: list[SortedList] = [SortedList() for _ in range(max_gpus + 1)]
        self.idle: SortedList = SortedList()
        self.free_total = 0


class Ledger:
    """Free GPUs of one partition's nodes."""

    def __init__(self, topology: Topology, nodes: Sequence[int]) -> None:
        self.topology = topology
        self.nodes: tuple[int, ...] = tuple(sorted(nodes))
        self.capacity: dict[int, int] = {i: topology.node_gpus[i] for i in self.nodes}
        self.leaf: dict[int, int] = {i: topology.node_leaf[i] for i in self.nodes}
        self.total_gpus = sum(self.capacity.values())
        self.max_node_gpus = max(self.capacity.values(), default=0)
        self.free: dict[int, int] = {}
        self.avail: SortedList = SortedList()
        self.all = _Buckets(self.max_node_gpus)
        self.leaves: dict[int, _Buckets] = {
            leaf: _Buckets(self.max_node_gpus) for leaf in sorted(set(self.leaf.values()))
        }
        for i in self.nodes:
            self.free[i] = 0
            self._set_free(i, self.capacity[i])

    # --- reads ------------------------------------------------------------------------------------

    @property
    def free_gpus(self) -> int:
        return self.all.free_total

    @property
    def used_gpus(self) -> int:
        return self.total_gpus - self.all.free_total

    def leaf_free(self, leaf: int) -> int:
        return self.leaves[leaf].free_total

    def best_fit_node(self, gpus: int, leaf: int | None = None) -> int | None:
        """The node whose free GPUs are the smallest count >= `gpus` (lowest index on ties)."""
        buckets = self.all if leaf is None else self.leaves[leaf]
        for f in range(max(gpus, 1), self.max_node_gpus + 1):
            nodes = buckets.lists[f]
            if nodes:
                return int(nodes[0])
        return None

    def fullest_first(self, leaf: int | None = None) -> Iterator[int]:
        """Nodes with free GPUs, most free first, then by index."""
        buckets = self.all if leaf is None else self.leaves[leaf]
        for f in range(self.max_node_gpus, 0, -1):
            yield from buckets.lists[f]

    def idle_nodes(self, leaf: int | None = None) -> SortedList:
        return (self.all if leaf is None else self.leaves[leaf]).idle

    # --- writes -----------------------------------------------------------------------------------

    def allocate(self, slots: Iterable[tuple[int, int]]) -> None:
        slots = tuple(slots)
        for node, gpus in slots:
            if gpus <= 0 or self.free.get(node, 0) < gpus:
                raise OverAllocation(f"node {node}: asked {gpus}, free {self.free.get(node)}")
        for node, gpus in slots:
            self._set_free(node, self.free[node] - gpus)

    def release(self, slots: Iterable[tuple[int, int]]) -> None:
        for node, gpus in slots:
            after = self.free[node] + gpus
            if after > self.capacity[node]:
                raise OverAllocation(f"node {node}: release of {gpus} exceeds capacity")
            self._set_free(node, after)

    def _set_free(self, node: int, after: int) -> None:
        before = self.free[node]
        cap = self.capacity[node]
        for buckets in (self.all, self.leaves[self.leaf[node]]):
            buckets.free_total += after - before
            if before:
                buckets.lists[before].remove(node)
            if after:
                buckets.lists[after].add(node)
            if before == cap and after != cap:
                buckets.idle.remove(node)
            elif after == cap and before != cap:
                buckets.idle.add(node)
        if before and not after:
            self.avail.remove(node)
        elif after and not before:
            self.avail.add(node)
        self.free[node] = after

"""GPU accounting for one partition: who has how many free GPUs, indexed for fast placement.

The ledger is the scheduler's own truth about free GPUs (the Kubernetes API server never checks
GPU capacity, and the simulator has nothing else). Placers only read it; `allocate` and `release`
are the only writers, and both keep every index in step. The indexes and the walks placers make
over them are its base, `gputwin.core.freeindex.FreeIndex`; here are the writes, the checks and
the reads for accounting and sizing.

A node can be taken out of service (`set_out_of_service`: NotReady, cordoned, tainted in the live
cluster): its GPUs stay accounted (jobs on it keep running and release as usual) but vanish from
every index and from `free_gpus`/`leaf_free`, so no placer sees them until it is back.

GPUs can also be held by others (`set_external_use`: pods another scheduler bound on a shared
node). They are not this ledger's to allocate or release; a node shows placers its free GPUs minus
those, never below 0. Both mechanisms only change what placers see (`free_of`, the indexes,
`free_gpus`); `allocate`/`release` keep checking the ledger's own count against capacity, so a
job adopted after a restart is accounted wherever it runs.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate
from typing import Iterable, Mapping, Sequence

from gputwin.core.freeindex import FreeIndex, bits


class OverAllocation(Exception):  # not RuntimeError: mypyc compiles Exception subclasses only
    """An allocation asked for GPUs that are not free: a scheduler bug, never a user error."""


class Ledger(FreeIndex):
    """Free GPUs of one partition's nodes."""

    # --- reads ------------------------------------------------------------------------------------

    @property
    def used_gpus(self) -> int:
        return self.total_gpus - self.free_gpus

    def in_service(self, node: int) -> bool:
        """Whether `node` takes new work (not out of service): shares join open GPUs only there."""
        return not self._out >> self._local[node] & 1

    def external_use(self) -> dict[int, int]:
        """Global node index -> GPUs held by others, for the nodes where that is not 0."""
        return {self.nodes[i]: gpus for i, gpus in enumerate(self._external) if gpus}

    def out_of_service(self) -> tuple[int, ...]:
        """Global indexes of the nodes taken out of service, ascending."""
        return tuple(self.nodes[i] for i in bits(self._out))

    def min_nodes(self, gpus: int) -> int:
        """The fewest nodes that could ever hold `gpus` GPUs (all of them idle; within `pool`)."""
        return bisect_left(self._capacity_prefix, gpus) + 1

    def pool(self, nodes: frozenset[int] | None) -> None:
        """Count only these (global) nodes' capacity in `min_nodes` (None: every node again).

        A job of one GPU model could ever have only that model's nodes: sized against the whole
        partition, consolidate would want one node for a job no node of its model can hold alone.
        """
        if nodes is None:
            self._capacity_prefix = self._whole_prefix
            return
        prefix = self._prefixes.get(nodes)
        if prefix is None:
            prefix = list(accumulate(sorted((c for c, n in zip(self.capacity, self.nodes) if n in nodes),
                                            reverse=True)))  # fmt: skip
            self._prefixes[nodes] = prefix
        self._capacity_prefix = prefix

    def nodes_of_free_gpus(self, positions: Sequence[int]) -> list[int]:
        """The node of each position (ascending) in the list of free GPUs that placers see, node
        by node in index order (a node with f free GPUs fills f places). Maps a random sample of
        `range(free_gpus)` to nodes without building that list: one prefix sum, then bisects."""
        ends = list(accumulate(self._shown))
        return [self.nodes[bisect_right(ends, p)] for p in positions]

    @property
    def has_out_of_service(self) -> bool:
        return self._out != 0

    def held_in_service(self, slots: Iterable[tuple[int, int]]) -> int:
        """How many of these allocated GPUs are on nodes in service (the rest are on nodes taken out
        of service: the job holding them keeps them, but nobody else could use them)."""
        if not self._out:
            return sum(gpus for _, gpus in slots)
        local, out = self._local, self._out
        return sum(gpus for node, gpus in slots if not out >> local[node] & 1)

    def usable_gpus(self) -> int:
        """GPUs this partition's jobs can use now: the free ones placers see plus the ones its
        running jobs hold on nodes in service. Not `total_gpus`: out-of-service nodes and GPUs
        held by others count only while (and as far as) a running job of ours holds them."""
        if not self._out:
            return self.free_gpus + self.held_gpus
        held_out = sum(self.capacity[i] - self._free[i] for i in bits(self._out))
        return self.free_gpus + self.held_gpus - held_out

    def fragmented(self, gpus: int) -> int:
        """Free GPUs (as placers see them) a job of `gpus` GPUs could not use: those on nodes with
        fewer free than it asks for, or, for a job larger than any node (taken in whole nodes), those
        on nodes not wholly free ("Beware of Fragmentation"'s measure, per waiting job)."""
        counts, count = self._counts, 0
        # Loops rather than sum(generator), over the bitsets' node counts: this runs after most
        # instants of a replay.
        if gpus <= self.max_node_gpus:
            for f in range(1, gpus):
                count += f * counts[f]
            return count
        full = self._full  # the idle nodes with f GPUs: not partly free
        for f in range(1, self.max_node_gpus + 1):
            count += f * (counts[f] - full[f])
        return count

    def mask_of(self, nodes: Iterable[int]) -> int:
        """A bitset of these (global) nodes, for `best_fit_node(exclude=...)`."""
        return sum(1 << self._local[n] for n in set(nodes))

    # --- writes -----------------------------------------------------------------------------------

    def set_out_of_service(self, nodes: Iterable[int]) -> bool:
        """Exactly these (global) nodes are out of service now; others of this partition are back.

        Nodes not in this partition are ignored. True if anything changed.
        """
        out = sum(1 << self._local[n] for n in set(nodes) if n in self._local)
        changed = out ^ self._out
        for i in bits(changed):
            bit = 1 << i
            before = self._visible(i)
            self._out ^= bit  # going out hides its free GPUs from every index; coming back shows them
            self._index(i, before, self._visible(i))
        return bool(changed)

    def set_external_use(self, used: Mapping[int, int]) -> bool:
        """Exactly these GPUs per (global) node are held by others now; every other node of this
        partition has none held. Nodes not in this partition are ignored. True if anything changed."""
        changed = False
        for i, node in enumerate(self.nodes):
            gpus = max(used.get(node, 0), 0)
            if gpus != self._external[i]:
                before = self._visible(i)
                self._external[i] = gpus
                self._index(i, before, self._visible(i))
                changed = True
        return changed

    def allocate(self, slots: Sequence[tuple[int, int]]) -> None:
        """Take GPUs; all-or-nothing, so a refused allocation changes nothing."""
        if isinstance(slots, tuple) and len(slots) == 1:  # most jobs: one node, checked and taken here
            node, gpus = slots[0]
            at = self._local_at
            if 0 <= node < len(at) and (i := at[node]) >= 0 and 0 < gpus <= self._free[i]:
                self._change(i, -gpus)
                return
        if self._take(slots, -1):
            return
        wanted = self._per_node(slots)  # repeats that do not fit, or something is wrong: say what
        for i, gpus in wanted:
            if self._free[i] < gpus:
                raise OverAllocation(f"node {self.nodes[i]}: asked {gpus}, free {self._free[i]}")
        for i, gpus in wanted:  # not reached: `_take` would have taken them
            self._change(i, -gpus)

    def release(self, slots: Sequence[tuple[int, int]]) -> None:
        """Give GPUs back; all-or-nothing, like `allocate`."""
        if isinstance(slots, tuple) and len(slots) == 1:  # one node, as in `allocate`
            node, gpus = slots[0]
            at = self._local_at
            if 0 <= node < len(at) and (i := at[node]) >= 0 and 0 < gpus <= self.capacity[i] - self._free[i]:
                self._change(i, gpus)
                return
        if self._take(slots, 1):
            return
        returned = self._per_node(slots)
        for i, gpus in returned:
            if self._free[i] + gpus > self.capacity[i]:
                raise OverAllocation(f"node {self.nodes[i]}: release of {gpus} exceeds capacity")
        for i, gpus in returned:  # not reached, as in `allocate`
            self._change(i, gpus)

    def _take(self, slots: Sequence[tuple[int, int]], sign: int) -> bool:
        """Change every slot's node by `sign` x its GPUs, one slot after the other, each checked
        first (`sign` -1: that many free; 1: room below capacity); False, with nothing changed, as
        soon as one is invalid or does not fit. Applied in turn, a node that repeats is checked
        against what the slots before it left, so this takes exactly what summing per node would
        (`_per_node`, which the callers then use to say what is wrong); and no list or set is built
        for a job's slots, as a check of all of them before any change needed (placers never
        repeat a node: this is every job's path)."""
        at, free, capacity = self._local_at, self._free, self.capacity
        # A tuple (what placers give) in a typed local: compiled, indexed directly, not iterated generically.
        listed: tuple[tuple[int, int], ...] = slots if isinstance(slots, tuple) else tuple(slots)
        done = 0
        for node, gpus in listed:
            i = at[node] if 0 <= node < len(at) else -1
            if i < 0 or gpus <= 0 or ((free[i] < gpus) if sign < 0 else (free[i] + gpus > capacity[i])):
                for undo in range(done):  # back to where it was (every change is undone exactly)
                    back_node, back = listed[undo]
                    self._change(at[back_node], -sign * back)
                return False
            self._change(i, gpus if sign > 0 else -gpus)
            done += 1
        return True

    def _per_node(self, slots: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """Slots summed per local node index; unknown nodes and non-positive counts are refused."""
        total: dict[int, int] = {}
        for node, gpus in slots:
            i = self._local.get(node)
            if i is None or gpus <= 0:
                raise OverAllocation(f"node {node}: {gpus} GPUs is not a valid slot of this partition")
            total[i] = total.get(i, 0) + gpus
        return list(total.items())

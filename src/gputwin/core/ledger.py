"""GPU accounting for one partition: who has how many free GPUs, indexed for fast placement.

The ledger is the scheduler's own truth about free GPUs (the Kubernetes API server never checks
GPU capacity, and the simulator has nothing else). Placers only read it; `allocate` and `release`
are the only writers, and both keep every index in step.

Indexes are bitsets (Python ints, one bit per node of the partition, bit i = the partition's i-th
node in topology order): `_by_free[f]` holds nodes with exactly f free GPUs, `_idle` nodes with
every GPU free, `_avail` nodes with any. A bitset answers "lowest-index node in this set" and
"the same, restricted to one leaf switch" (`& leaf mask`) in a few machine-word operations, which
is what best fit with lowest-index tie-breaks needs on every placement. Callers see the topology's
global node indexes, so placements mean the same thing everywhere.

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
from typing import Iterable, Iterator, Mapping, Sequence

from gputwin.core.topology import Topology


class OverAllocation(Exception):  # not RuntimeError: mypyc compiles Exception subclasses only
    """An allocation asked for GPUs that are not free: a scheduler bug, never a user error."""


def _bits(mask: int) -> Iterator[int]:
    """Set bit positions of `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class Ledger:
    """Free GPUs of one partition's nodes."""

    def __init__(self, topology: Topology, nodes: Sequence[int]) -> None:
        self.topology = topology
        self.nodes: tuple[int, ...] = tuple(sorted(nodes))  # local index -> global index
        self._local = {g: i for i, g in enumerate(self.nodes)}
        self.capacity: list[int] = [topology.node_gpus[g] for g in self.nodes]
        self._leaf_of: list[int] = [topology.node_leaf[g] for g in self.nodes]
        self.total_gpus = sum(self.capacity)
        self.max_node_gpus = max(self.capacity, default=0)
        self._free: list[int] = list(self.capacity)
        self._by_free: list[int] = [0] * (self.max_node_gpus + 1)
        self._leaf_mask: dict[int, int] = {}
        self._leaf_free: dict[int, int] = {}
        for i, (cap, leaf) in enumerate(zip(self.capacity, self._leaf_of)):
            self._by_free[cap] |= 1 << i
            self._leaf_mask[leaf] = self._leaf_mask.get(leaf, 0) | 1 << i
            self._leaf_free[leaf] = self._leaf_free.get(leaf, 0) + cap
        self._by_free[0] = 0  # zero-GPU nodes are never candidates
        self._idle = sum(1 << i for i, cap in enumerate(self.capacity) if cap)
        self._avail = self._idle
        self.free_gpus = self.total_gpus
        self.leaves: tuple[int, ...] = tuple(sorted(self._leaf_mask))
        # In leaf order, so a walk over it (`best_fit_leaf`) meets ties lowest leaf first.
        self._leaf_free = {leaf: self._leaf_free[leaf] for leaf in self.leaves}
        self._whole_prefix = list(accumulate(sorted(self.capacity, reverse=True)))
        self._capacity_prefix = self._whole_prefix
        self._prefixes: dict[frozenset[int], list[int]] = {}  # `pool`'s, one per GPU model's nodes
        self._out = 0  # bitset of nodes out of service: their free GPUs are hidden from placers
        self._external: list[int] = [0] * len(self.nodes)  # GPUs held by others, per local node
        self._shown: list[int] = list(self.capacity)  # free GPUs placers see, per local node (`_visible`)
        self.held_gpus = 0  # GPUs this ledger has allocated (to running jobs), on any node

    # --- reads ------------------------------------------------------------------------------------

    @property
    def used_gpus(self) -> int:
        return self.total_gpus - self.free_gpus

    def free_of(self, node: int) -> int:
        """Free GPUs a placer may use on `node` (0 while it is out of service, less what others hold)."""
        return self._visible(self._local[node])

    def in_service(self, node: int) -> bool:
        """Whether `node` takes new work (not out of service): shares join open GPUs only there."""
        return not self._out >> self._local[node] & 1

    def external_use(self) -> dict[int, int]:
        """Global node index -> GPUs held by others, for the nodes where that is not 0."""
        return {self.nodes[i]: gpus for i, gpus in enumerate(self._external) if gpus}

    def out_of_service(self) -> tuple[int, ...]:
        """Global indexes of the nodes taken out of service, ascending."""
        return tuple(self.nodes[i] for i in _bits(self._out))

    def leaf_free(self, leaf: int) -> int:
        return self._leaf_free[leaf]

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

    def best_fit_node(self, gpus: int, leaf: int | None = None, exclude: int = 0) -> int | None:
        """The node whose free GPUs are the smallest count >= `gpus` (lowest index on ties)."""
        scope = ~exclude if leaf is None else self._leaf_mask[leaf] & ~exclude
        by_free = self._by_free
        for f in range(max(gpus, 1), self.max_node_gpus + 1):
            mask = by_free[f] & scope
            if mask:
                return self.nodes[(mask & -mask).bit_length() - 1]
        return None

    def best_fit_leaf(self, gpus: int) -> int | None:
        """The leaf whose free GPUs are the smallest count >= `gpus` (lowest index on ties), or None."""
        best, least = None, 0
        for leaf, free in self._leaf_free.items():
            if free >= gpus and (best is None or free < least):
                best, least = leaf, free
        return best

    def fill(self, gpus: int, leaf: int | None, max_nodes: int | None) -> tuple[tuple[int, int], ...] | None:
        """`gpus` GPUs on one node if any holds them (best fit), else the whole free GPUs of the
        fullest nodes, then the best-fitting node for the remainder; None if that needs more than
        `max_nodes` nodes or the GPUs are not there. Within `leaf` if given.

        One walk over the bitsets by local index, rather than `best_fit_node`, `fullest_first`,
        `free_of` and `mask_of` calls and their generators: this runs for most jobs placed."""
        scope = -1 if leaf is None else self._leaf_mask[leaf]
        by_free, nodes, top = self._by_free, self.nodes, self.max_node_gpus
        for f in range(max(gpus, 1), top + 1):
            mask = by_free[f] & scope
            if mask:  # fits on one node: that is the fewest, and the best fit
                return ((nodes[(mask & -mask).bit_length() - 1], gpus),)
        chosen: list[tuple[int, int]] = []
        need, taken = gpus, 0
        cap = -1 if max_nodes is None else max_nodes - 1
        for f in range(min(top, need - 1), 0, -1):  # no node holds `gpus`: every free count is below it
            mask = by_free[f] & scope
            while mask:
                if f >= need or len(chosen) == cap:  # the next node holds the rest, or no more nodes
                    return self._with_best_fit(chosen, need, leaf, taken)
                low = mask & -mask
                chosen.append((nodes[low.bit_length() - 1], f))
                need -= f
                taken |= low
                mask ^= low
        return self._with_best_fit(chosen, need, leaf, taken)

    def _with_best_fit(self, chosen: list[tuple[int, int]], need: int, leaf: int | None, taken: int
                       ) -> tuple[tuple[int, int], ...] | None:  # fmt: skip
        """`fill`'s end: the chosen nodes plus the best fit for the remainder among the others."""
        last = self.best_fit_node(need, leaf, exclude=taken)
        return None if last is None else (*chosen, (last, need))

    def fullest_first(self, leaf: int | None = None) -> Iterator[int]:
        """Nodes with free GPUs, most free first, then by index."""
        scope = -1 if leaf is None else self._leaf_mask[leaf]
        for f in range(self.max_node_gpus, 0, -1):
            for i in _bits(self._by_free[f] & scope):
                yield self.nodes[i]

    def idle_nodes(self, leaf: int | None = None) -> Iterator[int]:
        """Nodes with every GPU free, by index."""
        scope = -1 if leaf is None else self._leaf_mask[leaf]
        return (self.nodes[i] for i in _bits(self._idle & scope))

    def idle_count(self) -> int:
        return self._idle.bit_count()

    def avail_nodes(self) -> Iterator[int]:
        """Nodes with any free GPU, by index."""
        return (self.nodes[i] for i in _bits(self._avail))

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
        held_out = sum(self.capacity[i] - self._free[i] for i in _bits(self._out))
        return self.free_gpus + self.held_gpus - held_out

    def fragmented(self, gpus: int) -> int:
        """Free GPUs (as placers see them) a job of `gpus` GPUs could not use: those on nodes with
        fewer free than it asks for, or, for a job larger than any node (taken in whole nodes), those
        on nodes not wholly free ("Beware of Fragmentation"'s measure, per waiting job)."""
        by_free, count = self._by_free, 0
        # Loops rather than sum(generator): this runs after most instants of a replay.
        if gpus <= self.max_node_gpus:
            for f in range(1, gpus):
                count += f * by_free[f].bit_count()
            return count
        partly = ~self._idle
        for f in range(1, self.max_node_gpus + 1):
            count += f * (by_free[f] & partly).bit_count()
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
        for i in _bits(changed):
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
        if len(slots) == 1:  # the common case, without the per-node summing
            node, gpus = slots[0]
            i = self._local.get(node)
            if i is not None and 0 < gpus <= self._free[i]:
                self._change(i, -gpus)
                return
        wanted = self._distinct(slots, -1)
        if wanted is None:  # repeats, or something is wrong: sum per node and say what
            wanted = self._per_node(slots)
            for i, gpus in wanted:
                if self._free[i] < gpus:
                    raise OverAllocation(f"node {self.nodes[i]}: asked {gpus}, free {self._free[i]}")
        for i, gpus in wanted:
            self._change(i, -gpus)

    def release(self, slots: Sequence[tuple[int, int]]) -> None:
        """Give GPUs back; all-or-nothing, like `allocate`."""
        if len(slots) == 1:
            node, gpus = slots[0]
            i = self._local.get(node)
            if i is not None and 0 < gpus and self._free[i] + gpus <= self.capacity[i]:
                self._change(i, gpus)
                return
        returned = self._distinct(slots, 1)
        if returned is None:
            returned = self._per_node(slots)
            for i, gpus in returned:
                if self._free[i] + gpus > self.capacity[i]:
                    raise OverAllocation(f"node {self.nodes[i]}: release of {gpus} exceeds capacity")
        for i, gpus in returned:
            self._change(i, gpus)

    def _distinct(self, slots: Sequence[tuple[int, int]], sign: int) -> list[tuple[int, int]] | None:
        """Slots as (local index, GPUs) when every one is valid and on its own node, and the change
        of each fits (`sign` -1: that many free; 1: room below capacity), else None.

        Placers never repeat a node, so this is every multi-node job's path: one pass, no dict.
        None sends the caller to `_per_node`, which sums repeats and says what is wrong."""
        local, free, capacity = self._local, self._free, self.capacity
        out: list[tuple[int, int]] = []
        seen = 0
        for node, gpus in slots:
            i = local.get(node)
            if i is None or gpus <= 0 or seen >> i & 1:
                return None
            if (free[i] < gpus) if sign < 0 else (free[i] + gpus > capacity[i]):
                return None
            seen |= 1 << i
            out.append((i, gpus))
        return out

    def _per_node(self, slots: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """Slots summed per local node index; unknown nodes and non-positive counts are refused."""
        total: dict[int, int] = {}
        for node, gpus in slots:
            i = self._local.get(node)
            if i is None or gpus <= 0:
                raise OverAllocation(f"node {node}: {gpus} GPUs is not a valid slot of this partition")
            total[i] = total.get(i, 0) + gpus
        return list(total.items())

    def _visible(self, i: int) -> int:
        """Free GPUs of local node i that placers see: none out of service, less what others hold."""
        if self._out >> i & 1:
            return 0
        free = self._free[i] - self._external[i]
        return free if free > 0 else 0

    def _change(self, i: int, delta: int) -> None:
        self.held_gpus -= delta
        if not self._out and not self._external[i]:  # the common case: what placers see is the count
            # `_index` inlined: this runs twice per job (start and end), and here neither count
            # can be hidden, so the visible count is the free count.
            free = self._free
            before = free[i]
            after = before + delta
            free[i] = after
            bit = 1 << i
            by_free = self._by_free
            if before:
                by_free[before] ^= bit
            if after:
                by_free[after] |= bit
                self._avail |= bit
                if after == self.capacity[i]:
                    self._idle |= bit
                else:
                    self._idle &= ~bit
            else:
                self._avail &= ~bit
                self._idle &= ~bit
            self.free_gpus += delta
            self._leaf_free[self._leaf_of[i]] += delta
            self._shown[i] = after
            return
        before = self._visible(i)
        self._free[i] += delta
        after = self._visible(i)
        if after != before:  # out of service, or others hold the difference: counted, not visible
            self._index(i, before, after)

    def _index(self, i: int, before: int, after: int) -> None:
        """Move node i from `before` to `after` visible free GPUs in every index and total."""
        delta = after - before
        bit = 1 << i
        by_free = self._by_free
        if before:
            by_free[before] ^= bit
        if after:
            by_free[after] |= bit
            self._avail |= bit
        else:
            self._avail &= ~bit
        if after == self.capacity[i] and after:
            self._idle |= bit
        else:
            self._idle &= ~bit
        self.free_gpus += delta
        self._leaf_free[self._leaf_of[i]] += delta
        self._shown[i] = after

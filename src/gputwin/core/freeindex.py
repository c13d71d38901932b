"""The free-GPU index of one partition's nodes, which placers walk (`Ledger`'s base; its writes,
accounting and checks are in `gputwin.core.ledger`, split from it for length).

Indexes are bitsets (Python ints, one bit per node of the partition, bit i = the partition's i-th
node in topology order): `_by_free[f]` holds nodes with exactly f free GPUs, `_idle` nodes with
every GPU free, `_avail` nodes with any (split in words of `WORD` bits). A bitset answers
"lowest-index node in this set" and "the same, restricted to one leaf switch" (`& leaf mask`) in
a few machine-word operations, which is what best fit with lowest-index tie-breaks needs on every
placement. Callers see the topology's global node indexes, so placements mean the same thing
everywhere. `_by_free`, `_idle` and the free GPUs per leaf are kept only once a placer walks them
(`_bitsets`): first fit, a forecast's, never does, and flipping bits of long ints was a sixth of
its replay (issue 15). What placers see of a node (`_shown`, `_visible`) is its free GPUs less those out of
service or held by others (`Ledger`).
"""

from __future__ import annotations

from itertools import accumulate
from typing import Final, Iterator, Sequence

from gputwin.core.topology import Topology


# `_avail` is split in words of this many bits: below 2^62, which mypyc keeps unboxed (a machine
# word, no allocation per operation), unlike the 1,000-bit int one bitset of a large partition is.
# 30 bits, one digit of a Python int: a word read from its list and stored back takes the one-digit
# paths of those conversions (`_change` does so for most jobs it starts or ends).
WORD: Final = 30


def bits(mask: int) -> Iterator[int]:
    """Set bit positions of `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class FreeIndex:
    """Free GPUs of one partition's nodes, indexed for placement (see the module)."""

    def __init__(self, topology: Topology, nodes: Sequence[int]) -> None:
        self.topology = topology
        self.nodes: tuple[int, ...] = tuple(sorted(nodes))  # local index -> global index
        self._local = {g: i for i, g in enumerate(self.nodes)}
        # Global node index -> local index, -1 for another partition's node: `Ledger.allocate` and
        # `release` read a job's one node here (a list read; the dict look-up boxed the index).
        self._local_at: list[int] = [-1] * len(topology.node_gpus)
        for i, g in enumerate(self.nodes):
            self._local_at[g] = i
        self.capacity: list[int] = [topology.node_gpus[g] for g in self.nodes]
        leaf_of = [topology.node_leaf[g] for g in self.nodes]  # global leaf indexes
        self.total_gpus = sum(self.capacity)
        self.max_node_gpus = max(self.capacity, default=0)
        self._free: list[int] = list(self.capacity)
        # How many nodes have f free GPUs (`_counts[f]`: `_by_free[f]`'s), and how many idle nodes
        # have f GPUs (`_full[f]`: those of `_by_free[f]` in `_idle`): what `Ledger.fragmented`
        # counts after most instants, without a bit count of a long bitset each.
        self._counts: list[int] = [0] * (self.max_node_gpus + 1)
        for cap in self.capacity:
            if cap:  # zero-GPU nodes are never candidates
                self._counts[cap] += 1
        self._full: list[int] = list(self._counts)
        # The bitsets, each node's bit (made once: on a 500-node partition `1 << i` allocates a
        # 17-digit int) and each leaf's mask: made by `_bitsets` when a placer first reads them.
        self._by_free: list[int] = []
        self._idle = 0
        self._bit: list[int] = []
        self._leaf_mask: dict[int, int] = {}
        # Nodes with any free GPU: word w holds local nodes w*WORD .. w*WORD+WORD-1, bit i % WORD
        # each. `first_fit` walks it and `_change` flips a bit per job in a machine word (one
        # bitset, as `_by_free`'s, allocated a long int per operation). `_low`: every word below
        # it is empty (a lower bound, raised lazily by `first_fit`). A node's bit in its word is
        # worked out (`1 << i % WORD`), not kept: a 30th attribute costs CPython 3.11 the
        # instance's shared-key dict, and then every attribute read of a pure-Python ledger is
        # slower (~2 % of a pure replay).
        self._avail: list[int] = [0] * ((len(self.nodes) + WORD - 1) // WORD)
        for i, cap in enumerate(self.capacity):
            if cap:
                self._avail[i // WORD] |= 1 << i % WORD
        self._low = 0
        self.free_gpus = self.total_gpus
        self.leaves: tuple[int, ...] = tuple(sorted(set(leaf_of)))
        # Free GPUs per leaf, by the leaf's position in `leaves` (lowest leaf first, so a walk over
        # it, `best_fit_leaf`, meets ties lowest leaf first); `_leaf_of`: each node's leaf position.
        # Lists, not dicts by leaf: `_change` updates a leaf's count twice per job.
        self._leaf_pos: dict[int, int] = {leaf: k for k, leaf in enumerate(self.leaves)}
        self._leaf_of: list[int] = [self._leaf_pos[leaf] for leaf in leaf_of]
        self._leaf_free: list[int] = []
        self._whole_prefix = list(accumulate(sorted(self.capacity, reverse=True)))
        self._capacity_prefix = self._whole_prefix
        self._prefixes: dict[frozenset[int], list[int]] = {}  # `pool`'s, one per GPU model's nodes
        # Whether `_by_free`, `_idle` and `_leaf_free` are kept: from the first read of any of
        # them (`_bitsets`) on. Until then `_change` leaves them, and they are not made.
        self._kept = False
        self._out = 0  # bitset of nodes out of service: their free GPUs are hidden from placers
        self._external: list[int] = [0] * len(self.nodes)  # GPUs held by others, per local node
        self._shown: list[int] = list(self.capacity)  # free GPUs placers see, per local node (`_visible`)
        self.held_gpus = 0  # GPUs this ledger has allocated (to running jobs), on any node

    # --- reads placers make -----------------------------------------------------------------------

    def free_of(self, node: int) -> int:
        """Free GPUs a placer may use on `node` (0 while it is out of service, less what others hold)."""
        return self._visible(self._local[node])

    def leaf_free(self, leaf: int) -> int:
        if not self._kept:
            self._bitsets()
        return self._leaf_free[self._leaf_pos[leaf]]

    def best_fit_node(self, gpus: int, leaf: int | None = None, exclude: int = 0) -> int | None:
        """The node whose free GPUs are the smallest count >= `gpus` (lowest index on ties)."""
        if not self._kept:
            self._bitsets()
        scope = ~exclude if leaf is None else self._leaf_mask[leaf] & ~exclude
        whole = leaf is None and not exclude  # scope ~0: a bitset ANDed with it would only be copied
        by_free = self._by_free
        for f in range(max(gpus, 1), self.max_node_gpus + 1):
            mask = by_free[f] if whole else by_free[f] & scope
            if mask:
                return self.nodes[(mask & -mask).bit_length() - 1]
        return None

    def best_fit_leaf(self, gpus: int) -> int | None:
        """The leaf whose free GPUs are the smallest count >= `gpus` (lowest index on ties), or None."""
        if not self._kept:
            self._bitsets()
        best, least, leaf_free = -1, 0, self._leaf_free
        for k in range(len(leaf_free)):
            free = leaf_free[k]
            if free >= gpus and (best < 0 or free < least):
                best, least = k, free
        return None if best < 0 else self.leaves[best]

    def fill(self, gpus: int, leaf: int | None, max_nodes: int | None) -> tuple[tuple[int, int], ...] | None:
        """`gpus` GPUs on one node if any holds them (best fit), else the whole free GPUs of the
        fullest nodes, then the best-fitting node for the remainder; None if that needs more than
        `max_nodes` nodes or the GPUs are not there. Within `leaf` if given.

        One walk over the bitsets by local index, rather than `best_fit_node`, `fullest_first`,
        `free_of` and `mask_of` calls and their generators: this runs for most jobs placed."""
        if not self._kept:
            self._bitsets()
        scope = -1 if leaf is None else self._leaf_mask[leaf]  # (-1: every node, no AND needed)
        by_free, nodes, top = self._by_free, self.nodes, self.max_node_gpus
        for f in range(max(gpus, 1), top + 1):
            mask = by_free[f] if leaf is None else by_free[f] & scope
            if mask:  # fits on one node: that is the fewest, and the best fit
                return ((nodes[(mask & -mask).bit_length() - 1], gpus),)
        chosen: list[tuple[int, int]] = []
        need, taken = gpus, 0
        cap = -1 if max_nodes is None else max_nodes - 1
        for f in range(min(top, need - 1), 0, -1):  # no node holds `gpus`: every free count is below it
            mask = by_free[f] if leaf is None else by_free[f] & scope
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
        if not self._kept:
            self._bitsets()
        scope = -1 if leaf is None else self._leaf_mask[leaf]
        for f in range(self.max_node_gpus, 0, -1):
            for i in bits(self._by_free[f] & scope):
                yield self.nodes[i]

    def idle_nodes(self, leaf: int | None = None) -> Iterator[int]:
        """Nodes with every GPU free, by index."""
        if not self._kept:
            self._bitsets()
        scope = -1 if leaf is None else self._leaf_mask[leaf]
        return (self.nodes[i] for i in bits(self._idle & scope))

    def idle_count(self) -> int:
        if not self._kept:
            self._bitsets()
        return self._idle.bit_count()

    def first_fit(self, gpus: int) -> tuple[tuple[int, int], ...] | None:
        """`gpus` GPUs node by node in index order, each node's free GPUs it shows until enough
        (None: not that many free). What `FirstFit` placed over `avail_nodes` and `free_of`, one
        walk over the bitset without the generator and the two lookups per node."""
        if self.free_gpus < gpus:
            return None
        words, shown, nodes = self._avail, self._shown, self.nodes
        slots: list[tuple[int, int]] = []
        need = gpus
        w = self._low
        while w < len(words) and not words[w]:
            w += 1
        self._low = w
        while w < len(words):
            word = words[w]
            base = w * WORD
            while word:
                low = word & -word
                i = base + low.bit_length() - 1
                free = shown[i]
                take = free if free < need else need
                slots.append((nodes[i], take))
                need -= take
                if not need:
                    return tuple(slots)
                word ^= low
            w += 1
        return tuple(slots)

    def avail_nodes(self) -> Iterator[int]:
        """Nodes with any free GPU, by index."""
        return (self.nodes[w * WORD + i] for w, word in enumerate(self._avail) for i in bits(word))

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
            # Only the bits that change are flipped (XOR): the node is in `_by_free[before]`, in
            # `_avail` iff before > 0 and in `_idle` iff before is its capacity (delta is never 0).
            # On a 250-node partition a bitset is a 9-digit int: each operation allocates one.
            # Each list item written as `a[k] = a[k] - 1`, not `a[k] -= 1`: compiled, the augmented
            # form is a generic number operation on boxed ints; this one is a machine add.
            kept, counts = self._kept, self._counts
            if before:
                counts[before] = counts[before] - 1
            if after:
                counts[after] = counts[after] + 1
            if not (before and after):  # its first free GPU or its last: its `_avail` bit flips
                avail, w = self._avail, i // WORD
                avail[w] = avail[w] ^ 1 << i % WORD
                if w < self._low:
                    self._low = w
            cap = self.capacity[i]
            if before == cap or after == cap:
                self._full[cap] = self._full[cap] + (1 if after == cap else -1)
            self.free_gpus += delta
            self._shown[i] = after
            if kept:  # `_flip` inlined
                bit, by_free = self._bit[i], self._by_free
                if before:
                    by_free[before] = by_free[before] ^ bit
                if after:
                    by_free[after] = by_free[after] ^ bit
                if before == cap or after == cap:
                    self._idle ^= bit
                k = self._leaf_of[i]
                self._leaf_free[k] = self._leaf_free[k] + delta
            return
        before = self._visible(i)
        self._free[i] += delta
        after = self._visible(i)
        if after != before:  # out of service, or others hold the difference: counted, not visible
            self._index(i, before, after)

    def _flip(self, i: int, before: int, after: int, delta: int) -> None:
        """Local node i's bits and leaf count moved from `before` to `after` visible free GPUs (the
        kept ones: `_bitsets`). Only the bits that change are flipped (XOR): the node is in
        `_by_free[before]` (if before > 0) and in `_idle` iff before is its capacity. On a
        250-node partition a bitset is a 9-digit int: each operation allocates one."""
        bit, by_free, cap = self._bit[i], self._by_free, self.capacity[i]
        if before:
            by_free[before] = by_free[before] ^ bit
        if after:
            by_free[after] = by_free[after] ^ bit
        if before == cap or after == cap:
            self._idle ^= bit
        k = self._leaf_of[i]
        self._leaf_free[k] = self._leaf_free[k] + delta

    def _bitsets(self) -> None:
        """`_by_free`, `_idle` and `_leaf_free` made from what placers see (`_shown`) and kept from
        now on, with each node's bit and each leaf's mask: a placer walks them (see the module)."""
        self._bit = [1 << i for i in range(len(self.nodes))]
        for i, k in enumerate(self._leaf_of):
            leaf = self.leaves[k]
            self._leaf_mask[leaf] = self._leaf_mask.get(leaf, 0) | self._bit[i]
        by_free, idle = [0] * (self.max_node_gpus + 1), 0
        leaf_free = [0] * len(self.leaves)
        for i, shown in enumerate(self._shown):
            if shown:
                bit = self._bit[i]
                by_free[shown] |= bit
                if shown == self.capacity[i]:
                    idle |= bit
                leaf_free[self._leaf_of[i]] += shown
        self._by_free, self._idle, self._leaf_free, self._kept = by_free, idle, leaf_free, True

    def _index(self, i: int, before: int, after: int) -> None:
        """Move node i from `before` to `after` visible free GPUs in every index and total."""
        if after == before:
            return
        delta = after - before
        cap = self.capacity[i]
        if before:
            self._counts[before] -= 1
            if before == cap:
                self._full[cap] -= 1
        avail, w = self._avail, i // WORD
        if after:
            self._counts[after] += 1
            avail[w] = avail[w] | 1 << i % WORD
            self._low = min(self._low, w)
        else:
            avail[w] = avail[w] & ~(1 << i % WORD)
        if after == cap and after:
            self._full[cap] += 1
        self.free_gpus += delta
        self._shown[i] = after
        if self._kept:
            self._flip(i, before, after, delta)

"""GPU allocation policies (patent claim 3): which idle GPUs a job gets.

Each placer is a small object with a `name` and `place(ledger, gpus, waited)`; it returns the
chosen `(node, gpus)` slots or None when the job must wait. Placers only read the ledger; the
scheduler commits the choice. Every choice is deterministic: ties go to the lowest node index.

* `first-fit`      - allocation policy 1: any idle GPUs, node by node in index order, scattered
                     if need be.
* `consolidate`    - allocation policy 2: idle GPUs meeting a compute condition - the fewest
                     nodes the request can fit on, then the fewest leaf switches, best fit.
* `topology-aware` - the fewest switches: one leaf if any leaf has room; otherwise wait up to
                     `max_wait` seconds for one, then spread over the fewest leaves of one spine.
* `random`         - idle GPUs picked by a seeded generator (a baseline, reproducible).

`gputwin.core.compat` adds the reference simulator's own consolidate placer for `--compat helios`.
"""

from __future__ import annotations

import math
import random
from typing import Protocol

from gputwin.core.ledger import Ledger

Slots = tuple[tuple[int, int], ...]


class Placer(Protocol):
    name: str

    def place(self, ledger: Ledger, gpus: int, waited: float) -> Slots | None:
        """Slots for `gpus` GPUs, or None to keep the job waiting. `waited`: seconds queued so far."""
        ...


class FirstFit:
    name = "first-fit"

    def place(self, ledger: Ledger, gpus: int, waited: float) -> Slots | None:
        if ledger.free_gpus < gpus:
            return None
        slots: list[tuple[int, int]] = []
        need = gpus
        for node in ledger.avail_nodes():
            take = min(ledger.free_of(node), need)
            slots.append((node, take))
            need -= take
            if not need:
                break
        return tuple(slots)


class Consolidate:
    name = "consolidate"

    def place(self, ledger: Ledger, gpus: int, waited: float) -> Slots | None:
        if ledger.free_gpus < gpus:
            return None
        if gpus <= ledger.max_node_gpus:
            node = ledger.best_fit_node(gpus)
            return None if node is None else ((node, gpus),)
        return _fewest_nodes(ledger, gpus, leaf=None, by_leaf=True)


class TopologyAware:
    """Prefer one leaf switch; wait a bounded time for one before spreading out."""

    name = "topology-aware"

    def __init__(self, max_wait: float = 300.0) -> None:
        self.max_wait = max_wait

    def place(self, ledger: Ledger, gpus: int, waited: float) -> Slots | None:
        if ledger.free_gpus < gpus:
            return None
        for leaf in sorted(ledger.leaves, key=lambda lf: (ledger.leaf_free(lf), lf)):
            if ledger.leaf_free(leaf) >= gpus:
                slots = _fewest_nodes(ledger, gpus, leaf=leaf, by_leaf=False)
                if slots is not None:
                    return slots
        if waited < self.max_wait:
            return None
        return _spread_over_fewest_leaves(ledger, gpus)


class RandomPlacer:
    """Random idle GPUs from a seeded generator: reproducible for a given seed."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)

    def place(self, ledger: Ledger, gpus: int, waited: float) -> Slots | None:
        if ledger.free_gpus < gpus:
            return None
        pool = [node for node in ledger.avail_nodes() for _ in range(ledger.free_of(node))]
        picked = sorted(self._rng.sample(pool, gpus))
        counts: dict[int, int] = {}
        for node in picked:
            counts[node] = counts.get(node, 0) + 1
        return tuple(sorted(counts.items()))


def _fewest_nodes(ledger: Ledger, gpus: int, *, leaf: int | None, by_leaf: bool) -> Slots | None:
    """Fit `gpus` on the fewest nodes (of one leaf if `leaf` is set), else None.

    With `by_leaf`, first look for one leaf that can hold the job on that minimum node count.
    The fullest nodes are taken first; the last node is the best fit for the remainder.
    """
    need_nodes = math.ceil(gpus / ledger.max_node_gpus) if ledger.max_node_gpus else 0
    if by_leaf and need_nodes > 1:
        for lf in sorted(ledger.leaves, key=lambda x: (ledger.leaf_free(x), x)):
            if ledger.leaf_free(lf) >= gpus:
                slots = _fewest_nodes(ledger, gpus, leaf=lf, by_leaf=False)
                if slots is not None:
                    return slots
    if need_nodes <= 1:
        node = ledger.best_fit_node(gpus, leaf)
        return None if node is None else ((node, gpus),)
    chosen: list[tuple[int, int]] = []
    need = gpus
    for node in ledger.fullest_first(leaf):
        if len(chosen) == need_nodes - 1:
            break
        take = min(ledger.free_of(node), need)
        chosen.append((node, take))
        need -= take
    if need == 0:
        return tuple(chosen)
    taken = ledger.mask_of(n for n, _ in chosen)
    last = ledger.best_fit_node(need, leaf, exclude=taken)
    return None if last is None else tuple(chosen) + ((last, need),)


def _spread_over_fewest_leaves(ledger: Ledger, gpus: int) -> Slots | None:
    """No single leaf has room: take the fullest leaves of one spine first, then any."""
    topo = ledger.topology
    groups: dict[str, list[int]] = {}
    for leaf in ledger.leaves:
        parent = topo.leaf_parent(leaf)
        groups.setdefault(parent, []).append(leaf)
    candidates = [leaves for leaves in groups.values() if sum(map(ledger.leaf_free, leaves)) >= gpus]
    # Fewest leaves inside one spine; if no spine has room, the whole partition.
    pools = sorted(candidates, key=lambda ls: (_leaves_needed(ledger, ls, gpus), min(ls))) or [
        sorted(ledger.leaves)
    ]
    leaves = sorted(pools[0], key=lambda lf: (-ledger.leaf_free(lf), lf))
    slots: list[tuple[int, int]] = []
    need = gpus
    for leaf in leaves:
        for node in ledger.fullest_first(leaf):
            take = min(ledger.free_of(node), need)
            slots.append((node, take))
            need -= take
            if not need:
                return tuple(sorted(slots))
    return None


def _leaves_needed(ledger: Ledger, leaves: list[int], gpus: int) -> int:
    total = 0
    for count, free in enumerate(sorted((ledger.leaf_free(lf) for lf in leaves), reverse=True), 1):
        total += free
        if total >= gpus:
            return count
    return len(leaves) + 1

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

import random
from typing import Mapping, Protocol

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
        return ledger.first_fit(gpus)


class Consolidate:
    name = "consolidate"

    def place(self, ledger: Ledger, gpus: int, waited: float) -> Slots | None:
        if ledger.free_gpus < gpus:
            return None
        return _fewest_nodes(ledger, gpus, leaf=None, by_leaf=True)


class TopologyAware:
    """Prefer one leaf switch; wait a bounded time for one before spreading out."""

    name = "topology-aware"

    def __init__(self, max_wait: float = 300.0) -> None:
        self.max_wait = max_wait

    def place(self, ledger: Ledger, gpus: int, waited: float) -> Slots | None:
        if ledger.free_gpus < gpus:
            return None
        # The best-fit leaf: the one with the least room that still holds the whole job.
        leaf = ledger.best_fit_leaf(gpus)
        if leaf is not None:
            return ledger.fill(gpus, leaf, None)
        # The scheduler wakes us at queued_since + max_wait; in floats `now - queued_since` may
        # then fall a hair short of max_wait, hence the tolerance.
        if waited < self.max_wait - 1e-9:
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
        # The same draws as sampling the list of every free GPU (node repeated once per free GPU,
        # nodes in index order): `sample` picks positions from the length alone, so sampling the
        # positions and mapping them to nodes gives the same GPUs without building that list.
        positions = sorted(self._rng.sample(range(ledger.free_gpus), gpus))
        if gpus == 1:  # most jobs: one GPU is one node, no counting (same draw as below)
            return ((ledger.nodes_of_free_gpus(positions)[0], 1),)
        counts: dict[int, int] = {}
        for node in ledger.nodes_of_free_gpus(positions):
            counts[node] = counts.get(node, 0) + 1
        return tuple(sorted(counts.items()))


def _fewest_nodes(ledger: Ledger, gpus: int, *, leaf: int | None, by_leaf: bool) -> Slots | None:
    """Fit `gpus` on as few nodes as the partition could ever need for it, or return None.

    That node count is the compute condition of consolidation: on 8-GPU nodes a 12-GPU job needs
    two nodes, so it waits rather than scatter over three. With `by_leaf`, a leaf that can hold the
    job on that many nodes is preferred (best-fit leaf first).
    """
    k = ledger.min_nodes(gpus)
    if k == 1:  # the common case: best fit on one node
        node = ledger.best_fit_node(gpus, leaf)
        return None if node is None else ((node, gpus),)
    if by_leaf:
        for lf in sorted(ledger.leaves, key=lambda x: (ledger.leaf_free(x), x)):
            if ledger.leaf_free(lf) >= gpus:
                slots = ledger.fill(gpus, lf, k)
                if slots is not None:
                    return slots
    return ledger.fill(gpus, leaf, k)


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


# --- GPU models -----------------------------------------------------------------------------------


class ModelPools:
    """A partition's nodes by GPU model, for partitions whose nodes declare models (docs/tenancy.md).

    A job asking for a model is placed on that model's nodes only (`place_on`): the others are
    hidden from the placer for that one call, as nodes out of service are, so every placer
    filters the same way. A job asking for any model may get any nodes."""

    def __init__(self, models: dict[str, list[int]], gpus_of: dict[int, int], speeds: dict[str, float]) -> None:
        self.nodes = {m: frozenset(ns) for m, ns in models.items()}
        self.gpus = {m: sum(gpus_of[n] for n in ns) for m, ns in models.items()}
        self.speeds = {n: speeds.get(m, 1.0) for m, ns in models.items() for n in ns}
        self.model_of = {n: m for m, ns in models.items() for n in ns}  # "" for a node without one

    def speed(self, slots: Slots) -> float:
        """How fast a job runs on these slots: its slowest GPU model's speed."""
        speeds = self.speeds
        return min(speeds[n] for n, _ in slots)

    def problem(self, model: str, gpus: int, partition: str) -> str | None:
        """Why a job asking for `gpus` GPUs of `model` can never run here, or None."""
        if model not in self.nodes:
            return f"asks for GPU model {model!r}; partition {partition!r} has {', '.join(sorted(self.nodes))}"
        if gpus > self.gpus[model]:
            return f"asks for {gpus} GPUs of model {model!r}; partition {partition!r} has {self.gpus[model]}"
        return None


def place_on(placer: Placer, ledger: Ledger, gpus: int, waited: float, nodes: frozenset[int]) -> Slots | None:
    """`placer`'s choice among `nodes` only (global indexes): the ledger's other nodes are out of
    service for the call, and exactly the ones that were before are again after it; the fewest
    nodes a job could ever need are counted among `nodes` too (`Ledger.pool`)."""
    before = ledger.out_of_service()
    ledger.set_out_of_service([*before, *(n for n in ledger.nodes if n not in nodes)])
    ledger.pool(nodes)
    try:
        return placer.place(ledger, gpus, waited)
    finally:
        ledger.pool(None)
        ledger.set_out_of_service(before)


def place_model(placer: Placer, ledger: Ledger, gpus: int, waited: float, pools: ModelPools | None, model: str
                ) -> Slots | None:  # fmt: skip
    """`placer`'s choice, on the nodes of `model` if the job asks for one and the partition has models."""
    if pools is None or not model:
        return placer.place(ledger, gpus, waited)
    return place_on(placer, ledger, gpus, waited, pools.nodes[model])


def model_pools(nodes: list[int], model_of: list[str], gpus_of: dict[int, int], speeds: Mapping[str, float]
                ) -> ModelPools | None:  # fmt: skip
    """The pools of these (global) nodes, or None when none of them declares a model."""
    if not any(model_of[n] for n in nodes):
        return None
    models: dict[str, list[int]] = {}
    for n in nodes:
        models.setdefault(model_of[n], []).append(n)
    return ModelPools(models, gpus_of, dict(speeds))

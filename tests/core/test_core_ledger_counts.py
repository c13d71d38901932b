"""`Ledger.fragmented` reads node counts the ledger keeps beside its bitsets (issue 17: bit counts
of long bitsets after every instant were most of the fragmentation tracker's cost). Under random allocations,
releases (of several nodes at once too, some refused), nodes taken out of service and GPUs held by
others, the counts must say what the bitsets say, and `fragmented` and `best_fit_node` what going
over the nodes one by one gives."""

from __future__ import annotations

import random

import pytest
from cluster_builders import build_ledger

from gputwin.core.ledger import Ledger, OverAllocation


def _best_fit(ledger: Ledger, gpus: int, leaf: int | None) -> int | None:
    """`best_fit_node` node by node: the fewest free GPUs that hold `gpus`, lowest index on ties."""
    fits = [(ledger.free_of(n), n) for n in ledger.nodes
            if ledger.free_of(n) >= max(gpus, 1) and (leaf is None or ledger.topology.node_leaf[n] == leaf)]
    return min(fits)[1] if fits else None


def _brute(ledger: Ledger, gpus: int) -> int:
    """`fragmented` from the nodes' visible free GPUs, one node at a time."""
    shown = [ledger.free_of(n) for n in ledger.nodes]
    caps = ledger.capacity
    if gpus <= ledger.max_node_gpus:
        return sum(f for f in shown if 0 < f < gpus)
    return sum(f for f, cap in zip(shown, caps) if 0 < f < cap)


@pytest.mark.parametrize("seed", range(8))
def test_counts_follow_the_bitsets_under_random_changes(seed: int) -> None:
    rng = random.Random(seed)
    ledger = build_ledger({"l0": [8, 8, 4, 8], "l1": [2, 8, 8]})
    held: list[tuple[tuple[int, int], ...]] = []
    for _ in range(400):
        roll = rng.random()
        if roll < 0.1:  # several nodes at once; one in five asks for more than is free (refused whole)
            nodes = rng.sample(ledger.nodes, rng.randint(2, 3))
            slots = tuple((n, max(1, ledger.free_of(n)) + (rng.random() < 0.2)) for n in nodes)
            before = [ledger.free_of(n) for n in ledger.nodes]
            try:
                ledger.allocate(slots)
                held.append(slots)
            except OverAllocation:
                assert [ledger.free_of(n) for n in ledger.nodes] == before
        elif roll < 0.45:
            node = rng.choice(ledger.nodes)
            free = ledger.free_of(node)
            if free:
                slots = ((node, rng.randint(1, free)),)
                ledger.allocate(slots)
                held.append(slots)
        elif roll < 0.85 and held:
            ledger.release(held.pop(rng.randrange(len(held))))
        elif roll < 0.93:
            ledger.set_out_of_service(rng.sample(ledger.nodes, rng.randint(0, 2)))
        else:
            ledger.set_external_use({n: rng.randint(0, 3) for n in rng.sample(ledger.nodes, 2)})
        ledger.idle_count()  # the bitsets are kept from a first read on (`FreeIndex._bitsets`)
        assert ledger._counts == [b.bit_count() for b in ledger._by_free]
        assert ledger._full == [(b & ledger._idle).bit_count() for b in ledger._by_free]
        for gpus in (1, 2, 3, 5, 8, 9, 12, 20):
            assert ledger.fragmented(gpus) == _brute(ledger, gpus)
            for leaf in (None, *ledger.leaves):
                assert ledger.best_fit_node(gpus, leaf) == _best_fit(ledger, gpus, leaf)


@pytest.mark.parametrize("seed", range(4))
def test_bitsets_made_at_the_first_read_are_the_kept_ones(seed: int) -> None:
    """Until a placer reads them, the bitsets and leaf counts are not kept (`FreeIndex._bitsets`):
    made then, after any changes, they are what keeping them all along gives."""
    rng = random.Random(seed)
    kept, lazy = (build_ledger({"l0": [8, 8, 4, 8], "l1": [2, 8, 8], "l2": [0, 8]}) for _ in range(2))
    kept.idle_count()
    held: list[tuple[tuple[int, int], ...]] = []
    for _ in range(300):
        roll = rng.random()
        if roll < 0.45:
            node = rng.choice(kept.nodes)
            free = kept.free_of(node)
            if free:
                held.append(((node, rng.randint(1, free)),))
                kept.allocate(held[-1])
                lazy.allocate(held[-1])
        elif roll < 0.85 and held:
            slots = held.pop(rng.randrange(len(held)))
            kept.release(slots)
            lazy.release(slots)
        elif roll < 0.93:
            out = rng.sample(kept.nodes, rng.randint(0, 2))
            kept.set_out_of_service(out)
            lazy.set_out_of_service(out)
        else:
            used = {n: rng.randint(0, 3) for n in rng.sample(kept.nodes, 2)}
            kept.set_external_use(used)
            lazy.set_external_use(used)
    assert [lazy.leaf_free(leaf) for leaf in lazy.leaves] == [kept.leaf_free(leaf) for leaf in kept.leaves]
    assert (lazy._by_free, lazy._idle) == (kept._by_free, kept._idle)
    assert lazy.idle_count() == kept.idle_count()

"""`Ledger.fragmented` reads node counts the ledger keeps beside its bitsets (issue 17: a bit count
of a long bitset after every instant was most of the fragmentation tracker's cost). Under random
allocations, releases, nodes taken out of service and GPUs held by others, the counts must say
what the bitsets say, and `fragmented` what counting them node by node gives."""

from __future__ import annotations

import random

import pytest
from cluster_builders import build_ledger

from gputwin.core.ledger import Ledger


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
        if roll < 0.45:
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
        assert ledger._counts == [b.bit_count() for b in ledger._by_free]
        assert ledger._full == [(b & ledger._idle).bit_count() for b in ledger._by_free]
        for gpus in (1, 2, 3, 5, 8, 9, 12, 20):
            assert ledger.fragmented(gpus) == _brute(ledger, gpus)

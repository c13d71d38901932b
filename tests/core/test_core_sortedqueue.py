"""The partition queue (`SortedQueue`) against `sortedcontainers.SortedList`, whose place it took:
the same entries in the same order after any mix of adds, batches, removes and pops, at loads that
split and empty its lists."""

from __future__ import annotations

import random

import pytest
from sortedcontainers import SortedList

from gputwin.core import sortedqueue
from gputwin.core.sortedqueue import SortedQueue


@pytest.mark.parametrize("load", [1, 3, 16, 1000])
def test_sorted_queue_matches_sorted_list(load: int, monkeypatch: pytest.MonkeyPatch) -> None:
    if not sortedqueue.__file__.endswith(".py") and load != sortedqueue.LOAD:
        pytest.skip("compiled: LOAD is a constant")
    monkeypatch.setattr(sortedqueue, "LOAD", load)
    rng = random.Random(load)
    want, got, n = SortedList(), SortedQueue(), 0
    for _ in range(1500):
        op = rng.random()
        if op < 0.4:
            entry = ((rng.random(), float(rng.randrange(5))), n)
            n += 1
            want.add(entry)
            got.add(entry)
        elif op < 0.45:
            batch = [((rng.random(),), n + i) for i in range(rng.randrange(1, 200))]
            n += len(batch)
            want.update(batch)
            got.update(batch)
        elif op < 0.6 and want:
            entry = want[rng.randrange(len(want))]
            want.remove(entry)
            got.remove(entry)
            with pytest.raises(ValueError):
                got.remove(entry)
        elif op < 0.75 and want:
            i = rng.choice([0, -1, rng.randrange(len(want)), -rng.randrange(1, len(want) + 1)])
            assert got.pop(i) == want.pop(i)
        elif want:
            i = rng.randrange(-len(want), len(want))
            start, stop = rng.randrange(-5, len(want) + 5), rng.randrange(-5, len(want) + 300)
            assert got[i] == want[i] and got[start:stop] == want[start:stop] and got[1:257] == want[1:257]
        assert len(got) == len(want) and bool(got) == bool(want) and list(got) == list(want)
    assert all(entry in got for entry in want) and ((2.0,), -1) not in got
    with pytest.raises(IndexError):
        got[len(want)]


def test_changes_count_every_change_and_reads_match_indexing() -> None:
    """`changes` moves with every add, batch, remove and pop (backfill's window is kept while it
    does not); `head_order` and `between` read what `[0][1]` and a slice read; `remove` finds an
    entry near the head or far from it, and refuses one with a queued order but another key."""
    rng = random.Random(5)
    queue = SortedQueue()
    assert queue.changes == 0
    entries = [((rng.random(),), n) for n in range(5000)]
    queue.update(entries[:3000])
    seen = queue.changes
    for entry in entries[3000:3010]:
        queue.add(entry)
        assert queue.changes == seen + 1
        seen = queue.changes
    ordered = sorted(entries[:3010])
    assert queue.head_order() == queue[0][1] == ordered[0][1]
    assert queue.between(1, 257) == queue[1:257] == ordered[1:257]
    assert queue.between(2990, 3100) == ordered[2990:3100]
    for entry in (ordered[5], ordered[2500]):  # near the head, then in a later list
        queue.remove(entry)
        assert queue.changes == seen + 1
        seen = queue.changes
    with pytest.raises(ValueError):
        queue.remove(((2.0,), ordered[0][1]))  # its order is queued, with another key
    assert queue.changes == seen
    queue.pop(0)
    assert queue.changes == seen + 1
    assert list(queue) == [e for e in ordered if e not in (ordered[0], ordered[5], ordered[2500])]

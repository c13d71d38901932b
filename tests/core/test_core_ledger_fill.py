"""The ledger's one-walk placement helpers agree with the rules they replace, stated naively:
`fill` (fullest nodes whole, then best fit for the rest), `best_fit_leaf`, multi-node
`allocate`/`release`, and the topology's remembered spans."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.ledger import Ledger, OverAllocation

# Two spines of leaves, nodes of uneven sizes (a zero-GPU node too): 13 nodes, 4 leaves.
LAYOUT = {"s0": {"l0": [8, 8, 4, 2], "l1": [8, 0, 6]}, "s1": {"l2": [8, 8, 8], "l3": [4, 4, 1]}}
CAPACITY = [8, 8, 4, 2, 8, 0, 6, 8, 8, 8, 4, 4, 1]
LEAF_OF = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]


def _naive_fill(free: list[int], gpus: int, leaf: int | None, max_nodes: int | None) -> tuple | None:
    """The rule as the placers stated it: best single node; else the fullest nodes (most free, then
    index) whole while the next one cannot hold the rest, then the best fit for the rest."""
    scope = [n for n in range(len(free)) if free[n] and (leaf is None or LEAF_OF[n] == leaf)]

    def best(need: int, taken: set[int]) -> int | None:
        fits = [(free[n], n) for n in scope if n not in taken and free[n] >= need]
        return min(fits)[1] if fits else None

    one = best(gpus, set())
    if one is not None:
        return ((one, gpus),)
    chosen: list[tuple[int, int]] = []
    need = gpus
    for n in sorted(scope, key=lambda n: (-free[n], n)):
        if free[n] >= need or (max_nodes is not None and len(chosen) == max_nodes - 1):
            break
        chosen.append((n, free[n]))
        need -= free[n]
    last = best(need, {n for n, _ in chosen})
    return None if last is None else (*chosen, (last, need))


def _busy(ledger, taken: list[int]) -> tuple[Ledger, list[int]]:
    led = ledger(LAYOUT)
    free = list(CAPACITY)
    for node, gpus in enumerate(taken):
        gpus = min(gpus, free[node])
        if gpus:
            led.allocate([(node, gpus)])
            free[node] -= gpus
    return led, free


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 8), min_size=13, max_size=13),
    st.integers(1, 40),
    st.sampled_from([None, 0, 1, 2, 3]),
    st.sampled_from([None, 1, 2, 3, 5]),
)
def test_fill_agrees_with_the_naive_rule(ledger, taken, gpus, leaf, max_nodes) -> None:
    led, free = _busy(ledger, taken)
    assert led.fill(gpus, leaf, max_nodes) == _naive_fill(free, gpus, leaf, max_nodes)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=13, max_size=13), st.integers(1, 40))
def test_best_fit_leaf_is_the_least_room_that_holds_the_job(ledger, taken, gpus) -> None:
    led, free = _busy(ledger, taken)
    room = [(sum(f for f, lf in zip(free, LEAF_OF) if lf == leaf), leaf) for leaf in range(4)]
    fitting = [r for r in room if r[0] >= gpus]
    assert led.best_fit_leaf(gpus) == (min(fitting)[1] if fitting else None)


def test_fill_takes_the_fullest_nodes_whole_then_the_best_fit(ledger) -> None:
    led, _ = _busy(ledger, [0, 0, 0, 0, 0, 0, 0, 3, 5, 7, 0, 0, 0])  # l2 free: 5, 3, 1
    # 7 GPUs on l2: no node holds them; the fullest (n7, 5) whole, then 2 on the best fit (n8, 3).
    assert led.fill(7, 2, None) == ((7, 5), (8, 2))
    assert led.fill(7, 2, 1) is None  # one node would have to hold them
    assert led.fill(10, 2, None) is None  # l2 has 9


@pytest.mark.parametrize("op", ["allocate", "release"])
def test_multi_node_slots_move_every_node_or_none(ledger, op) -> None:
    led = ledger(LAYOUT)
    if op == "release":
        led.allocate([(0, 8), (2, 4), (6, 6)])
    before = [led.free_of(n) for n in range(13)]
    bad = ((0, 8), (2, 4), (3, 3))  # n3 has 2 GPUs: the last slot is wrong either way
    with pytest.raises(OverAllocation):
        getattr(led, op)(bad)
    assert [led.free_of(n) for n in range(13)] == before
    getattr(led, op)(((0, 8), (2, 4), (6, 6)))
    sign = -1 if op == "allocate" else 1
    expected = list(before)
    for node, gpus in ((0, 8), (2, 4), (6, 6)):
        expected[node] += sign * gpus
    assert [led.free_of(n) for n in range(13)] == expected
    assert led.leaf_free(0) == sum(expected[:4]) and led.leaf_free(1) == sum(expected[4:7])
    assert list(led.idle_nodes()) == [n for n in range(13) if CAPACITY[n] and expected[n] == CAPACITY[n]]


def test_repeated_nodes_in_slots_are_summed(ledger) -> None:
    led = ledger(LAYOUT)
    led.allocate([(0, 3), (0, 4), (1, 2)])
    assert (led.free_of(0), led.free_of(1)) == (1, 6)
    led.release([(0, 2), (1, 2), (0, 5)])
    assert (led.free_of(0), led.free_of(1)) == (8, 8)


def test_remembered_spans_match_a_fresh_count(ledger) -> None:
    topo = ledger(LAYOUT).topology
    for slots in [((0, 1), (1, 1)), ((0, 1), (4, 1)), ((0, 1), (7, 1)), ((4, 1), (0, 1)), ((12, 2), (7, 1), (0, 1))]:
        first = topo.span_of_slots(slots)
        assert first == topo.span_of_leaves(LEAF_OF[n] for n, _ in slots)
        assert topo.span_of_slots(slots) is first  # remembered by its set of leaves
    assert topo.span_of_slots(((0, 1), (1, 1))).tiers == 0
    assert topo.span_of_slots(((0, 1), (4, 1))).tiers == 1  # l0 and l1 meet at s0
    assert topo.span_of_slots(((0, 1), (7, 1))).tiers == 2  # over the root

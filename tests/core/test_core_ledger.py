"""Ledger: allocate/release keep every index (free totals, per leaf, best fit, fullest first, idle,
available) in step, and refuse anything that would over-allocate or over-release."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.ledger import OverAllocation

# n0: 4 GPUs, n1: 8 (leaf l0 = leaf index 0); n2: 2, n3: 8 (leaf l1 = leaf index 1). 22 GPUs.
LAYOUT = {"l0": [4, 8], "l1": [2, 8]}

FRESH: list[tuple[str, tuple[tuple[int, int], ...]]] = []
# n1 -5, n3 -8, n0 -1 -> free per node [3, 3, 2, 0]
BUSY = [("alloc", ((1, 5),)), ("alloc", ((3, 8), (0, 1)))]
# ... then give n3 and n1 back -> [3, 8, 2, 8]
PARTLY_BACK = BUSY + [("release", ((3, 8),)), ("release", ((1, 5),))]


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        pytest.param(
            FRESH,
            {
                "free_of": [4, 8, 2, 8],
                "free_gpus": 22,
                "leaf_free": [12, 10],
                # best fit = smallest free count >= ask, lowest index on ties:
                # 1 -> n2 (2 free), 3 -> n0 (4), 5 -> n1 (8; n1 and n3 tie, n1 is lower), 9 -> none
                "best_fit": {1: 2, 2: 2, 3: 0, 5: 1, 8: 1, 9: None},
                "best_fit_leaf1": {1: 2, 3: 3, 9: None},
                "fullest_first": [1, 3, 0, 2],
                "idle": [0, 1, 2, 3],
                "avail": [0, 1, 2, 3],
            },
            id="fresh",
        ),
        pytest.param(
            BUSY,
            {
                "free_of": [3, 3, 2, 0],
                "free_gpus": 8,  # 22 - 5 - 8 - 1
                "leaf_free": [6, 2],
                # 3 -> n0 and n1 both have exactly 3: the lower index wins; 4 fits nowhere
                "best_fit": {1: 2, 2: 2, 3: 0, 4: None},
                "best_fit_leaf1": {1: 2, 2: 2, 3: None},
                "fullest_first": [0, 1, 2],  # n3 is full: not listed at all
                "idle": [2],
                "avail": [0, 1, 2],
            },
            id="busy",
        ),
        pytest.param(
            PARTLY_BACK,
            {
                "free_of": [3, 8, 2, 8],
                "free_gpus": 21,
                "leaf_free": [11, 10],
                "best_fit": {1: 2, 3: 0, 4: 1, 8: 1},
                "best_fit_leaf1": {1: 2, 3: 3, 8: 3},
                "fullest_first": [1, 3, 0, 2],
                "idle": [1, 2, 3],
                "avail": [0, 1, 2, 3],
            },
            id="released-again",
        ),
    ],
)
def test_allocate_and_release_keep_every_index_in_step(ledger, ops, expected) -> None:
    led = ledger(LAYOUT)
    for op, slots in ops:
        (led.allocate if op == "alloc" else led.release)(slots)
    assert [led.free_of(n) for n in range(4)] == expected["free_of"]
    assert led.free_gpus == expected["free_gpus"]
    assert led.used_gpus == 22 - expected["free_gpus"]
    assert [led.leaf_free(lf) for lf in (0, 1)] == expected["leaf_free"]
    assert {g: led.best_fit_node(g) for g in expected["best_fit"]} == expected["best_fit"]
    assert {g: led.best_fit_node(g, leaf=1) for g in expected["best_fit_leaf1"]} == expected["best_fit_leaf1"]
    assert list(led.fullest_first()) == expected["fullest_first"]
    assert list(led.idle_nodes()) == expected["idle"]
    assert led.idle_count() == len(expected["idle"])
    assert list(led.avail_nodes()) == expected["avail"]


def test_best_fit_skips_excluded_nodes(ledger) -> None:
    led = ledger(LAYOUT)
    # 3 GPUs best fit is n0 (4 free); excluding n0 the next smallest sufficient is n1 (8), then n3.
    assert led.best_fit_node(3, exclude=led.mask_of([0])) == 1
    assert led.best_fit_node(3, exclude=led.mask_of([0, 1])) == 3
    assert led.best_fit_node(3, leaf=0, exclude=led.mask_of([0, 1])) is None


def test_per_leaf_views_only_show_that_leafs_nodes(ledger) -> None:
    led = ledger(LAYOUT, [(1, 8)])  # n1 full
    assert list(led.fullest_first(leaf=0)) == [0]
    assert list(led.fullest_first(leaf=1)) == [3, 2]
    assert list(led.idle_nodes(leaf=0)) == [0]
    assert list(led.idle_nodes(leaf=1)) == [2, 3]


def test_partition_ledger_speaks_global_node_indexes(ledger) -> None:
    # A partition of n1 and n3 only: indexes stay the topology's (1 and 3), never 0 and 1.
    led = ledger(LAYOUT, nodes=[3, 1])
    assert led.nodes == (1, 3)
    assert led.total_gpus == 16
    assert led.leaves == (0, 1)
    led.allocate([(3, 6)])
    assert led.best_fit_node(2) == 3
    assert list(led.fullest_first()) == [1, 3]
    assert list(led.idle_nodes()) == [1]
    with pytest.raises(OverAllocation):
        led.allocate([(0, 1)])  # n0 exists in the topology but not in this partition


@pytest.mark.parametrize(
    ("before", "slots"),
    [
        pytest.param([], ((0, 5),), id="more-than-the-node-has"),
        pytest.param([(1, 6)], ((1, 3),), id="more-than-is-left"),
        pytest.param([], ((0, 0),), id="zero-gpus"),
        pytest.param([], ((0, -1),), id="negative-gpus"),
        pytest.param([], ((9, 1),), id="unknown-node"),
        pytest.param([], ((0, 2), (2, 3)), id="second-slot-too-big"),
    ],
)
def test_allocate_refuses_what_is_not_free_and_changes_nothing(ledger, before, slots) -> None:
    led = ledger(LAYOUT, before)
    frees = [led.free_of(n) for n in range(4)]
    with pytest.raises(OverAllocation):
        led.allocate(slots)
    assert [led.free_of(n) for n in range(4)] == frees  # all-or-nothing: n0 keeps its 2 in the last case


@pytest.mark.parametrize(
    ("before", "slots"),
    [
        pytest.param([], ((0, 1),), id="release-on-a-free-node"),
        pytest.param([(1, 3)], ((1, 4),), id="release-more-than-taken"),
    ],
)
def test_release_refuses_to_exceed_capacity(ledger, before, slots) -> None:
    led = ledger(LAYOUT, before)
    with pytest.raises(OverAllocation):
        led.release(slots)


# Regression guard; the core used to get this wrong: Ledger.allocate checks each slot against the
# node's free count before any is applied, so the same node twice ((0,3),(0,3) on a 4-GPU node) passes
# and free goes to -2
def test_allocate_refuses_the_same_node_twice_beyond_its_free_gpus(ledger) -> None:
    led = ledger(LAYOUT)
    with pytest.raises(OverAllocation):
        led.allocate([(0, 3), (0, 3)])  # n0 has 4 free; 6 asked in total
    assert led.free_of(0) == 4


# Regression guard; the core used to get this wrong: Ledger.release accepts a negative GPU count
# (it only checks the capacity bound), which silently allocates: release([(0,-3)]) leaves n0 with 1
# free and nothing running
def test_release_refuses_non_positive_counts(ledger) -> None:
    led = ledger(LAYOUT)
    with pytest.raises(OverAllocation):
        led.release([(0, -3)])


# --- the same, at random: any sequence of valid allocations and releases keeps the indexes in step ---


def _naive_best_fit(free: list[int], nodes: list[int], gpus: int) -> int | None:
    fits = [(free[n], n) for n in nodes if free[n] >= max(gpus, 1)]
    return min(fits)[1] if fits else None


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3), st.integers(1, 8)), max_size=30))
def test_random_operations_agree_with_a_naive_recount(ledger, ops) -> None:
    led = ledger(LAYOUT)
    cap = [4, 8, 2, 8]
    free = list(cap)
    for alloc, node, gpus in ops:
        if alloc and gpus <= free[node]:
            led.allocate([(node, gpus)])
            free[node] -= gpus
        elif not alloc and free[node] + gpus <= cap[node]:
            led.release([(node, gpus)])
            free[node] += gpus
        assert [led.free_of(n) for n in range(4)] == free
        assert led.free_gpus == sum(free)
        assert [led.leaf_free(0), led.leaf_free(1)] == [free[0] + free[1], free[2] + free[3]]
        assert list(led.avail_nodes()) == [n for n in range(4) if free[n]]
        assert list(led.idle_nodes()) == [n for n in range(4) if free[n] == cap[n]]
        assert list(led.fullest_first()) == sorted(
            (n for n in range(4) if free[n]), key=lambda n: (-free[n], n)
        )
        for g in range(1, 9):
            assert led.best_fit_node(g) == _naive_best_fit(free, [0, 1, 2, 3], g)
            assert led.best_fit_node(g, leaf=1) == _naive_best_fit(free, [2, 3], g)

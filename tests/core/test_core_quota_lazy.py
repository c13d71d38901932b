"""PartitionQuota integrates each tenant's usage and demand lazily (only the tenant a change touches,
all at `report`): the same integrals as integrating every tenant at every change (the reference
below, the module's previous algorithm), and the same `all_waiting` answers, on random change
sequences (hypothesis)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.model import QuotaSpec
from gputwin.core.quota import PartitionQuota

TENANTS = ("a", "b", "c")
QUOTAS = (QuotaSpec("a", 4, cohort="k"), QuotaSpec("b", 2, cohort="k"), QuotaSpec("c", 3))


class _EagerReference:
    """Integrates every tenant at every change: the definition the lazy integrals must equal."""

    def __init__(self) -> None:
        self.nominal = {q.tenant: q.gpus for q in QUOTAS}
        self.used = dict.fromkeys(self.nominal, 0)
        self.demand = dict.fromkeys(self.nominal, 0)
        self.since = 0.0
        self.areas = {t: [0.0, 0.0, 0.0, 0.0] for t in self.nominal}

    def change(self, now: float, tenant: str, used: int, demand: int) -> None:
        self.advance(now)
        self.used[tenant] += used
        self.demand[tenant] += demand

    def advance(self, now: float) -> None:
        span = now - self.since
        if span > 0.0:
            for t, area in self.areas.items():
                u, n, d = self.used[t], self.nominal[t], self.demand[t]
                area[0] += u * span
                area[1] += max(0, u - n) * span
                area[2] += min(u, n) * span
                area[3] += min(d, n) * span
            self.since = now

    def all_waiting(self, waiting: set[str]) -> bool:
        return all(t in waiting or self.demand[t] == self.used[t] for t in self.nominal)


def _changes(times: st.SearchStrategy[float]) -> st.SearchStrategy[list[tuple[float, str, int, int]]]:
    # (time step, tenant, queued GPUs added, queued GPUs started): demand and usage stay >= 0 below.
    # A negative step is a change told late (before the latest instant): it counts from that instant.
    change = st.tuples(times, st.sampled_from(TENANTS), st.integers(0, 6), st.integers(0, 6))
    return st.lists(change, max_size=60)


def _replay(changes: list[tuple[float, str, int, int]]) -> tuple[PartitionQuota, _EagerReference]:
    lazy, eager = PartitionQuota("p", QUOTAS), _EagerReference()
    now = 0.0
    for step, tenant, queue, start in changes:
        now = max(0.0, now + step)
        queued = eager.demand[tenant] - eager.used[tenant] + queue
        start = min(start, queued)
        stop = min(eager.used[tenant], 3) if step < 0 else 0  # some changes end running work
        used, demand = start - stop, queue - stop
        lazy.change(now, tenant, used=used, demand=demand)
        eager.change(now, tenant, used, demand)
        for waiting in ({"a"}, {"a", "b"}, {"b", "c"}, set(TENANTS)):
            assert lazy.all_waiting(waiting) is eager.all_waiting(waiting)
    end = now + 7.0
    eager.advance(end)
    assert lazy.used == eager.used and lazy.demand == eager.demand
    return lazy, eager


def _integrals(lazy: PartitionQuota, eager: _EagerReference, end: float) -> list[tuple[list[float], ...]]:
    return [([u.used, u.borrowed, u.delivered, u.entitled], eager.areas[u.tenant]) for u in lazy.report(end)]


@settings(max_examples=200, deadline=None)
@given(_changes(st.integers(-50, 1000).map(float)))
def test_lazy_integrals_equal_eager_ones_exactly_on_whole_second_times(changes) -> None:
    # Whole seconds and whole GPUs: every product and sum is an exact float, so any difference is a bug.
    lazy, eager = _replay(changes)
    for got, expected in _integrals(lazy, eager, eager.since):
        assert got == expected


@settings(max_examples=200, deadline=None)
@given(_changes(st.floats(-50.0, 1000.0, allow_nan=False, allow_infinity=False)))
def test_lazy_integrals_equal_eager_ones_to_rounding_on_any_times(changes) -> None:
    # Sums of u * span over fewer, longer spans: equal up to the last bits of each float.
    lazy, eager = _replay(changes)
    for got, expected in _integrals(lazy, eager, eager.since):
        assert all(math.isclose(g, e, rel_tol=1e-12, abs_tol=1e-9) for g, e in zip(got, expected))
